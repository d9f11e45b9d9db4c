import kaldiio
import numpy as np
import python_speech_features as psf

from asrscale.config.schema import build
from asrscale.config.sections import FeatureConfig
from asrscale.data.audio import load_audio
from asrscale.data.datadir import read_data_dir, read_table
from asrscale.data.features import Normaliser, compute, read_frame_counts


def test_log_mel_equals_python_speech_features(corpus):
    data = read_data_dir(corpus / "data" / "dev")
    for path in list(data.wav.values())[:5]:
        audio = load_audio(path, 16000)
        expected = psf.logfbank(audio, 16000, 0.025, 0.01, 40, 512)
        np.testing.assert_allclose(compute(audio, build(FeatureConfig, "features")), expected, atol=1e-4)


def test_mfcc_with_deltas_has_39_dims(corpus):
    audio = load_audio(next(iter(read_data_dir(corpus / "data" / "dev").wav.values())), 16000)
    feats = compute(audio, build(FeatureConfig, "features", kind="mfcc"))
    assert feats.shape[1] == 39 == build(FeatureConfig, "features", kind="mfcc").dim


def test_resampling_on_read(tmp_path):
    import soundfile

    soundfile.write(tmp_path / "a.wav", np.sin(np.arange(8000) / 5).astype(np.float32), 8000)
    assert len(load_audio(str(tmp_path / "a.wav"), 16000)) == 16000


def test_stored_features_frame_counts_and_global_cmvn(corpus):
    feats, frames = corpus / "feats" / "train", read_frame_counts(corpus / "feats" / "train")
    stored = kaldiio.load_scp(str(feats / "feats.scp"))
    assert set(stored) == set(frames) == set(read_table(corpus / "data" / "train" / "text"))
    utt2spk = read_table(corpus / "data" / "train" / "utt2spk")
    normalise = Normaliser("global", feats / "cmvn.npz", feats / "cmvn.npz", utt2spk)
    everything = np.concatenate([normalise(u, stored[u]) for u in frames])
    assert len(everything) == sum(frames.values())
    np.testing.assert_allclose(everything.mean(0), 0, atol=1e-3)
    np.testing.assert_allclose(everything.std(0), 1, atol=1e-3)
    per_speaker = Normaliser("speaker", feats / "cmvn.npz", feats / "cmvn.npz", utt2spk)
    speaker = next(iter(set(utt2spk.values())))
    own = np.concatenate([per_speaker(u, stored[u]) for u in frames if utt2spk[u] == speaker])
    np.testing.assert_allclose(own.mean(0), 0, atol=1e-3)
