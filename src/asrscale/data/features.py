"""Acoustic features: 40-dim log-mel filterbanks as Kaldi makes them (default) or MFCC with deltas
(python_speech_features'), stored as Kaldi ark/scp.

The filterbanks are Kaldi's `compute-fbank-feats` with its defaults (as icefall's and ESPnet's
Kaldi-compatible features are): the samples at int16's scale (as Kaldi reads a WAV file), frames
of 25 ms every 10 ms whose edges are snipped, each frame's DC offset removed, pre-emphasis 0.97,
Povey's window, a power spectrum padded to a power of two, triangular mel bands from 20 Hz to the
Nyquist frequency on the mel scale 1127 ln(1 + f / 700), their log floored at float's epsilon.
Dither is off (`features.dither`, Kaldi's default 1.0), so that the same audio gives the same
features. tests/data/test_features.py checks them against kaldi-native-fbank's (k2-fsa's C++ port of
Kaldi's) on a fixed signal. python_speech_features frames neither with Kaldi's window nor bands, so
the filterbank is numpy's; MFCC stays python_speech_features'.

Normalisation statistics are kept per speaker (sums, squares, counts), so that the loader can
apply either global CMVN (from the training set's totals) or per-speaker CMVN without another
pass over the features. Extraction splits a data dir by speaker into parts that run as jobs.
"""

import functools
import hashlib
import json
import os
import tempfile
import zlib
from dataclasses import asdict
from pathlib import Path

import kaldiio
import numpy as np
import python_speech_features as psf
import soundfile

from asrscale.config.sections import BadInputPolicy, FeatureConfig
from asrscale.data.audio import read_audio, resample
from asrscale.data.badinput import BadInput, Skipped
from asrscale.data.datadir import DataDir, read_table
from asrscale.data.wavspec import is_command
from asrscale.io import atomic_write_text
from asrscale.progress import Ticker


def mel(frequency):
    return 1127.0 * np.log(1.0 + np.asarray(frequency) / 700.0)


