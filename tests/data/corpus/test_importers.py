"""Importers of users' corpora, and every kind of bad input: skipped and reported, or stopped at."""

import json
import subprocess
import sys
from dataclasses import asdict

import numpy as np
import pytest
import soundfile

from asrscale.config.sections import TextNormalisation
from asrscale.data.badinput import BadInput
from asrscale.data.corpus.sources import import_subset, normalise
from asrscale.data.datadir import read_data_dir
from asrscale.data.features import extract_part, read_frame_counts
from helpers import (
    bad_input_policy,
    build,
    feature_config,
    import_settings,
    read_frame_counts_of_part,
    write_own_corpora,
)

SKIP_ALL = import_settings(bad_input={"max_fraction": 1.0})


@pytest.fixture(scope="module")
def sources(corpus, tmp_path_factory):
    return write_own_corpora(corpus, tmp_path_factory.mktemp("own"))


def skipped(folder) -> dict[str, str]:
    rows = [line.split("\t") for line in (folder / "skipped.tsv").read_text().splitlines()[1:]]
    return {utt: f"{where}: {reason}" for utt, _, where, _, reason in rows}


def test_each_format_imports_every_utterance_normalised(corpus, sources, tmp_path):
    original = {s: read_data_dir(corpus / "data" / s) for s in ("train", "dev", "test")}
    kaldi = import_subset(
        [{"format": "kaldi", "path": sources["kaldi"]}], import_settings(), tmp_path / "train"
    )
    assert kaldi.text == original["train"].text  # upper case and punctuation normalised away
    assert len(kaldi.segments) == len(kaldi.text) and set(kaldi.wav) > {"long"}
    assert any(spec.endswith("|") for spec in kaldi.wav.values())
    for utt in kaldi.text:  # segments cut the right span: durations agree with the original files
        assert kaldi.utt2dur[utt] == pytest.approx(original["train"].utt2dur[utt], abs=2e-3)
    libri = import_subset(
        [{"format": "librispeech", "path": sources["librispeech"]}],
        import_settings(),
        tmp_path / "d",
    )
    assert sorted(libri.text.values()) == sorted(original["dev"].text.values())
    assert all(utt.startswith(speaker + "-") for utt, speaker in libri.utt2spk.items())
    manifests = [
        {"format": "manifest", "path": sources["tsv"]},
        {"format": "manifest", "path": sources["jsonl"]},
    ]
    test = import_subset(manifests, import_settings(), tmp_path / "test")
    assert test.text == original["test"].text and test.utt2spk == original["test"].utt2spk
    written = read_data_dir(tmp_path / "train")
    assert (written.wav, written.segments, written.text) == (kaldi.wav, kaldi.segments, kaldi.text)
    # a quick try: the first speaker, by id, of each source (corpus.speakers)
    few = import_subset(
        [{"format": "librispeech", "path": sources["librispeech"]}],
        import_settings(speakers=1),
        tmp_path / "few",
    )
    assert set(few.utt2spk.values()) == {min(libri.utt2spk.values())} and len(few.text) < len(
        libri.text
    )


def test_features_of_segments_pipes_flac_and_sphere_equal_the_originals(corpus, sources, tmp_path):
    import_subset(
        [{"format": "kaldi", "path": sources["kaldi"]}], import_settings(), tmp_path / "data"
    )
    extract_part(
        read_data_dir(tmp_path / "data"),
        feature_config(),
        0,
        1,
        tmp_path / "part0",
        bad_input_policy("skip"),
    )
    ours = read_frame_counts_of_part(tmp_path / "part0")
    theirs = read_frame_counts(corpus / "feats" / "train")
    assert ours == theirs


def test_text_normalisation():
    default = build(TextNormalisation, "corpus.text")
    assert (
        normalise("  HELLO, World!  it's \"fine\" -- 'quoted' ", default)
        == "hello world it's fine quoted"
    )
    assert normalise("A, b", TextNormalisation(lowercase=False, punctuation="keep")) == "A, b"


