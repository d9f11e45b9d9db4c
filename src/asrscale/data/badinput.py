"""Bad input: what is wrong with an utterance, where, and whether to go on.

Every stage that reads users' data (import, feature extraction) records each utterance it leaves
out in a `Skipped` report with where it came from (file and line, or audio file) and why. The
policy (`corpus.bad_input` in config.yaml) either stops at the first bad utterance, naming it, or
skips and reports them, and stops only when more than `max_fraction` of a subset is bad, after
writing the report.
"""

from pathlib import Path

from asrscale.config.sections import BadInputPolicy
from asrscale.errors import UserError
from asrscale.io import atomic_write_text


class BadInput(UserError):
    """Input that cannot be used, named by its file and line."""


class Skipped:
    """The utterances left out of one subset at one stage, with where and why."""

    def __init__(self, policy: BadInputPolicy, report: Path, stage: str, watch: Path | None = None):
        self.policy, self.report, self.stage, self.watch = policy, Path(report), stage, watch
        self.rows: dict[str, tuple[str, str, str]] = {}

    def add(self, utt: str, where: str, reason: str, audio: str = "") -> None:
        """Leave `utt` out (or stop); `audio` names the audio file when the audio is what is
        wrong."""
        if self.policy.policy == "stop":
            raise BadInput(
                f"{where}: {reason} (utterance {utt}; corpus.bad_input.policy is 'stop')"
            )
        self.rows.setdefault(utt, (where, reason, audio))

    def __contains__(self, utt: str) -> bool:
        return utt in self.rows

    def finish(self, total: int) -> None:
        """Write the report; stop when more than the allowed fraction of `total` utterances is bad.

        Audio files found bad are added to the `watch` list, which outlives reruns: the workflow
        takes the files on it as inputs of the import, so that fixing one reruns what needs it."""
        rows = "".join(
            f"{utt}\t{self.stage}\t{where}\t{audio}\t{reason}\n"
            for utt, (where, reason, audio) in self.rows.items()
        )
        atomic_write_text(self.report, "utt\tstage\twhere\taudio\treason\n" + rows)
        if self.watch is not None:
            bad_files = {
                audio
                for _, _, audio in self.rows.values()
                if audio and not audio.rstrip().endswith("|")
            }
            watched = set(self.watch.read_text().splitlines()) if self.watch.is_file() else set()
            if not bad_files <= watched:
                atomic_write_text(
                    self.watch, "".join(f"{path}\n" for path in sorted(watched | bad_files))
                )
        if not self.rows:
            return
        print(
            f"{self.stage}: skipped {len(self.rows)} of {total} utterances; each with its reason "
            f"in {self.report}"
        )
        if len(self.rows) > self.policy.max_fraction * total:
            utt, (where, reason, _) = next(iter(self.rows.items()))
            raise BadInput(
                f"{len(self.rows)} of {total} utterances are bad, more than "
                "corpus.bad_input.max_fraction "
                f"({self.policy.max_fraction:g}); the first: {where}: {reason} ({utt}); all in "
                f"{self.report}"
            )