@functools.lru_cache(maxsize=8)
def mel_banks(bins: int, padded: int, sample_rate: int, low_hz: float = 20.0) -> np.ndarray:
    """Kaldi's triangular mel bands (MelBanks) over the first `padded` / 2 bins of the power
    spectrum: (bins of the spectrum, bands)."""
    edges = np.linspace(mel(low_hz), mel(sample_rate / 2), bins + 2)
    left, centre, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    at = mel(np.arange(padded // 2) * sample_rate / padded)[None, :]
    rising, falling = (at - left) / (centre - left), (right - at) / (right - centre)
    weights = np.where((at > left) & (at < right), np.where(at <= centre, rising, falling), 0.0)
    return np.pad(weights, ((0, 0), (0, 1))).T.astype(np.float32)  # the Nyquist bin weighs nothing


def kaldi_fbank(
    audio: np.ndarray,
    sample_rate: int,
    window_ms: float,
    shift_ms: float,
    bins: int,
    dither: float = 0.0,
) -> np.ndarray:
    """Log mel filterbanks as Kaldi's compute-fbank-feats makes them (see the module): (frames,
    bins)."""
    length, step = round(window_ms * sample_rate / 1000), round(shift_ms * sample_rate / 1000)
    samples = audio.astype(np.float64) * 32768  # Kaldi reads a WAV file's int16 values as they are
    if len(samples) < length:
        return np.zeros((0, bins), np.float32)
    frames = np.lib.stride_tricks.sliding_window_view(samples, length)[::step].copy()
    if dither:  # drawn from the audio itself: the same utterance is dithered alike in every run
        frames += dither * np.random.default_rng(zlib.crc32(audio.tobytes())).standard_normal(
            frames.shape
        )
    frames -= frames.mean(axis=1, keepdims=True)
    frames[:, 1:] -= 0.97 * frames[:, :-1]
    frames[:, 0] *= 1 - 0.97
    frames *= (
        0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / (length - 1))
    ) ** 0.85  # Povey's window
    padded = 1 << (length - 1).bit_length()
    power = np.abs(np.fft.rfft(frames, padded)) ** 2
    energies = power.astype(np.float32) @ mel_banks(bins, padded, sample_rate)
    return np.log(np.maximum(energies, np.finfo(np.float32).eps)).astype(np.float32)


def compute(audio: np.ndarray, config: FeatureConfig) -> np.ndarray:
    if config.kind == "fbank":
        return kaldi_fbank(
            audio, config.sample_rate, config.window_ms, config.shift_ms, config.bins, config.dither
        )
    window, shift = config.window_ms / 1000, config.shift_ms / 1000
    nfft = 1 << (int(window * config.sample_rate) - 1).bit_length()
    cepstra = psf.mfcc(audio, config.sample_rate, window, shift, 13, config.bins, nfft)
    deltas = psf.delta(cepstra, 2)
    return np.hstack([cepstra, deltas, psf.delta(deltas, 2)]).astype(np.float32)


MIN_FRAMES = 10  # shorter utterances (0.1 s) are left out: too short to learn from
SILENCE = 1e-4  # peak amplitude below which audio is silent (-80 dBFS)


def _usable(samples: np.ndarray, rate: int, config: FeatureConfig, resampled: set) -> np.ndarray:
    """Samples at the configured rate; BadInput where they are empty or silent."""
    if len(samples) == 0:
        raise BadInput("empty audio")
    if np.abs(samples).max() < SILENCE:
        raise BadInput("silent audio (peak below -80 dBFS)")
    if rate != config.sample_rate:
        resampled.add(rate)
        samples = resample(samples, config.sample_rate, rate).astype(np.float32)
    return samples


def _utterance_audio(data: DataDir, utt: str, config: FeatureConfig, resampled: set) -> np.ndarray:
    """The utterance's samples at the configured rate; BadInput says what is wrong with them."""
    audio, start, end = data.audio(utt)
    try:
        samples, rate = read_audio(audio, start, end, config.channel)
    except (soundfile.LibsndfileError, RuntimeError, ValueError) as error:
        raise BadInput(f"unreadable audio: {error}") from None
    return _usable(samples, rate, config, resampled)


#: lhotse's names of Kaldi's log-mel filterbank (lhotse's Fbank, KaldifeatFbank, TorchaudioFbank)
FBANKS = ("kaldi-fbank", "kaldifeat-fbank", "fbank")


def stored_differs(stored: dict, config: FeatureConfig) -> str | None:
    """How a lhotse cut's stored features differ from the study's (kind, dimension, frame shift,
    rate); None where they are the study's."""
    kind, dim = stored.get("type"), stored.get("num_features")
    if config.kind != "fbank" or kind not in FBANKS:
        return f"{kind}, where the study's are {config.kind}"
    if dim != config.bins:
        return f"{kind} of {dim} bins, where the study's have {config.bins}"
    if abs(stored.get("frame_shift", 0) - config.shift_ms / 1000) > 1e-9:
        return f"shifted {stored.get('frame_shift')} s, where the study's {config.shift_ms} ms"
    if stored.get("sampling_rate") != config.sample_rate:
        return f"of {stored.get('sampling_rate')} Hz audio, where the study's {config.sample_rate}"
    return None


def _cut_features(cut: dict, config: FeatureConfig, resampled: set, said: dict) -> np.ndarray:
    """A lhotse cut's features: its stored ones where they are the study's, else extracted from
    its audio as lhotse loads it (speed perturbation and other transforms applied); `said` counts
    which, and why, for the log."""
    from lhotse.serialization import deserialize_item

    differs = stored_differs(cut["features"], config) if cut.get("features") else "none stored"
    try:
        loaded = deserialize_item(dict(cut))
        if differs is None:
            said["taken as stored"] = said.get("taken as stored", 0) + 1
            return loaded.load_features().astype(np.float32)
        samples, rate = loaded.load_audio()[0], loaded.sampling_rate
    except Exception as error:  # lhotse's loaders raise many kinds, over several lines
        raise BadInput(f"lhotse cannot load it: {' '.join(str(error).split())[:300]}") from None
    reason = f"extracted (stored features: {differs})"
    said[reason] = said.get(reason, 0) + 1
    return compute(_usable(samples.astype(np.float32), rate, config, resampled), config)


class FeatureCache:
    """Features already computed, one .npy per utterance, keyed by its audio (path, span, size and
    modification time) and the feature settings: a rerun after the user fixes some of the input
    computes only what changed."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)

    def path(self, audio: tuple[str, float, float | None], config: FeatureConfig) -> Path:
        try:
            state = (
                ""
                if is_command(audio[0])
                else (lambda s: f"{s.st_size}:{s.st_mtime_ns}")(os.stat(audio[0]))
            )
        except OSError:
            state = "missing"
        key = hashlib.sha1(json.dumps([*audio, state, asdict(config)]).encode()).hexdigest()
        return self.folder / key[:2] / f"{key}.npy"

    def load(self, path: Path) -> np.ndarray | None:
        return np.load(path) if path.is_file() else None

    def save(self, path: Path, feats: np.ndarray) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".npy", delete=False) as tmp:
            np.save(tmp, feats)
        os.replace(tmp.name, path)


def _kaldi_features(entry: str, config: FeatureConfig) -> np.ndarray:
    try:
        feats = kaldiio.load_mat(entry)
    except Exception as error:  # kaldiio raises many kinds for a bad ark
        raise BadInput(f"features {entry} are not readable: {error}") from None
    if feats.ndim != 2 or feats.shape[1] != config.dim:
        raise BadInput(f"features {entry} are {feats.shape}; features.kaldi_dim is {config.dim}")
    return feats.astype(np.float32)


def _features(
    data: DataDir, utt: str, config: FeatureConfig, resampled: set, said: dict
) -> np.ndarray:
    """The utterance's features: computed from its audio, or read from its feats.scp entry, or
    its lhotse cut's (`_cut_features`)."""
    if utt in data.cuts:
        feats = _cut_features(data.cuts[utt], config, resampled, said)
    elif config.kind == "kaldi":
        feats = _kaldi_features(data.feats[utt], config)
    else:
        feats = compute(_utterance_audio(data, utt, config, resampled), config)
    if len(feats) < MIN_FRAMES:
        raise BadInput(f"{len(feats)} frames, fewer than {MIN_FRAMES}")
    return feats


def _source(data: DataDir, utt: str, config: FeatureConfig) -> tuple | None:
    """What an utterance's features are made from, as the cache keys it: its audio (file or
    command, start, end), or a lhotse cut's first audio file and the cut itself; None for Kaldi's
    features."""
    if utt in data.cuts:
        cut = data.cuts[utt]
        sources = [source["source"] for source in cut.get("recording", {}).get("sources", [])]
        return (" ".join(sources) or "(features)", json.dumps(cut, sort_keys=True), None)
    return None if config.kind == "kaldi" else data.audio(utt)


def extract_part(
    data: DataDir,
    config: FeatureConfig,
    part: int,
    parts: int,
    out_prefix: Path,
    bad_input: BadInputPolicy,
    cache: FeatureCache | None = None,
) -> None:
    """Features of the speakers `part`, `part + parts`, ... into `<prefix>.ark/.scp` plus CMVN
    stats; utterances whose audio cannot be used are left out and listed in `<prefix>.skipped`."""
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    cache = (
        cache if config.kind != "kaldi" else None
    )  # reading Kaldi features is as cheap as the cache
    speakers = sorted(data.spk2utt.items())[part::parts]
    stats, frames, resampled, reused, said = {}, {}, set(), 0, {}
    skipped = Skipped(
        bad_input, Path(f"{out_prefix}.skipped"), "features", Path(f"{out_prefix}.watch")
    )
    ark, scp = f"{out_prefix}.ark", f"{out_prefix}.scp"
    ticker, done = Ticker(f"features of part {part}", sum(len(utts) for _, utts in speakers)), 0
    with kaldiio.WriteHelper(f"ark,scp:{ark},{scp}.tmp") as writer:
        for speaker, utts in speakers:
            total, squares, count = np.zeros(config.dim), np.zeros(config.dim), 0
            for utt in utts:
                done += 1
                ticker(done)
                feats, from_cache = _cached_features(
                    data, utt, config, cache, resampled, skipped, said
                )
                reused += from_cache
                if feats is None:
                    continue
                writer(utt, feats)
                frames[utt] = len(feats)
                total += feats.sum(0)
                squares += (feats.astype(np.float64) ** 2).sum(0)
                count += len(feats)
            if count:
                stats[speaker] = (total, squares, count)
    if cache:
        print(
            f"{len(frames) - reused} utterances computed, {reused} taken from the cache "
            f"{cache.folder}"
        )
    for rate in sorted(resampled):
        print(f"note: audio at {rate} Hz was resampled to {config.sample_rate} Hz")
    for how, count in said.items():
        print(f"lhotse cuts: {count} utterances' features {how}")
    skipped.finish(sum(len(utts) for _, utts in speakers))
    _write_part_stats(out_prefix, stats, frames)
    Path(f"{scp}.tmp").rename(scp)


def _cached_features(
    data: DataDir,
    utt: str,
    config: FeatureConfig,
    cache: FeatureCache | None,
    resampled: set,
    skipped: Skipped,
    said: dict,
) -> tuple[np.ndarray | None, bool]:
    """The utterance's features and whether the cache had them (else they are computed, and
    cached); None where its input cannot be used (then it is in `skipped`); `said` counts how a
    lhotse cut's were made."""
    audio = _source(data, utt, config)
    where = data.feats[utt] if audio is None else audio[0]
    cached = cache.path(audio, config) if cache else None
    feats = cache.load(cached) if cache else None
    if feats is not None:
        return feats, True
    try:
        feats = _features(data, utt, config, resampled, said)
    except BadInput as error:
        skipped.add(utt, where, str(error), "" if audio is None else where)
        return None, False
    if cache:
        cache.save(cached, feats)
    return feats, False


def _write_part_stats(out_prefix: Path, stats: dict, frames: dict[str, int]) -> None:
    """A part's CMVN statistics by speaker (`<prefix>.cmvn.npz`) and frames by utterance
    (`<prefix>.frames`)."""
    np.savez(
        f"{out_prefix}.cmvn.npz",
        **{s: np.concatenate([t, q, [c]]) for s, (t, q, c) in stats.items()},
    )
    atomic_write_text(
        Path(f"{out_prefix}.frames"), "".join(f"{u} {n}\n" for u, n in sorted(frames.items()))
    )


def combine_parts(prefixes: list[Path], out_dir: Path) -> None:
    """One feats.scp, utt2num_frames and cmvn.npz for a subset from its parts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scp_lines, frame_lines, skipped_lines, stats = [], [], [], {}
    for prefix in prefixes:
        scp_lines.append(Path(f"{prefix}.scp").read_text())
        frame_lines.append(Path(f"{prefix}.frames").read_text())
        header, *rows = Path(f"{prefix}.skipped").read_text().splitlines(keepends=True)
        skipped_lines += rows
        with np.load(f"{prefix}.cmvn.npz") as part_stats:
            stats.update({speaker: part_stats[speaker] for speaker in part_stats.files})
    np.savez(out_dir / "cmvn.npz", **stats)
    atomic_write_text(out_dir / "utt2num_frames", "".join(frame_lines))
    atomic_write_text(out_dir / "skipped.tsv", header + "".join(skipped_lines))
    atomic_write_text(out_dir / "feats.scp", "".join(scp_lines))


class Normaliser:
    """Mean and variance normalisation from per-speaker statistics."""

    def __init__(self, mode: str, train_stats: Path, subset_stats: Path, utt2spk: dict[str, str]):
        if mode not in ("global", "speaker", "none"):
            raise ValueError(f"cmvn must be 'global', 'speaker' or 'none', not {mode!r}")
        self.mode, self.utt2spk = mode, utt2spk
        with np.load(train_stats) as stats:
            self._global = self._moments(sum(stats[s] for s in stats.files))
        self._speakers = {}
        if mode == "speaker":
            with np.load(subset_stats) as stats:
                self._speakers = {s: self._moments(stats[s]) for s in stats.files}

    @staticmethod
    def _moments(stats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        dim = (len(stats) - 1) // 2
        count = stats[-1]
        mean = stats[:dim] / count
        std = np.sqrt(np.maximum(stats[dim : 2 * dim] / count - mean**2, 1e-8))
        return mean.astype(np.float32), (1 / std).astype(np.float32)

    def __call__(self, utt: str, feats: np.ndarray) -> np.ndarray:
        if self.mode == "none":
            return feats
        mean, inv_std = (
            self._speakers[self.utt2spk[utt]] if self.mode == "speaker" else self._global
        )
        return (feats - mean) * inv_std


def read_frame_counts(folder: Path) -> dict[str, int]:
    return {utt: int(n) for utt, n in read_table(Path(folder) / "utt2num_frames").items()}
