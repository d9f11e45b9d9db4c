"""Reading and resampling audio, shared by every corpus and the features.

Audio is named as in a Kaldi wav.scp: a file soundfile (libsndfile) reads (WAV, FLAC, NIST
SPHERE, ...), or a shell command ending in `|` that writes such a file to its standard output.
"""

import functools
import io
import math
import os
import subprocess

import numpy as np
import soundfile

from asrscale.data.badinput import BadInput
from asrscale.data.wavspec import is_command


@functools.lru_cache(maxsize=4)
def _resampling_filter(up: int, down: int) -> np.ndarray:
    """The anti-aliasing filter `resample_poly` designs on every call, designed once."""
    from scipy.signal import firwin

    rate = max(up, down)
    return firwin(20 * rate + 1, 1 / rate, window=("kaiser", 5.0))


def resample(samples: np.ndarray, to_rate: int, from_rate: int) -> np.ndarray:
    # scipy.signal takes 0.6 s to import: only jobs that resample pay it
    from scipy.signal import resample_poly

    divisor = math.gcd(to_rate, from_rate)
    up, down = to_rate // divisor, from_rate // divisor
    return resample_poly(samples, up, down, window=_resampling_filter(up, down))


def run_pipe(command: str) -> bytes:
    """The audio a wav.scp command (`... |`) writes to its standard output."""
    done = subprocess.run(command.rstrip()[:-1], shell=True, capture_output=True, timeout=600)
    if done.returncode != 0 or not done.stdout:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise BadInput(f"command failed ({done.returncode}): {message[0]}")
    return done.stdout


def open_audio(audio: str):
    """A path, or the bytes a command writes, as soundfile opens them."""
    return io.BytesIO(run_pipe(audio)) if is_command(audio) else audio


def _wav_data_sizes(path: str) -> tuple[int, int] | None:
    """(bytes a WAV file's header promises, bytes it holds) of its data chunk; None if not WAV."""
    with open(path, "rb") as file:
        riff = file.read(12)
        if riff[:4] != b"RIFF" or riff[8:12] != b"WAVE":
            return None
        while len(chunk := file.read(8)) == 8:
            size = int.from_bytes(chunk[4:], "little")
            if chunk[:4] == b"data":
                return size, os.fstat(file.fileno()).st_size - file.tell()
            file.seek(size + size % 2, os.SEEK_CUR)
    return None


def read_audio(
    audio: str, start: float = 0.0, end: float | None = None, channel: int = 0
) -> tuple[np.ndarray, int]:
    """One channel of `audio` from `start` to `end` seconds (None: its end) as float32, and its
    sample rate. A file that holds less than its header promises is an error (truncated): for
    WAV, which libsndfile reads as far as it goes, the data chunk's size is checked."""
    sizes = None if is_command(audio) else _wav_data_sizes(audio)
    if (
        sizes and sizes[0] != 0xFFFFFFFF and sizes[1] < sizes[0]
    ):  # 0xFFFFFFFF: size unknown (streamed)
        raise BadInput(
            f"truncated: its header promises {sizes[0]} bytes of audio, it holds {sizes[1]}"
        )
    with soundfile.SoundFile(open_audio(audio)) as sound:
        rate, frames = sound.samplerate, sound.frames
        first, last = round(start * rate), frames if end is None else min(frames, round(end * rate))
        if channel >= sound.channels:
            raise BadInput(f"has {sound.channels} channel(s); features.channel is {channel}")
        sound.seek(first)
        samples = sound.read(last - first, dtype="float32", always_2d=True)
    if len(samples) < last - first:
        raise BadInput(
            f"truncated: {len(samples)} of the {last - first} samples its header promises"
        )
    return samples[:, channel], rate
