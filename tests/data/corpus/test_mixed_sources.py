"""Any two source formats in one subset, segmented or not, piped or not: imported and through
feature extraction with every utterance cut from the right place."""

import gzip
import itertools
import json

import numpy as np
import pytest
import soundfile

from asrscale.data.corpus.sources import import_subset
from asrscale.data.datadir import read_data_dir
from asrscale.data.features import extract_part, read_frame_counts
from helpers import bad_input_policy, feature_config, import_settings, read_frame_counts_of_part

SEGMENTED = ("kaldi_segments", "manifest_segments")
LHOTSE = ("lhotse_supervisions", "lhotse_cuts")  # lhotse's cuts, which lhotse loads
WHOLE = ("kaldi", "kaldi_piped", "librispeech", "manifest")
KINDS = SEGMENTED + WHOLE


def write_jsonl(path, rows, gzipped=False):
    text = "".join(json.dumps(row) + "\n" for row in rows).encode()
    path.write_bytes(gzip.compress(text) if gzipped else text)


def concatenate(audio_files, out):
    """One recording of several utterances: (start, end) of each in it, in seconds."""
    signals = [soundfile.read(f)[0] for f in audio_files]
    soundfile.write(out, np.concatenate(signals), 16000)
    ends = np.cumsum([len(s) / 16000 for s in signals])
    return list(zip([0.0, *ends[:-1]], ends))


def write_source(kind, train, utts, folder):
    """One source of `kind` holding the utterances `utts` of the tiny corpus's train set: its
    entry in corpus.subsets, and each utterance's id there -> its id in the tiny corpus."""
    folder.mkdir(parents=True)
    writer = kind.split("_")[0]
    return {"kaldi": _kaldi, "librispeech": _librispeech, "manifest": _manifest, "lhotse": _lhotse}[
        writer
    ](kind, train, utts, folder)


def _table(folder, name, rows):
    (folder / name).write_text("".join(f"{key} {value}\n" for key, value in sorted(rows.items())))


def _kaldi(kind, train, utts, folder):
    wav = train.wav
    scp = {u: f"cat {wav[u]} |" if kind == "kaldi_piped" else wav[u] for u in utts}
    if (
        kind == "kaldi_segments"
    ):  # three cut from one recording, the others each their own, one piped
        spans = concatenate([wav[u] for u in utts[:3]], folder / "long.wav")
        scp = {
            "long": "long.wav",
            utts[3]: f"cat {wav[utts[3]]} |",
            **{u: wav[u] for u in utts[4:]},
        }
        _table(
            folder,
            "segments",
            {u: f"long {s:.6f} {e:.6f}" for u, (s, e) in zip(utts, spans)}
            | {u: f"{u} 0 -1" for u in utts[3:]},
        )
    _table(folder, "wav.scp", scp)
    _table(folder, "text", {u: train.text[u] for u in utts})
    if kind != "kaldi_piped":  # without utt2spk: each utterance its own speaker
        _table(folder, "utt2spk", {u: train.utt2spk[u] for u in utts})
    return {"format": "kaldi", "path": str(folder)}, {u: u for u in utts}


def _librispeech(kind, train, utts, folder):
    chapter = folder / "19" / "198"
    chapter.mkdir(parents=True)
    ids = {f"19-198-{i:04d}": u for i, u in enumerate(utts)}
    for new, u in ids.items():
        soundfile.write(chapter / f"{new}.flac", soundfile.read(train.wav[u])[0], 16000)
    (chapter / "19-198.trans.txt").write_text(
        "".join(f"{new} {train.text[u]}\n" for new, u in ids.items())
    )
    return {"format": "librispeech", "path": str(folder)}, ids


def _manifest(kind, train, utts, folder):
    wav, text = train.wav, train.text
    if kind == "manifest":
        rows = "".join(f"{u}\t{wav[u]}\t{text[u]}\n" for u in utts)
        (folder / "m.tsv").write_text("id\tpath\ttext\n" + rows)
        return {"format": "manifest", "path": str(folder / "m.tsv")}, {u: u for u in utts}
    spans = concatenate([wav[u] for u in utts[:3]], folder / "long.wav")
    rows = [
        {"id": u, "path": "long.wav", "text": text[u], "start": s, "end": e}
        for u, (s, e) in zip(utts, spans)
    ]
    write_jsonl(
        folder / "m.jsonl.gz",
        rows + [{"id": u, "path": wav[u], "text": text[u]} for u in utts[3:]],
        True,
    )
    return {"format": "manifest", "path": str(folder / "m.jsonl.gz")}, {u: u for u in utts}


