"""An utterance's audio as a Kaldi wav.scp entry gives it: a file, or a command whose output is the
audio (`... |`). Kept apart from the reading of audio, so that knowing which it is loads no
NumPy."""


def is_command(audio: str) -> bool:
    return audio.rstrip().endswith("|")
