"""Reading and resampling audio, shared by every corpus and the features."""

import functools
import math

import numpy as np
import soundfile


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


def load_audio(path: str, sample_rate: int) -> np.ndarray:
    """The first channel of an audio file as float32 at `sample_rate`."""
    samples, rate = soundfile.read(path, dtype="float32", always_2d=True)
    samples = samples[:, 0]
    if rate != sample_rate:
        samples = resample(samples, sample_rate, rate).astype(np.float32)
    return samples
