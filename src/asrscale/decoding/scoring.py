"""Word alignment of hypotheses against references, as NIST sclite prints it (`-o pralign`): per
utterance the two word sequences aligned, errors in capitals, `***` for a word missing on one
side; the errors counted by kind, for the report's most frequent confusions; and each utterance's
word errors, which the analysis resamples (asrscale.analysis.bootstrap)."""

from collections import Counter

import jiwer

DELETED = INSERTED = "***"
KIND = {"equal": "", "substitute": "S", "delete": "D", "insert": "I"}


def _line(label: str, cells: list[str], widths: list[int]) -> str:
    return (
        f"{label:<6}" + " ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()
    )


def align(
    utts: list[str], references: list[str], hypotheses: list[str]
) -> tuple[str, Counter, list[int]]:
    """The alignment text of every utterance, how often each (reference word, hypothesis word)
    error occurred (a substitution has both, a deletion an empty hypothesis, an insertion an
    empty reference), and each utterance's word errors."""
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
        errors.append(counts["substitute"] + counts["delete"] + counts["insert"])
        shown = [(r.upper(), h.upper()) if kind else (r, h) for (r, h), kind in zip(cells, kinds)]
        shown = [(r or INSERTED, h or DELETED) for r, h in shown]
        widths = [max(len(r), len(h)) for r, h in shown]
        blocks.append(
            "\n".join(
                [
                    f"id: {utt}",
                    f"Scores: (#C #S #D #I) {counts['equal']} {counts['substitute']} "
                    f"{counts['delete']} "
                    f"{counts['insert']}",
                    _line("REF:", [r for r, _ in shown], widths),
                    _line("HYP:", [h for _, h in shown], widths),
                    _line("Eval:", kinds, widths),
                ]
            )
        )
    return "\n\n".join(blocks) + "\n", confusions, errors