def write_kaldi(
    folder, wav: dict, text: dict, segments: dict | None = None, raw_text: bytes | None = None
):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "wav.scp").write_text("".join(f"{k} {v}\n" for k, v in wav.items()))
    (folder / "text").write_bytes(
        raw_text or "".join(f"{k} {v}\n" for k, v in text.items()).encode()
    )
    if segments:
        (folder / "segments").write_text("".join(f"{k} {v}\n" for k, v in segments.items()))


def tone(seconds=0.5, rate=16000, channels=1):
    samples = 0.3 * np.sin(np.arange(int(seconds * rate)) * 2 * np.pi * 440 / rate).astype(
        np.float32
    )
    return (
        np.stack([samples * (c + 1) / channels for c in range(channels)], 1)
        if channels > 1
        else samples
    )


def test_bad_input_at_import_is_skipped_with_its_file_line_and_reason(tmp_path):
    audio = tmp_path / "audio"
    audio.mkdir()
    soundfile.write(audio / "good.wav", tone(), 16000)
    soundfile.write(audio / "long.wav", tone(2.0), 16000)
    soundfile.write(audio / "stereo.wav", tone(channels=2), 16000)
    (audio / "notaudio.wav").write_text("this is not audio")
    (audio / "zero.wav").write_bytes(b"")
    soundfile.write(audio / "empty.wav", np.zeros(0, np.float32), 16000)
    wav = {
        "good": audio / "good.wav",
        "missing": audio / "nowhere.wav",
        "garbage": audio / "notaudio.wav",
        "zerobytes": audio / "zero.wav",
        "empty": audio / "empty.wav",
        "stereo": audio / "stereo.wav",
        "notext": audio / "good.wav",
        "dup": audio / "good.wav",
        "emptytext": audio / "good.wav",
        "badpipe": "false |",
        "long": audio / "long.wav",
    }
    text = "".join(
        f"{u} words\n" for u in wav if u not in ("notext", "emptytext", "dup", "long")
    ).encode()
    text += b"emptytext  ...\nnotinwav hello\ndup one\ndup two\nlatin caf\xe9\n"
    wav["latin"] = audio / "good.wav"
    segments = {u: f"{u} 0 -1" for u in wav if u != "long"}
    segments |= {"seg_ok": "long 0.5 1.5", "seg_beyond": "long 1.5 2.5", "seg_norec": "nothere 0 1"}
    text += b"seg_ok fine\nseg_beyond too far\nseg_norec lost\n"
    write_kaldi(tmp_path / "kaldi", wav, {}, segments, raw_text=text)
    data = import_subset(
        [{"format": "kaldi", "path": tmp_path / "kaldi"}], SKIP_ALL, tmp_path / "out"
    )
    assert sorted(data.text) == ["good", "seg_ok", "stereo"]
    reasons = skipped(tmp_path / "out")
    expected = {
        "missing": "does not exist",
        "garbage": "not readable",
        "zerobytes": "not readable",
        "empty": "is empty",
        "notext": "has audio but no transcript",
        "notinwav": "has a transcript but is not in",
        "dup": "duplicate id 'dup'",
        "emptytext": "empty transcript",
        "latin": "not valid UTF-8",
        "badpipe": "command failed",
        "seg_beyond": "after the end of its recording",
        "seg_norec": "recording 'nothere' is not in",
    }
    assert set(reasons) == set(expected)
    for utt, reason in expected.items():
        assert reason in reasons[utt], (utt, reasons[utt])
    assert reasons["latin"].startswith(f"{tmp_path / 'kaldi' / 'text'}:")  # names the file and line
    with pytest.raises(BadInput, match="channel"):  # a mono file has no second channel
        write_kaldi(tmp_path / "mono", {"m": audio / "good.wav"}, {"m": "mono"})
        second_channel = import_settings(features=dict(channel=1))
        import_subset(
            [{"format": "kaldi", "path": tmp_path / "mono"}], second_channel, tmp_path / "o2"
        )


def test_stop_policy_names_the_file_and_line(tmp_path):
    soundfile.write(tmp_path / "good.wav", tone(), 16000)
    write_kaldi(
        tmp_path / "k",
        {"a": tmp_path / "good.wav", "b": tmp_path / "gone.wav"},
        {"a": "x", "b": "y"},
    )
    stop = import_settings(bad_input={"policy": "stop"})
    with pytest.raises(BadInput, match=r"wav.scp:2: audio file .*gone.wav does not exist"):
        import_subset([{"format": "kaldi", "path": tmp_path / "k"}], stop, tmp_path / "out")


