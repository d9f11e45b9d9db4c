"""Word alignment of hypotheses against references, as NIST sclite prints it (`-o pralign`): per
utterance the two word sequences aligned, errors in capitals, `***` for a word missing on one
side; the errors counted by kind, for the report's most frequent confusions; each utterance's
substitutions, deletions and insertions, which the analysis resamples (asrscale.analysis.bootstrap),
summed as Kaldi's compute-wer prints them (`kaldi_line`) and by speaker (`by_speaker`)."""

from collections import Counter
from dataclasses import dataclass

import jiwer

DELETED = INSERTED = "***"
KIND = {"equal": "", "substitute": "S", "delete": "D", "insert": "I"}


@dataclass(frozen=True)
class Errors:
    """Word errors by kind."""

    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0

    @property
    def total(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    def __add__(self, other: "Errors") -> "Errors":
        return Errors(
            self.substitutions + other.substitutions,
            self.deletions + other.deletions,
            self.insertions + other.insertions,
        )


def kaldi_line(errors: Errors, words: int) -> str:
    """The errors as Kaldi's compute-wer prints them (a recipe's RESULTS lines)."""
    return (
        f"%WER {100 * errors.total / words:.2f} [ {errors.total} / {words}, {errors.insertions} "
        f"ins, {errors.deletions} del, {errors.substitutions} sub ]"
    )


def word_errors(references: list[str], hypotheses: list[str]) -> tuple[int, int]:
    """(word edits, reference words)."""
    found = jiwer.process_words(references, hypotheses)
    return found.substitutions + found.deletions + found.insertions, (
        found.hits + found.substitutions + found.deletions
    )


def character_errors(references: list[str], hypotheses: list[str]) -> tuple[int, int]:
    """(character edits, reference characters, spaces included)."""
    found = jiwer.process_characters(references, hypotheses)
    return found.substitutions + found.deletions + found.insertions, (
        found.hits + found.substitutions + found.deletions
    )


def by_speaker(speakers: list[str], references: list[str], decodes: dict[str, list[Errors]]) -> str:
    """A table (TSV) of each speaker's utterances, words and each decode's (`decodes`: its errors of
    each utterance, by name) substitutions, deletions, insertions and WER in percent, as sclite's
    per-speaker summary gives them."""
    rows: dict[str, list] = {}
    for index, speaker in enumerate(speakers):
        row = rows.setdefault(speaker, [0, 0, {name: Errors() for name in decodes}])
        row[0] += 1
        row[1] += len(references[index].split())
        for name, errors in decodes.items():
            row[2][name] += errors[index]
    header = ["speaker", "utterances", "words"] + [
        f"{name}_{kind}" for name in decodes for kind in ("sub", "del", "ins", "wer_percent")
    ]
    lines = ["\t".join(header)]
    for speaker in sorted(rows):
        utterances, words, found = rows[speaker]
        cells = [speaker, str(utterances), str(words)]
        for errors in found.values():
            rate = f"{100 * errors.total / words:.2f}"
            cells += [
                str(errors.substitutions),
                str(errors.deletions),
                str(errors.insertions),
                rate,
            ]
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def _line(label: str, cells: list[str], widths: list[int]) -> str:
    return (
        f"{label:<6}" + " ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()
    )


def align(
    utts: list[str], references: list[str], hypotheses: list[str]
) -> tuple[str, Counter, list[Errors]]:
    """The alignment text of every utterance, how often each (reference word, hypothesis word)
    error occurred (a substitution has both, a deletion an empty hypothesis, an insertion an
    empty reference), and each utterance's word errors by kind."""
    result = jiwer.process_words(references, hypotheses)
    blocks, confusions, errors = [], Counter(), []
    for utt, ref, hyp, chunks in zip(utts, result.references, result.hypotheses, result.alignments):
        cells, kinds, counts = [], [], Counter()
        for chunk in chunks:
            refs, hyps = (
                ref[chunk.ref_start_idx : chunk.ref_end_idx],
                hyp[chunk.hyp_start_idx : chunk.hyp_end_idx],
            )
            one_sided = {"delete": [(w, "") for w in refs], "insert": [("", w) for w in hyps]}
            pairs = one_sided.get(chunk.type, zip(refs, hyps))
            for r, h in pairs:
                cells.append((r, h))
                kinds.append(KIND[chunk.type])
                counts[chunk.type] += 1
                if chunk.type != "equal":
                    confusions[(r, h)] += 1
        errors.append(Errors(counts["substitute"], counts["delete"], counts["insert"]))
        shown = [(r.upper(), h.upper()) if kind else (r, h) for (r, h), kind in zip(cells, kinds)]
        shown = [(r or INSERTED, h or DELETED) for r, h in shown]
        widths = [max(len(r), len(h)) for r, h in shown]
        blocks.append(
            "\n".join(
                [
                    f"id: {utt}",
                    f"Scores: (#C #S #D #I) {counts['equal']} {counts['substitute']} "
                    f"{counts['delete']} {counts['insert']}",
                    _line("REF:", [r for r, _ in shown], widths),
                    _line("HYP:", [h for _, h in shown], widths),
                    _line("Eval:", kinds, widths),
                ]
            )
        )
    return "\n\n".join(blocks) + "\n", confusions, errors
