"""A run's checkpoints: every rank's whole state at a global step, complete or not at all, saved
and restored here: its model and optimizer (a replica's: learner 0's), the algorithm's counters,
the random state and the learner's progress (asrscale.training.records.Progress).

On real ranks each rank writes its own file. Where every rank lives in this process (a simulated
world), a checkpoint is one file, `ranks.pt`, every tensor stacked over the ranks whose states
hold tensors of the same shapes (64 learners' states are then a few thousand tensors to pickle,
not a hundred thousand), each rank's state restored from it exactly as it was saved, and with
them the modelled clock's (`CLOCK`: its jitter and its links' and loaders' times), so that a
resumed run's events come in the order of an uninterrupted one's (ASGD's updates among them)."""

import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from asrscale.config.sections import RunConfig
from asrscale.io import atomic_torch_save, atomic_write_text

CHECKPOINT_FORMAT = 5  # a checkpoint of another format is not resumed
TOGETHER = "ranks.pt"  # every rank's state, where all live in one process
CLOCK = "clock"  # in it, the modelled clock's


def identity(run: RunConfig, world: dict) -> dict:
    """What a checkpoint is resumed only by: the same settings (the number of epochs and the
    checkpoint interval aside: a run may be extended), the same world (for a simulated run, the
    same hardware profile and calibration)."""
    settings = asdict(run)
    settings["train"] = {
        k: v for k, v in settings["train"].items() if k not in ("epochs", "checkpoint_steps")
    }
    return {"format": CHECKPOINT_FORMAT, "run": settings, "world": world}


class Checkpoints:
    """A run's checkpoints, a folder per global step: every rank's state (`rank<r>.pt`, a
    server's `server<r>.pt`; `together`: all of them stacked in `ranks.pt`) and a `complete` mark
    that learner 0 writes once all are on disk, so that a folder a killed job left half-written is
    never resumed. Only the newest complete folder is kept, and the newest of an epoch's end (an
    `epoch-end` mark), which a rejected epoch goes back to."""

    def __init__(self, folder: Path, identity: dict, together: bool = False, clock=None):
        self.folder, self.identity, self.together = folder, identity, together
        # together: a simulated world's modelled clock (state_dict, load_state_dict), saved with
        # the ranks' states as `CLOCK` and restored with the first rank's
        self.clock, self._clock_restored = clock if together else None, False
        self._pending: dict[
            str, dict
        ] = {}  # together: the states saved for the checkpoint under way
        self._loaded: tuple[Path, dict] | None = None  # together: the newest checkpoint's states

    def _at(self, step: int) -> Path:
        return self.folder / f"step{step:09d}"

    def latest(self, epoch_end: bool = False, upto: int | None = None) -> Path | None:
        """The newest complete checkpoint (`epoch_end`: of an epoch's end; `upto`: at that step or
        before)."""
        complete = sorted(mark.parent for mark in self.folder.glob("step*/complete"))
        if epoch_end:
            complete = [folder for folder in complete if (folder / "epoch-end").exists()]
        if upto is not None:
            complete = [folder for folder in complete if folder <= self._at(upto)]
        return complete[-1] if complete else None

    def save(
        self,
        step: int,
        name: str,
        learner,
        algorithm,
        with_model: bool,
        progress: dict | None = None,
    ) -> None:
        """Rank `name`'s whole state (`with_model`: its model and optimizer, which a replica
        leaves to learner 0's), as it is now."""
        state = {
            "identity": self.identity,
            "algorithm": algorithm.state_dict(),
            "learner_steps": learner.steps,
            "rng": torch.get_rng_state(),
            "progress": progress,
        }
        if with_model:
            state.update(model=learner.model.state_dict(), optimizer=learner.optimizer.state_dict())
        if self.together:  # a copy as it is now: the rank goes on before the checkpoint completes
            self._pending[name] = _map_tensors(state, lambda t: t.detach().to("cpu", copy=True))
        else:
            atomic_torch_save(state, self._at(step) / f"{name}.pt")

    def restore(self, name: str, learner, algorithm) -> dict | None:
        """Rank `name` back to its state in the newest complete checkpoint written with these
        settings; returns its progress (None for a server). None, and nothing restored, where
        there is no such checkpoint."""
        if (state := self._state(name)) is None:
            return None
        self._restore_clock()
        held = (
            state if "model" in state else self._state("rank0")
        )  # a replica's model is learner 0's
        learner.model.load_state_dict(held["model"])
        learner.optimizer.load_state_dict(held["optimizer"])
        algorithm.load_state_dict(state["algorithm"])
        learner.steps = state["learner_steps"]
        torch.set_rng_state(state["rng"])
        return state.get("progress") or {}

    def _restore_clock(self) -> None:
        """The modelled clock as the newest checkpoint left it, once: every rank resumes from it."""
        if self.clock is None or self._clock_restored:
            return
        self._clock_restored = True
        together = self._together(self.latest())
        if CLOCK in together["skeletons"]:
            self.clock.load_state_dict(unstack(together, CLOCK))

    def roll_back(self, name: str, learner) -> None:
        """Rank `name`'s model and optimizer back to the newest checkpoint of an epoch's end (the
        last accepted epoch's: asrscale.training.schedule); its counters, and the algorithm's,
        go on."""
        state = self._state(name, self.latest(epoch_end=True))
        held = state if "model" in state else self._state("rank0", self.latest(epoch_end=True))
        learner.model.load_state_dict(held["model"])
        learner.optimizer.load_state_dict(held["optimizer"])

    def _state(self, name: str, latest: Path | None = None) -> dict | None:
        """`name`'s state in the newest complete checkpoint (or `latest`), if it was written with
        these settings (learner 0's, where a finished run kept only that)."""
        if (latest := latest or self.latest()) is None:
            return None
        if self.together:
            together = self._together(latest)
            if name not in together["skeletons"] and name.startswith("rank"):
                name = "rank0"
            state = unstack(together, name) if name in together["skeletons"] else None
        else:
            path = latest / f"{name}.pt"
            if not path.exists() and name.startswith("rank"):
                path = latest / "rank0.pt"
            state = torch.load(path, weights_only=False, map_location="cpu")
        return state if state is not None and state["identity"] == self.identity else None

    def _together(self, folder: Path) -> dict:
        """The ranks' states of a checkpoint written together (`stack`), read once."""
        if self._loaded is None or self._loaded[0] != folder:
            self._loaded = (
                folder,
                torch.load(folder / TOGETHER, weights_only=False, map_location="cpu"),
            )
        return self._loaded[1]

    def complete(self, step: int, epoch_end: bool = False) -> None:
        """Mark the checkpoint of `step` complete; the others go, but the newest of an epoch's end
        (a rejected epoch goes back to it)."""
        if self.together:
            if self.clock is not None:
                self._pending[CLOCK] = self.clock.state_dict()
            atomic_torch_save(stack(self._pending), self._at(step) / TOGETHER)
            self._pending = {}
        if epoch_end:
            atomic_write_text(self._at(step) / "epoch-end", "")
        atomic_write_text(self._at(step) / "complete", "")
        kept = {self._at(step), self.latest(epoch_end=True, upto=step)}
        for other in self.folder.glob("step*"):  # older ones, and newer ones of a run not resumed
            if other not in kept:
                shutil.rmtree(other)

    def finish(self) -> None:
        """A finished run keeps learner 0's state (and its servers'): for 64 learners that is a
        64th of the disk; a run extended by more epochs resumes every learner from it."""
        if (latest := self.latest()) is None:
            return
        for other in self.folder.glob("step*"):
            if other != latest:
                shutil.rmtree(other)
        if self.together:
            together = self._together(latest)
            kept = [
                name
                for name in together["skeletons"]
                if name == "rank0" or not name.startswith("rank")
            ]
            if len(kept) < len(together["skeletons"]):  # not already the last checkpoint's few
                atomic_torch_save(
                    stack({name: unstack(together, name) for name in kept}), latest / TOGETHER
                )
            self._loaded = None
            return
        for state in latest.glob("rank*.pt"):
            if state.name != "rank0.pt":
                state.unlink()


