import kaldiio
import numpy as np
import python_speech_features as psf

from asrscale.config.sections import FeatureConfig
from asrscale.data.datadir import read_data_dir, read_table
from asrscale.data.features import Normaliser, compute, read_frame_counts
from helpers import ROOT, build, load_audio


def reference_signal(rate: int = 16000) -> np.ndarray:
    """0.3 s of a tone, a chirp, noise and a DC offset: what tests/fixtures/kaldi_fbank.txt was made
    of."""
    t = np.arange(int(0.3 * rate)) / rate
    return (
        0.3 * np.sin(2 * np.pi * 440 * t)
        + 0.2 * np.sin(2 * np.pi * (300 + 4000 * t) * t)
        + 0.05 * np.random.default_rng(0).standard_normal(len(t))
        + 0.01
    ).astype(np.float32)


def test_filterbanks_are_kaldis():
    """Against kaldi-native-fbank 1.22.4 (k2-fsa's C++ port of Kaldi's compute-fbank-feats; its
    defaults but dither 0 and 40 bands), whose output on `reference_signal` at int16's scale is
    tests/fixtures/kaldi_fbank.txt (its header says how it was made): the same frames, every band
    within 0.001 of Kaldi's log energy (measured: 3.3e-5, float32 rounding)."""
    expected = np.loadtxt(ROOT / "tests" / "fixtures" / "kaldi_fbank.txt")
    found = compute(reference_signal(), build(FeatureConfig, "features"))
    assert found.shape == expected.shape == (28, 40)
    np.testing.assert_allclose(found, expected, atol=1e-3)
    # python_speech_features' logfbank (a rectangular window, no DC removal, its own bands) is not
    # Kaldi's
    theirs = psf.logfbank(reference_signal(), 16000, 0.025, 0.01, 40, 512)[:28] + np.log(32768**2)
    assert np.abs(theirs - expected).max() > 1


def test_dither_draws_from_the_audio_the_same_noise_every_time():
    config = build(FeatureConfig, "features", dither=1.0)
    once, again = compute(reference_signal(), config), compute(reference_signal(), config)
    np.testing.assert_array_equal(once, again)
    assert np.abs(once - compute(reference_signal(), build(FeatureConfig, "features"))).max() > 1e-4


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
