"""eSpeak NG driven through ctypes, in synchronous mode, from the espeakng-loader wheel.

The wheel ships libespeak-ng.so and its voice data, so the built-in corpus needs no system package.
The library keeps process-wide state (one voice, one callback, and a flutter phase that carries on
from one utterance to the next and that no call resets), so the exact samples of an utterance depend
on what the process spoke before. Hence one `Espeak` per process, and reproducibility by
construction: a fixed list of utterances spoken in order by a fresh process always gives the same
audio."""

import ctypes
from pathlib import Path

import espeakng_loader
import numpy as np

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_RATE, _VOLUME, _PITCH, _RANGE = 1, 2, 3, 4
_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


def variant_names() -> list[str]:
    """The voice variants shipped with the library (eSpeak's `!v` folder): our speaker timbres."""
    folder = Path(espeakng_loader.get_data_path()) / "voices" / "!v"
    return sorted(p.name for p in folder.iterdir() if p.is_file() and " " not in p.name)


class Espeak:
    def __init__(self):
        self._lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self._lib.espeak_Initialize.argtypes = [
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
        ]
        self._lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self._lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self._lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        self._libc = ctypes.CDLL(None)
        self._data = espeakng_loader.get_data_path().encode()
        self._chunks: list[np.ndarray] = []
        self._callback = _CALLBACK(self._collect)  # kept referenced: the library holds the pointer
        self.sample_rate = self._lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, self._data, 0)
        if self.sample_rate <= 0:
            raise RuntimeError(f"eSpeak NG failed to initialise with data at {self._data.decode()}")
        self._lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, samples, count, _events):
        if count > 0:
            self._chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
        return 0

    def speak(
        self, text: str, voice: str, rate: int, pitch: int, seed: int, pitch_range: int = 50
    ) -> np.ndarray:
        """Synthesise `text`; returns int16 samples at `self.sample_rate`.

        eSpeak seeds its own noise generator from the clock, and some voices also draw on libc's
        rand(): both are seeded here from `seed`."""
        self._lib.espeak_ng_SetRandSeed(seed & 0x7FFFFFFF)
        self._libc.srand(seed & 0x7FFFFFFF)
        if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise ValueError(f"eSpeak NG has no voice {voice!r}")
        for parameter, value in (
            (_RATE, rate),
            (_PITCH, pitch),
            (_RANGE, pitch_range),
            (_VOLUME, 100),
        ):
            self._lib.espeak_SetParameter(parameter, value, 0)
        self._chunks = []
        encoded = text.encode()
        status = self._lib.espeak_Synth(
            encoded, len(encoded) + 1, 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None
        )
        if status != 0:
            raise RuntimeError(f"eSpeak NG failed (status {status}) on {text!r}")
        self._lib.espeak_Synchronize()
        return np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)