def test_too_many_bad_utterances_stop_after_writing_the_report_in_one_line(tmp_path):
    soundfile.write(tmp_path / "good.wav", tone(), 16000)
    wav = {"a": tmp_path / "good.wav", "b": tmp_path / "gone.wav", "c": tmp_path / "gone2.wav"}
    write_kaldi(tmp_path / "k", wav, {u: "x" for u in wav})
    half = import_settings(bad_input={"max_fraction": 0.5})
    stage_settings = {
        "sources": [{"format": "kaldi", "path": str(tmp_path / "k")}],
        "features": asdict(half.features),
        "text": asdict(half.text),
        "bad_input": asdict(half.bad_input),
        "speakers": None,
    }
    (tmp_path / "settings.json").write_text(json.dumps(stage_settings))
    command = [
        sys.executable,
        "-m",
        "asrscale",
        "import-data",
        "--settings",
        tmp_path / "settings.json",
        "--out",
        tmp_path / "out",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.splitlines()  # what the job's log shows: one line that says it all
    assert line.startswith(
        "asrscale import-data: 2 of 3 utterances are bad, more than corpus.bad_input.max_fraction"
    )
    assert "k/wav.scp:2: audio file" in line and "does not exist" in line
    assert set(skipped(tmp_path / "out")) == {"b", "c"} and not (tmp_path / "out" / "text").exists()


def test_manifest_rows_that_are_bad(tmp_path):
    soundfile.write(tmp_path / "a.wav", tone(1.0), 16000)
    (tmp_path / "m.tsv").write_text(
        "path\ttext\tstart\tend\na.wav\tfirst half\t0\t0.5\na.wav\tbeyond\t0.5\t3\n"
        "a.wav\ttoo few fields\nb.wav\tmissing\t\t\n"
    )
    data = import_subset(
        [{"format": "manifest", "path": tmp_path / "m.tsv"}], SKIP_ALL, tmp_path / "out"
    )
    assert list(data.text.values()) == ["first half"] and list(data.utt2dur.values()) == [0.5]
    reasons = list(skipped(tmp_path / "out").values())
    assert any("m.tsv:3" in r and "after the end" in r for r in reasons)
    assert any("m.tsv:4" in r and "2 fields, the header has 4" in r for r in reasons)
    assert any("m.tsv:5" in r and "does not exist" in r for r in reasons)
    (tmp_path / "bad.tsv").write_text("file\twords\n")
    with pytest.raises(BadInput, match=r"bad.tsv:1: the header must name the columns"):
        import_subset(
            [{"format": "manifest", "path": tmp_path / "bad.tsv"}], SKIP_ALL, tmp_path / "o2"
        )


def test_a_path_that_does_not_exist(tmp_path):
    with pytest.raises(BadInput, match="does not exist"):
        import_subset(
            [{"format": "kaldi", "path": tmp_path / "nowhere"}], SKIP_ALL, tmp_path / "out"
        )
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="not a LibriSpeech directory"):
        import_subset(
            [{"format": "librispeech", "path": tmp_path / "empty"}], SKIP_ALL, tmp_path / "out"
        )


