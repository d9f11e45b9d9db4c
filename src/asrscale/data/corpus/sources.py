"""Bringing your own corpus: what every importer yields, the checks all formats share, and what
happens to bad input.

An importer (one module per format, registered in `formats.py`) reads one format into `Entry`s
(`entry.py`), each naming the file and line it came from. `import_subset` gathers the entries of one
subset (train, dev or test) from any number of sources and writes the data dir the rest of the
workflow reads, after the checks every format needs: unique ids, a transcript that is valid UTF-8
and not empty after normalisation, audio that exists with a readable header, the configured channel,
a segment inside its recording. A bad utterance is left out and written with its reason to
`skipped.tsv`, or stops the run, as `corpus.bad_input` says; more than `max_fraction` of a subset
bad stops it too (the report is written first)."""

import math
import re
import unicodedata
from dataclasses import replace
from pathlib import Path

import kaldiio
import soundfile

from asrscale.config.sections import FeatureConfig, ImportSettings, TextNormalisation
from asrscale.data.audio import open_audio
from asrscale.data.badinput import BadInput, Skipped
from asrscale.data.corpus.entry import Entry
from asrscale.data.corpus.formats import FORMATS, source_problem
from asrscale.data.datadir import DataDir
from asrscale.data.wavspec import is_command


def normalise(text: str, settings: TextNormalisation) -> str:
    """A transcript as training and scoring see it (corpus.text)."""
    if settings.lowercase:
        text = text.lower()
    if settings.punctuation == "strip":
        text = "".join(
            " " if unicodedata.category(c).startswith("P") and c != "'" else c for c in text
        )
        text = re.sub(r"(?<!\w)'|'(?!\w)", " ", text)
    return " ".join(text.split())


def probe(spec: str) -> soundfile._SoundFileInfo:
    """The audio's header; a BadInput that says what is wrong with it."""
    if not is_command(spec) and not Path(spec).is_file():
        raise BadInput(f"audio file {spec} does not exist")
    try:
        info = soundfile.info(open_audio(spec))
    except (soundfile.LibsndfileError, RuntimeError, TypeError) as error:
        raise BadInput(f"audio {spec} is not readable: {error}") from None
    if info.frames == 0:
        raise BadInput(f"audio {spec} is empty")
    return info


def _features_duration(entry: Entry, features: FeatureConfig) -> float:
    """Seconds of a Kaldi feature matrix (features.kind "kaldi"), checked against
    features.kaldi_dim."""
    if entry.feats is None:
        raise BadInput("no feats.scp entry (features.kind is 'kaldi')")
    try:
        matrix = kaldiio.load_mat(entry.feats)
    except Exception as error:  # kaldiio raises many kinds for a bad ark
        raise BadInput(f"features {entry.feats} are not readable: {error}") from None
    if matrix.ndim != 2 or matrix.shape[1] != features.dim or not len(matrix):
        raise BadInput(
            f"features {entry.feats} are {matrix.shape}; features.kaldi_dim is {features.dim}"
        )
    return len(matrix) * features.shift_ms / 1000


def _audio_duration(entry: Entry, features: FeatureConfig, headers: dict, rates: set) -> float:
    """Seconds of the utterance's audio, from its header; BadInput says what is wrong with it."""
    if entry.audio not in headers:
        try:
            headers[entry.audio] = probe(entry.audio)
        except BadInput as error:
            headers[entry.audio] = error
    info = headers[entry.audio]
    if isinstance(info, BadInput):
        raise info
    if info.channels <= features.channel:
        raise BadInput(
            f"audio {entry.audio} has {info.channels} channel(s); features.channel is "
            f"{features.channel}"
        )
    if info.samplerate != features.sample_rate:
        rates.add(info.samplerate)
    if not 0 <= entry.start < math.inf or entry.end is not None and not math.isfinite(entry.end):
        raise BadInput(
            f"segment from {entry.start:g} s to {entry.end} s: expected finite times, start >= 0"
        )
    end = info.duration if entry.end is None else entry.end
    if end > info.duration + 0.01:
        raise BadInput(
            f"segment ends at {end:g} s, after the end of its recording ({info.duration:.2f} s)"
        )
    if end - entry.start <= 0:
        raise BadInput(f"empty segment ({entry.start:g} s to {end:g} s)")
    return end - entry.start


KALDI_ID = re.compile(r"[^\s]+")  # ids are the first word of a line of Kaldi's tables