def _lhotse(kind, train, utts, folder):
    """One recording cut three ways, a recording per other utterance, one by a command; as
    supervisions and recordings, or as cuts."""
    wav, text, speaker = train.wav, train.text, train.utt2spk
    spans = concatenate([wav[u] for u in utts[:3]], folder / "long.wav")
    recordings = [
        {
            "id": "long",
            "sources": [{"type": "file", "channels": [0], "source": str(folder / "long.wav")}],
            "sampling_rate": 16000,
            "num_samples": soundfile.info(folder / "long.wav").frames,
            "duration": spans[-1][1],
        }
    ]
    supervisions = [
        {
            "id": u,
            "recording_id": "long",
            "start": s,
            "duration": e - s,
            "channel": 0,
            "text": text[u],
            "speaker": speaker[u],
        }
        for u, (s, e) in zip(utts, spans)
    ]
    for index, u in enumerate(utts[3:]):
        source = (
            {"type": "command", "source": f"cat {wav[u]}"}
            if index == 0
            else {"type": "file", "source": wav[u]}
        )
        info = soundfile.info(wav[u])
        duration = info.duration
        recordings.append(
            {
                "id": f"rec-{u}",
                "sources": [{"channels": [0], **source}],
                "sampling_rate": 16000,
                "num_samples": info.frames,
                "duration": duration,
            }
        )
        supervisions.append(
            {
                "id": u,
                "recording_id": f"rec-{u}",
                "start": 0.0,
                "duration": duration,
                "channel": 0,
                "text": text[u],
                "speaker": speaker[u],
            }
        )
    same = {u: u for u in utts}
    if kind == "lhotse_cuts":
        by_id = {r["id"]: r for r in recordings}
        cuts = [
            {
                "id": f"cut-{s['id']}",
                "start": s["start"],
                "duration": s["duration"],
                "channel": 0,
                "supervisions": [dict(s, start=0.0)],
                "recording": by_id[s["recording_id"]],
                "type": "MonoCut",
            }
            for s in supervisions
        ]
        write_jsonl(folder / "tiny_cuts_train.jsonl.gz", cuts, gzipped=True)
        return {"format": "lhotse", "path": str(folder / "tiny_cuts_train.jsonl.gz")}, same
    write_jsonl(folder / "tiny_recordings_train.jsonl", recordings)
    write_jsonl(folder / "tiny_supervisions_train.jsonl", supervisions)
    return {"format": "lhotse", "path": str(folder / "tiny_supervisions_train.jsonl")}, same


@pytest.fixture(scope="module")
def sources(corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    train = read_data_dir(corpus / "data" / "train")
    utts = sorted(train.text)
    return {
        kind: write_source(kind, train, utts[6 * i : 6 * i + 6], root / kind)
        for i, kind in enumerate(KINDS)
    }


PAIRS = list(itertools.combinations(KINDS, 2))


@pytest.mark.parametrize("first, second", PAIRS)
def test_two_formats_mix_in_one_subset_through_features(corpus, sources, tmp_path, first, second):
    subset = ("train", "dev", "test")[PAIRS.index((first, second)) % 3]  # every subset alike
    stop = import_settings(bad_input={"policy": "stop"})  # not one utterance may be left out
    import_subset([sources[first][0], sources[second][0]], stop, tmp_path / subset)
    data = read_data_dir(tmp_path / subset)
    assert bool(data.segments) == (first in SEGMENTED or second in SEGMENTED)
    assert bool(data.cuts) == (first in LHOTSE or second in LHOTSE)
    extract_part(data, feature_config(), 0, 1, tmp_path / "part0", bad_input_policy("stop"))
    original = read_frame_counts(corpus / "feats" / "train")
    ids = {**sources[first][1], **sources[second][1]}
    assert read_frame_counts_of_part(tmp_path / "part0") == {
        new: original[old] for new, old in ids.items()
    }
    assert data.text == {
        new: corpus_text
        for new, old in ids.items()
        for corpus_text in [read_data_dir(corpus / "data" / "train").text[old]]
    }