def write_audio_that_features_find_bad(audio) -> dict:
    """A good file, audio that making features resamples or takes a channel of (8 kHz, stereo),
    and the faults only it finds (silent, too short, a WAV and a FLAC file cut in half); by
    utterance id."""
    audio.mkdir()
    soundfile.write(audio / "good.wav", tone(1.0), 16000)
    soundfile.write(audio / "silent.wav", np.zeros(16000, np.float32), 16000)
    soundfile.write(audio / "low.wav", tone(1.0, rate=8000), 8000)
    soundfile.write(audio / "stereo.wav", tone(1.0, channels=2), 16000)
    soundfile.write(audio / "short.wav", tone(0.05), 16000)
    for name in ("cut.wav", "cut.flac"):
        soundfile.write(audio / name, tone(1.0), 16000)
        size = (audio / name).stat().st_size
        with open(audio / name, "r+b") as file:
            file.truncate(size // 2)
    return {path.stem + path.suffix.replace(".", "_"): path for path in sorted(audio.iterdir())}


def test_bad_audio_found_when_features_are_made(tmp_path, capsys):
    wav = write_audio_that_features_find_bad(tmp_path / "audio")
    write_kaldi(tmp_path / "k", wav, {utt: "words" for utt in wav})
    import_subset([{"format": "kaldi", "path": tmp_path / "k"}], SKIP_ALL, tmp_path / "data")
    data = read_data_dir(tmp_path / "data")
    prefix = tmp_path / "feats" / "part0"
    extract_part(data, feature_config(), 0, 1, prefix, bad_input_policy("skip", max_fraction=1.0))
    assert sorted(read_frame_counts_of_part(prefix)) == ["good_wav", "low_wav", "stereo_wav"]
    reasons = {
        line.split("\t")[0]: line
        for line in prefix.with_suffix(".skipped").read_text().splitlines()[1:]
    }
    assert "silent audio" in reasons["silent_wav"] and "fewer than 10" in reasons["short_wav"]
    assert "truncated" in reasons["cut_wav"] and "unreadable audio" in reasons["cut_flac"]
    assert "resampled to 16000 Hz" in capsys.readouterr().out
    frames = read_frame_counts_of_part(prefix)
    assert frames["low_wav"] == frames["good_wav"]  # 8 kHz audio resampled: the same frame rate
    # the channel chosen in config: the stereo file's second channel is twice its first
    extract_part(
        data,
        feature_config(channel=1),
        0,
        1,
        tmp_path / "ch1",
        bad_input_policy("skip", max_fraction=1.0),
    )
    import kaldiio

    first = kaldiio.load_scp(str(prefix.with_suffix(".scp")))["stereo_wav"]
    second = kaldiio.load_scp(str((tmp_path / "ch1").with_suffix(".scp")))["stereo_wav"]
    tone_band = first.mean(
        axis=0
    ).argmax()  # (the other bands hold the 16-bit files' quantisation noise)
    assert np.median(second[:, tone_band] - first[:, tone_band]) == pytest.approx(
        2 * np.log(2), abs=1e-3
    )
    with pytest.raises(BadInput, match=r"cut.flac: unreadable audio"):
        extract_part(data, feature_config(), 0, 1, tmp_path / "stop", bad_input_policy("stop"))


def test_kaldi_features_instead_of_audio(corpus, sources, tmp_path):
    import kaldiio

    kaldi = import_settings(features=dict(kind="kaldi", kaldi_dim=40))
    data = import_subset([{"format": "kaldi", "path": sources["kaldi"]}], kaldi, tmp_path / "data")
    assert (
        not data.wav
        and len(data.feats) == len(data.text)
        and (tmp_path / "data" / "feats.scp").is_file()
    )
    extract_part(
        read_data_dir(tmp_path / "data"),
        kaldi.features,
        0,
        1,
        tmp_path / "part0",
        bad_input_policy("skip"),
    )
    ours, theirs = (
        kaldiio.load_scp(str(scp))
        for scp in (tmp_path / "part0.scp", corpus / "feats" / "train" / "feats.scp")
    )
    assert sorted(ours) == sorted(theirs) and all(np.array_equal(ours[u], theirs[u]) for u in ours)
    wrong = import_settings(features=dict(kind="kaldi", kaldi_dim=13), bad_input={"policy": "stop"})
    with pytest.raises(BadInput, match=r"features .* are \(\d+, 40\); features.kaldi_dim is 13"):
        import_subset([{"format": "kaldi", "path": sources["kaldi"]}], wrong, tmp_path / "wrong")


def test_the_same_id_in_two_sources_is_skipped_in_both(sources, tmp_path):
    tsv = [{"format": "manifest", "path": sources["tsv"]}]
    with pytest.raises(BadInput, match="no usable utterance"):  # every id twice: none is kept
        import_subset(tsv + tsv, SKIP_ALL, tmp_path / "out")
    assert all("duplicate utterance id" in reason for reason in skipped(tmp_path / "out").values())
    prefixed = import_subset(tsv + [dict(tsv[0], prefix="b-")], SKIP_ALL, tmp_path / "kept")
    assert len(prefixed.text) == 2 * len(skipped(tmp_path / "out"))
