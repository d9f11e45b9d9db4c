"""Lhotse's manifests through the lhotse library, as icefall's recipes make them: speed-perturbed
cuts, several sources to a recording, precomputed features taken where they are the study's (else
extracted, said in the log), and a bad cut named with its manifest, line and reason."""

import gzip
import json

import numpy as np
import pytest
import soundfile
from lhotse import CutSet, Fbank, FbankConfig, Recording, SupervisionSegment
from lhotse.features.io import NumpyFilesWriter

from asrscale.data.corpus.sources import import_subset
from asrscale.data.datadir import read_data_dir
from asrscale.data.features import extract_part
from helpers import bad_input_policy, feature_config, import_settings, read_frame_counts_of_part


def _recording(folder, name: str, seconds: float, channels: int = 1) -> Recording:
    """A recording of noise (never silent), as lhotse describes a file."""
    rng = np.random.default_rng(len(name))
    samples = (0.1 * rng.standard_normal((int(16000 * seconds), channels))).astype(np.float32)
    soundfile.write(folder / f"{name}.wav", samples, 16000)
    return Recording.from_file(folder / f"{name}.wav", recording_id=name)


def _cuts(folder) -> CutSet:
    """Two recordings, each with two supervisions, as icefall's prepare step leaves them."""
    cuts = []
    for index in range(2):
        recording = _recording(folder, f"rec{index}", 2.0)
        cut = recording.to_cut()
        cut.supervisions = [
            SupervisionSegment(
                f"rec{index}-{part}", recording.id, 0.9 * part, 0.8, text="a b", speaker=f"s{index}"
            )
            for part in range(2)
        ]
        cuts.append(cut)
    return CutSet.from_cuts(cuts)


def test_speed_perturbed_cuts_import_without_a_skip_and_extract_as_lhotse_loads_them(tmp_path):
    """icefall's training cuts: each utterance at speeds 0.9, 1.0 and 1.1 (ids ending _sp0.9,
    _sp1.1); each imported, its features made from the audio lhotse perturbs (a slower cut is
    longer)."""
    cuts = _cuts(tmp_path)
    perturbed = cuts + cuts.perturb_speed(0.9) + cuts.perturb_speed(1.1)
    perturbed.to_file(tmp_path / "tiny_cuts_train.jsonl.gz")
    source = {"format": "lhotse", "path": str(tmp_path / "tiny_cuts_train.jsonl.gz")}
    stop = import_settings(bad_input={"policy": "stop"})  # not one utterance may be left out
    import_subset([source], stop, tmp_path / "train")
    data = read_data_dir(tmp_path / "train")
    assert len(data.text) == 12 and set(data.cuts) == set(data.text) and not data.wav
    assert data.utt2dur["rec0-1_sp0.9"] == pytest.approx(0.8 / 0.9, abs=1e-3)
    # the data dir's cuts are lhotse's manifest: lhotse reads them back
    assert len(CutSet.from_file(tmp_path / "train" / "cuts.jsonl.gz")) == 12
    extract_part(data, feature_config(), 0, 1, tmp_path / "part0", bad_input_policy("stop"))
    frames = read_frame_counts_of_part(tmp_path / "part0")
    assert frames["rec0-1_sp0.9"] > frames["rec0-1"] > frames["rec0-1_sp1.1"]


def test_a_recording_of_several_sources_is_a_cut_lhotse_loads(tmp_path):
    """A recording of two channels in two files (as lhotse's multi-file recordings are): its
    channel 0 imported as supervisions and recordings manifests."""
    _recording(tmp_path, "left", 1.5)
    _recording(tmp_path, "right", 1.5)
    recording = {
        "id": "two",
        "sources": [
            {"type": "file", "channels": [0], "source": "left.wav"},  # beside the manifest
            {"type": "file", "channels": [1], "source": str(tmp_path / "right.wav")},
        ],
        "sampling_rate": 16000,
        "num_samples": 24000,
        "duration": 1.5,
    }
    supervision = {"id": "u1", "recording_id": "two", "start": 0.2, "duration": 1.0}
    supervision |= {"channel": 0, "text": "a b", "speaker": "s"}
    (tmp_path / "x_recordings_dev.jsonl").write_text(json.dumps(recording) + "\n")
    (tmp_path / "x_supervisions_dev.jsonl").write_text(json.dumps(supervision) + "\n")
    source = {"format": "lhotse", "path": str(tmp_path / "x_supervisions_dev.jsonl")}
    import_subset([source], import_settings(bad_input={"policy": "stop"}), tmp_path / "dev")
    data = read_data_dir(tmp_path / "dev")
    assert list(data.cuts) == ["u1"] and data.utt2dur["u1"] == pytest.approx(1.0)
    extract_part(data, feature_config(), 0, 1, tmp_path / "part0", bad_input_policy("stop"))
    assert read_frame_counts_of_part(tmp_path / "part0")["u1"] == 98  # 1 s, Kaldi's edges snipped


