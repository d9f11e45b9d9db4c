"""A run's checkpoints: every rank's whole state at a global step, complete or not at all, saved
and restored here: its model and optimizer (a replica's: learner 0's), the algorithm's counters,
the random state and the learner's progress (asrscale.training.records.Progress)."""

import shutil
from dataclasses import asdict
from pathlib import Path

import torch

from asrscale.config.sections import RunConfig
from asrscale.io import atomic_torch_save, atomic_write_text

CHECKPOINT_FORMAT = 3  # a checkpoint of another format is not resumed


def identity(run: RunConfig, world: dict) -> dict:
    """What a checkpoint is resumed only by: the same settings (the number of epochs and the
    checkpoint interval aside: a run may be extended), the same world (for a simulated run, the
    same hardware profile and calibration)."""
    settings = asdict(run)
    settings["train"] = {k: v for k, v in settings["train"].items() if k not in ("epochs", "checkpoint_steps")}
    return {"format": CHECKPOINT_FORMAT, "run": settings, "world": world}


class Checkpoints:
    """A run's checkpoints, a folder per global step: every rank's state (`rank<r>.pt`, a
    server's `server<r>.pt`) and a `complete` mark that learner 0 writes once all are on disk,
    so that a folder a killed job left half-written is never resumed. Only the newest complete
    folder is kept."""

    def __init__(self, folder: Path, identity: dict):
        self.folder, self.identity = folder, identity

    def _at(self, step: int) -> Path:
        return self.folder / f"step{step:09d}"

    def latest(self) -> Path | None:
        complete = sorted(mark.parent for mark in self.folder.glob("step*/complete"))
        return complete[-1] if complete else None

    def save(self, step: int, name: str, learner, algorithm, with_model: bool, progress: dict | None = None) -> None:
        """Rank `name`'s whole state (`with_model`: its model and optimizer, which a replica
        leaves to learner 0's)."""
        state = {"identity": self.identity, "algorithm": algorithm.state_dict(), "learner_steps": learner.steps,
                 "rng": torch.get_rng_state(), "progress": progress}  # fmt: skip
        if with_model:
            state.update(model=learner.model.state_dict(), optimizer=learner.optimizer.state_dict())
        atomic_torch_save(state, self._at(step) / f"{name}.pt")

    def restore(self, name: str, learner, algorithm) -> dict | None:
        """Rank `name` back to its state in the newest complete checkpoint written with these
        settings; returns its progress (None for a server). None, and nothing restored, where
        there is no such checkpoint."""
        if (state := self._state(name)) is None:
            return None
        held = state if "model" in state else self._state("rank0")  # a replica's model is learner 0's
        learner.model.load_state_dict(held["model"])
        learner.optimizer.load_state_dict(held["optimizer"])
        algorithm.load_state_dict(state["algorithm"])
        learner.steps = state["learner_steps"]
        torch.set_rng_state(state["rng"])
        return state.get("progress") or {}

    def _state(self, name: str) -> dict | None:
        """`name`'s state in the newest complete checkpoint, if it was written with these settings
        (learner 0's, where a finished run kept only that)."""
        if (latest := self.latest()) is None:
            return None
        path = latest / f"{name}.pt"
        if not path.exists() and name.startswith("rank"):
            path = latest / "rank0.pt"
        state = torch.load(path, weights_only=False, map_location="cpu")
        return state if state["identity"] == self.identity else None

    def leader_model(self) -> dict | None:
        """Learner 0's model in the newest complete checkpoint (None: there is none)."""
        if (latest := self.latest()) is None:
            return None
        return torch.load(latest / "rank0.pt", weights_only=False, map_location="cpu")["model"]

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
