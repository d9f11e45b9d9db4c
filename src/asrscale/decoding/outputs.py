"""A subset's model outputs as the log-probabilities job writes them and the decode job reads them:
each utterance's (frames, tokens) log-probabilities in a Kaldi archive (`<name>.ark`, indexed by
`<name>.scp`, as Kaldi keeps a network's outputs), and its speaker, reference and greedy hypothesis
in `<name>.tsv`. Reading loads no torch: the beam search's processes open each utterance by its
offset in the archive, as they need it."""

from dataclasses import dataclass
from pathlib import Path

import kaldiio
import numpy as np

from asrscale.io import atomic_write_text

COLUMNS = ("utt", "speaker", "reference", "greedy")


@dataclass
class Outputs:
    """A subset's utterances (sorted), references, greedy hypotheses and log-probabilities (arrays,
    or where an archive holds them: `load` reads either), and each utterance's speaker (the
    analysis's intervals draw a speaker's utterances together)."""

    utts: list[str]
    references: list[str]
    greedy: list[str]
    log_probs: list
    speakers: list[str]


def load(log_probs) -> np.ndarray:
    """One utterance's log-probabilities: as they are, or read from `<archive>:<offset>`."""
    matrix = kaldiio.load_mat(log_probs) if isinstance(log_probs, str) else log_probs
    return np.ascontiguousarray(matrix, dtype=np.float32)


def write_outputs(outputs: Outputs, folder: Path, name: str) -> None:
    """`outputs` as `<folder>/<name>.ark`, `.scp` and `.tsv`."""
    folder.mkdir(parents=True, exist_ok=True)
    prefix = folder / name
    with kaldiio.WriteHelper(f"ark,scp:{prefix}.ark,{prefix}.scp") as writer:
        for utt, log_probs in zip(outputs.utts, outputs.log_probs):
            writer(utt, np.asarray(log_probs, dtype=np.float32))
    rows = zip(outputs.utts, outputs.speakers, outputs.references, outputs.greedy)
    atomic_write_text(
        Path(f"{prefix}.tsv"),
        "\t".join(COLUMNS) + "\n" + "".join("\t".join(row) + "\n" for row in rows),
    )


def read_outputs(folder: Path, name: str) -> Outputs:
    """The outputs `write_outputs` wrote, each utterance's log-probabilities by its place in the
    archive."""
    prefix = Path(folder) / name
    where = {}
    for line in Path(f"{prefix}.scp").read_text().splitlines():
        utt, _, spec = line.partition(" ")
        where[utt] = spec
    header, *lines = Path(f"{prefix}.tsv").read_text().split("\n")[:-1]
    rows = [line.split("\t") for line in lines]
    if header.split("\t") != list(COLUMNS) or any(len(row) != len(COLUMNS) for row in rows):
        raise ValueError(f"{prefix}.tsv: not a table of {', '.join(COLUMNS)}")
    utts, speakers, references, greedy = (list(column) for column in zip(*rows)) or ([],) * 4
    return Outputs(utts, references, greedy, [where[utt] for utt in utts], speakers)