def _with_features(tmp_path, bins: int) -> CutSet:
    """The cuts trimmed to their supervisions with lhotse's own Kaldi filterbank of `bins` bins
    stored, as icefall's compute_fbank step leaves them."""
    cuts = _cuts(tmp_path).trim_to_supervisions(keep_overlapping=False)
    extractor = Fbank(FbankConfig(num_mel_bins=bins))
    with NumpyFilesWriter(tmp_path / f"feats{bins}") as storage:
        return CutSet.from_cuts(cut.compute_and_store_features(extractor, storage) for cut in cuts)


@pytest.mark.parametrize("bins", [40, 80])
def test_precomputed_features_are_taken_where_they_are_the_studys(tmp_path, bins, capsys):
    """icefall's fbank cuts: 80 bins are not the study's 40, so they are extracted, and said; 40
    are, and are taken as stored, bit for bit."""
    cuts = _with_features(tmp_path, bins)
    cuts.to_file(tmp_path / "tiny_cuts_test.jsonl.gz")
    source = {"format": "lhotse", "path": str(tmp_path / "tiny_cuts_test.jsonl.gz")}
    import_subset([source], import_settings(), tmp_path / "test")
    data = read_data_dir(tmp_path / "test")
    extract_part(data, feature_config(bins=40), 0, 1, tmp_path / "part0", bad_input_policy("stop"))
    said = capsys.readouterr().out
    import kaldiio

    stored = {cut.supervisions[0].id: cut.load_features() for cut in cuts}
    made = dict(kaldiio.load_ark(f"{tmp_path / 'part0'}.ark"))
    if bins == 40:
        assert "lhotse cuts: 4 utterances' features taken as stored" in said
        assert all(np.array_equal(made[utt], stored[utt]) for utt in stored)
    else:
        assert (
            "lhotse cuts: 4 utterances' features extracted (stored features: kaldi-fbank of 80 "
            "bins, where the study's have 40)" in said
        )
        assert all(made[utt].shape[1] == 40 for utt in stored)


def test_a_bad_cut_is_named_with_its_manifest_line_and_reason(tmp_path):
    cuts = _cuts(tmp_path)
    cuts.to_file(tmp_path / "c_cuts_train.jsonl.gz")
    lines = gzip.open(tmp_path / "c_cuts_train.jsonl.gz", "rt").read().splitlines()
    missing = json.loads(lines[1])
    missing["recording"]["sources"][0]["source"] = str(tmp_path / "gone.wav")
    lines[1] = json.dumps(missing)
    lines.append(json.dumps({"id": "broken", "type": "MonoCut"}))  # no recording, no duration
    with gzip.open(tmp_path / "c_cuts_train.jsonl.gz", "wt") as out:
        out.write("\n".join(lines) + "\n")
    source = {"format": "lhotse", "path": str(tmp_path / "c_cuts_train.jsonl.gz")}
    settings = import_settings(bad_input={"max_fraction": 1.0})
    import_subset([source], settings, tmp_path / "train")
    skipped = (tmp_path / "train" / "skipped.tsv").read_text().splitlines()[1:]
    where = tmp_path / "c_cuts_train.jsonl.gz"
    rows = sorted(line.split("\t") for line in skipped)
    assert rows == [
        ["c_cuts_train.jsonl.gz:3", "import", f"{where}:3", "", rows[0][4]],
        [
            "rec1-0",
            "import",
            f"{where}:2",
            str(tmp_path / "gone.wav"),
            f"audio file {tmp_path / 'gone.wav'} does not exist",
        ],
        [
            "rec1-1",
            "import",
            f"{where}:2",
            str(tmp_path / "gone.wav"),
            f"audio file {tmp_path / 'gone.wav'} does not exist",
        ],
    ]
    assert rows[0][4].startswith("not lhotse's: ")
    assert sorted(read_data_dir(tmp_path / "train").text) == ["rec0-0", "rec0-1"]
