"""A run's checkpoints: every rank's state at a global step, complete or not at all."""

import shutil
from pathlib import Path

import torch

from asrscale.io import atomic_torch_save, atomic_write_text


class Checkpoints:
    """A run's checkpoints, a folder per global step: every rank's state (`rank<r>.pt`, a
    server's `server<r>.pt`) and a `complete` mark that learner 0 writes once all are on disk,
    so that a folder a killed job left half-written is never resumed. Only the newest complete
    folder is kept."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _at(self, step: int) -> Path:
        return self.folder / f"step{step:09d}"

    def latest(self) -> Path | None:
        complete = sorted(mark.parent for mark in self.folder.glob("step*/complete"))
        return complete[-1] if complete else None

    def save(self, step: int, name: str, state: dict) -> None:
        atomic_torch_save(state, self._at(step) / f"{name}.pt")

    def complete(self, step: int) -> None:
        atomic_write_text(self._at(step) / "complete", "")
        for other in self.folder.glob("step*"):  # older ones, and newer ones of a run not resumed
            if other != self._at(step):
                shutil.rmtree(other)

    def finish(self) -> None:
        """A finished run keeps learner 0's state (and its servers'): for 64 learners that is a
        64th of the disk; a run extended by more epochs resumes every learner from it."""
        if (latest := self.latest()) is not None:
            for state in latest.glob("rank*.pt"):
                if state.name != "rank0.pt":
                    state.unlink()

    def resumable(self, identity: dict, name: str) -> dict | None:
        """`name`'s state in the newest complete checkpoint, if it was written with these settings
        (learner 0's, where a finished run kept only that)."""
        if (latest := self.latest()) is None:
            return None
        path = latest / f"{name}.pt"
        if not path.exists() and name.startswith("rank"):
            path = latest / "rank0.pt"
        state = torch.load(path, weights_only=False, map_location="cpu")
        return state if state["identity"] == identity else None
