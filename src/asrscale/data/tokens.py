"""The character token set of CTC: index 0 is the blank, then the characters of the training text;
text encoded into tokens, and tokens (and CTC's outputs) decoded into text."""

from pathlib import Path

from asrscale.io import atomic_write_text

BLANK = "<blank>"


class Tokens:
    def __init__(self, symbols: list[str]):
        if not symbols or symbols[0] != BLANK:
            raise ValueError(f"a token list starts with {BLANK}")
        self.symbols = symbols
        self._index = {s: i for i, s in enumerate(symbols)}

    @classmethod
    def from_texts(cls, texts) -> "Tokens":
        return cls([BLANK, *sorted({c for text in texts for c in text})])

    @classmethod
    def read(cls, path: Path) -> "Tokens":
        return cls(Path(path).read_text(encoding="utf-8").rstrip("\n").split("\n"))

    def write(self, path: Path) -> None:
        atomic_write_text(path, "\n".join(self.symbols) + "\n")

    def __len__(self) -> int:
        return len(self.symbols)

    def __contains__(self, symbol: str) -> bool:
        return symbol in self._index

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; characters outside the set are dropped (they cannot be learned)."""
        return [self._index[c] for c in text if c in self._index and c != BLANK]

    def decode(self, ids) -> str:
        return "".join(self.symbols[i] for i in ids if i != 0)

    def greedy(self, log_probs, lengths) -> list[str]:
        """CTC's greedy decoding of a batch's log-probabilities (batch × frames × tokens, each
        utterance `lengths` frames): the best token per frame, repeats collapsed, blanks removed;
        chosen on the tensors' device, so that only the tokens kept come to the host, at once."""
        import torch  # here: the tokens stage makes a token set without torch

        best = log_probs.argmax(-1)
        new = torch.ones_like(best, dtype=torch.bool)
        new[:, 1:] = best[:, 1:] != best[:, :-1]
        inside = torch.arange(best.shape[1], device=best.device) < lengths.to(best.device)[:, None]
        kept = (new & inside & (best != 0)).cpu()
        best = best.cpu()
        return [
            " ".join(self.decode(path[keep].tolist()).split()) for path, keep in zip(best, kept)
        ]
