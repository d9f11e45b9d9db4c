"""Acoustic features: 40-dim log-mel filterbanks (default) or MFCC with deltas, stored as Kaldi ark/scp.

Normalisation statistics are kept per speaker (sums, squares, counts), so that the loader can
apply either global CMVN (from the training set's totals) or per-speaker CMVN without another
pass over the features. Extraction splits a data dir by speaker into parts that run as jobs.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np
import python_speech_features as psf

from asrscale.audio import load_audio
from asrscale.datadir import DataDir, read_table
from asrscale.io import atomic_write_text


@dataclass(frozen=True)
class FeatureConfig:
    kind: str = "fbank"  # "fbank" (log-mel) or "mfcc" (13 cepstra plus deltas and double deltas)
    bins: int = 40
    sample_rate: int = 16000
    window_ms: float = 25.0
    shift_ms: float = 10.0
    cmvn: str = "global"  # "global", "speaker" or "none"

    @property
    def dim(self) -> int:
        return self.bins if self.kind == "fbank" else 39


@functools.lru_cache(maxsize=8)
def _mel_filterbank(bins: int, nfft: int, sample_rate: int) -> np.ndarray:
    return psf.get_filterbanks(bins, nfft, sample_rate).T.astype(np.float32)


def log_mel(audio: np.ndarray, sample_rate: int, window: float, shift: float, bins: int, nfft: int) -> np.ndarray:
    """python_speech_features' `logfbank`, computed the same way, with its filterbank cached and
    frames taken as strided views: the same numbers, several times faster."""
    signal = np.append(audio[:1], audio[1:] - 0.97 * audio[:-1]).astype(np.float32)
    length, step = int(round(window * sample_rate)), int(round(shift * sample_rate))
    count = 1 if len(signal) <= length else 1 + int(np.ceil((len(signal) - length) / step))
    signal = np.pad(signal, (0, max(0, (count - 1) * step + length - len(signal))))
    frames = np.lib.stride_tricks.sliding_window_view(signal, length)[::step][:count]
    power = np.abs(np.fft.rfft(frames, nfft)) ** 2 / nfft
    energies = power.astype(np.float32) @ _mel_filterbank(bins, nfft, sample_rate)
    return np.log(np.where(energies == 0, np.finfo(float).eps, energies)).astype(np.float32)


def compute(audio: np.ndarray, config: FeatureConfig) -> np.ndarray:
    window, shift = config.window_ms / 1000, config.shift_ms / 1000
    nfft = 1 << (int(window * config.sample_rate) - 1).bit_length()
    if config.kind == "fbank":
        return log_mel(audio, config.sample_rate, window, shift, config.bins, nfft)
    cepstra = psf.mfcc(audio, config.sample_rate, window, shift, 13, config.bins, nfft)
    deltas = psf.delta(cepstra, 2)
    return np.hstack([cepstra, deltas, psf.delta(deltas, 2)]).astype(np.float32)


def extract_part(data: DataDir, config: FeatureConfig, part: int, parts: int, out_prefix: Path) -> None:
    """Features of the speakers `part`, `part + parts`, ... into `<prefix>.ark/.scp` plus CMVN stats."""
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    speakers = sorted(data.spk2utt.items())[part::parts]
    stats, frames = {}, {}
    ark, scp = f"{out_prefix}.ark", f"{out_prefix}.scp"
    with kaldiio.WriteHelper(f"ark,scp:{ark},{scp}.tmp") as writer:
        for speaker, utts in speakers:
            total, squares, count = np.zeros(config.dim), np.zeros(config.dim), 0
            for utt in utts:
                feats = compute(load_audio(data.wav[utt], config.sample_rate), config)
                writer(utt, feats)
                frames[utt] = len(feats)
                total += feats.sum(0)
                squares += (feats.astype(np.float64) ** 2).sum(0)
                count += len(feats)
            stats[speaker] = (total, squares, count)
    np.savez(f"{out_prefix}.cmvn.npz", **{s: np.concatenate([t, q, [c]]) for s, (t, q, c) in stats.items()})
    atomic_write_text(Path(f"{out_prefix}.frames"), "".join(f"{u} {n}\n" for u, n in sorted(frames.items())))
    Path(f"{scp}.tmp").rename(scp)


def combine_parts(prefixes: list[Path], out_dir: Path) -> None:
    """One feats.scp, utt2num_frames and cmvn.npz for a subset from its parts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    scp_lines, frame_lines, stats = [], [], {}
    for prefix in prefixes:
        scp_lines.append(Path(f"{prefix}.scp").read_text())
        frame_lines.append(Path(f"{prefix}.frames").read_text())
        with np.load(f"{prefix}.cmvn.npz") as part_stats:
            stats.update({speaker: part_stats[speaker] for speaker in part_stats.files})
    np.savez(out_dir / "cmvn.npz", **stats)
    atomic_write_text(out_dir / "utt2num_frames", "".join(frame_lines))
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
        mean, inv_std = self._speakers[self.utt2spk[utt]] if self.mode == "speaker" else self._global
        return (feats - mean) * inv_std


def read_frame_counts(folder: Path) -> dict[str, int]:
    return {utt: int(n) for utt, n in read_table(Path(folder) / "utt2num_frames").items()}