@dataclass(frozen=True)
class _Slot:
    """Where a state held a tensor: its index in its rank's list of tensors."""

    index: int


def _map_tensors(tree, function):
    """`tree` (dicts, lists, tuples) with every tensor replaced by `function(tensor)`."""
    if isinstance(tree, torch.Tensor):
        return function(tree)
    if isinstance(tree, dict):
        return type(tree)((key, _map_tensors(value, function)) for key, value in tree.items())
    if isinstance(tree, list | tuple):
        return type(tree)(_map_tensors(value, function) for value in tree)
    return tree


def stack(states: dict[str, dict]) -> dict:
    """Ranks' states as one: each state's skeleton (its tensors replaced by `_Slot`s), and for every
    group of ranks whose tensors have the same shapes and types, each tensor stacked over them."""
    skeletons, tensors = {}, {}
    for name, state in states.items():
        found = tensors[name] = []

        def slot(tensor, found=found) -> _Slot:
            found.append(tensor)
            return _Slot(len(found) - 1)

        skeletons[name] = _map_tensors(state, slot)
    groups = {}
    for name, found in tensors.items():
        groups.setdefault(tuple((t.dtype, tuple(t.shape)) for t in found), []).append(name)
    stacked = [
        {"names": names, "tensors": [torch.stack(ts) for ts in zip(*(tensors[n] for n in names))]}
        for names in groups.values()
    ]
    return {"skeletons": skeletons, "groups": stacked}


def unstack(together: dict, name: str) -> dict:
    """Rank `name`'s state, as `stack` had it, each of its tensors a copy of its own (two ranks
    restored from one state must share none: an optimizer keeps the tensors it loads)."""
    group = next(group for group in together["groups"] if name in group["names"])
    position = group["names"].index(name)
    return _slots_to(together["skeletons"][name], [t[position].clone() for t in group["tensors"]])


def _slots_to(tree, tensors: list):
    """`tree` with every `_Slot` replaced by its tensor."""
    if isinstance(tree, _Slot):
        return tensors[tree.index]
    if isinstance(tree, dict):
        return type(tree)((key, _slots_to(value, tensors)) for key, value in tree.items())
    if isinstance(tree, list | tuple):
        return type(tree)(_slots_to(value, tensors) for value in tree)
    return tree
