"""Run under mpiexec: `rejected_epoch.py ARGUMENTS...` trains as `asrscale train ARGUMENTS...` does,
with the schedule made to reject every run's second epoch (whatever its dev loss), so that every
rank, and ASGD's server, rolls back on real ranks."""

import sys

from asrscale.cli import main
from asrscale.training.schedule import Decision, Schedule

decide = Schedule.after_epoch


def after_epoch(self, state, dev_loss):
    state["seen"] = state.get("seen", 0) + 1
    if state["seen"] != 2:
        return decide(self, state, dev_loss)
    decide(
        self, state, 2 * state["accepted_loss"]
    )  # as newbob takes a worse epoch: rejected, halving
    return Decision(False, state["factor"], None)


Schedule.after_epoch = after_epoch
main(["train", *sys.argv[1:]])