def build_data_dir(entries: list[Entry], settings: ImportSettings, skipped: Skipped) -> DataDir:
    """The data dir of a subset's entries: those that pass every check, the rest in `skipped` with
    their reasons."""
    data, headers, rates, features = DataDir(), {}, set(), settings.features
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.utt] = counts.get(entry.utt, 0) + 1
    for entry in entries:
        if entry.utt in skipped:
            continue
        if problem := _id_problem(entry, counts):
            skipped.add(entry.utt, entry.where, problem)
            continue
        text = normalise(entry.text, settings.text)
        if not text:
            skipped.add(entry.utt, entry.text_where or entry.where, "empty transcript")
            continue
        if entry.cut is not None:  # lhotse's, which checked it (asrscale.data.corpus.lhotse)
            data.add(entry.utt, None, text, entry.speaker, entry.end, cut=entry.cut)
            continue
        try:
            if features.kind == "kaldi":
                duration = _features_duration(entry, features)
            else:
                duration = _audio_duration(entry, features, headers, rates)
        except BadInput as error:
            skipped.add(
                entry.utt, entry.where, str(error), "" if features.kind == "kaldi" else entry.audio
            )
            continue
        _add_utterance(data, entry, text, duration, features, skipped)
    for rate in sorted(rates):
        print(
            f"note: some audio is at {rate} Hz; it is resampled to {features.sample_rate} Hz when "
            "features are made"
        )
    return data


def _id_problem(entry: Entry, counts: dict[str, int]) -> str | None:
    """Why an entry's ids cannot be a data dir's (an id of more than one word, an utterance id of
    several entries); None where they can."""
    ids = {"utterance": entry.utt, "speaker": entry.speaker, "recording": entry.recording}
    if bad := [
        f"{kind} {v!r}" for kind, v in ids.items() if v is not None and not KALDI_ID.fullmatch(v)
    ]:
        return f"{', '.join(bad)}: an id must be one word (no spaces)"
    if counts[entry.utt] > 1:
        return f"duplicate utterance id {entry.utt!r} ({counts[entry.utt]} entries)"
    return None


def _add_utterance(
    data: DataDir,
    entry: Entry,
    text: str,
    duration: float,
    features: FeatureConfig,
    skipped: Skipped,
) -> None:
    """A checked entry into the data dir: its feature matrix (features.kind "kaldi"), or its audio
    and segment; skipped where its utterance id is another's recording, with other audio."""
    if features.kind == "kaldi":
        data.add(entry.utt, None, text, entry.speaker, duration, feats=entry.feats)
    else:
        segmented = entry.recording or entry.end is not None
        segment = (entry.recording or entry.utt, entry.start, entry.end) if segmented else None
        try:
            data.add(entry.utt, entry.audio, text, entry.speaker, duration, segment=segment)
        except ValueError as error:
            skipped.add(entry.utt, entry.where, str(error))


def import_subset(sources: list[dict], settings: ImportSettings, out: Path) -> DataDir:
    """Import one subset from its sources (each {format, path, prefix}) into the data dir `out`;
    `settings.speakers`, where given, keeps each source's first speakers alone (by id: a quick
    try)."""
    out = Path(out)
    # the watch list sits beside the data dir, which a rerun replaces
    skipped = Skipped(
        settings.bad_input, out / "skipped.tsv", "import", out.with_name(f"{out.name}.watch")
    )
    entries = []
    for index, source in enumerate(sources):
        path, prefix = Path(source["path"]), source.get("prefix", "")
        if problem := source_problem(source):
            raise BadInput(f"{path} {problem} (source {index} of this subset: {source})")
        found = FORMATS[source["format"]].read(path, skipped)
        if settings.speakers:
            kept = set(sorted({e.speaker for e in found})[: settings.speakers])
            found = [e for e in found if e.speaker in kept]
        # recordings are known only inside their source: numbered, two sources' never clash
        number = f"@{index}" if len(sources) > 1 else ""
        if prefix or number:
            found = [
                replace(
                    e,
                    utt=prefix + e.utt,
                    speaker=prefix + e.speaker,
                    recording=e.recording and prefix + e.recording + number,
                )
                for e in found
            ]
        entries += found
    total = len({e.utt for e in entries} | set(skipped.rows))
    data = build_data_dir(entries, settings, skipped)
    skipped.finish(total)
    if not data.text:
        raise BadInput(f"no usable utterance in {[s['path'] for s in sources]}")
    data.write(out)
    return data
