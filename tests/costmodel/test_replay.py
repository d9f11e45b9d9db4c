"""Replays: an algorithm's schedule charged by the cost model for a stated model, without
arithmetic."""

import math

import pytest

from asrscale.config.algorithms import ALGORITHMS
from asrscale.config.schema import profile_defaults
from asrscale.costmodel.replay import Workload, replay
from asrscale.worlds.clock import Hardware

# a device measured on a model of 10M parameters at 1 GFLOP a frame: 1 µs a frame, 10 ms an
# update, 40 ms a preconditioning; 10 Gb/s links with 5 µs latency
MEASURED = {"flops_per_frame": 1e9, "parameters": 10_000_000}
DEVICE = {
    "measured_on": "a test device",
    **MEASURED,
    "backward_s_per_batch": 0.0,
    "backward_s_per_frame": 1e-6,
    "update_s": 0.01,
    "precondition_s": 0.04,
    "relative_speed": 1.0,
}
LINK = {"latency_us": 5.0, "bandwidth_gbps": 10.0}
WORKLOAD = Workload(parameters=10_000_000, flops_per_frame=1e9, frames_per_step=2_000, steps=20)


def cluster(**changes) -> Hardware:
    settings = dict(
        device="dedicated",
        compute=DEVICE,
        node_link=LINK,
        network_link=LINK,
        learners_per_node=8,
        jitter=0.0,
        data_frames_per_s=math.inf,  # batches cost nothing: each test charges what it names
    )
    return Hardware.from_config("test", profile_defaults(**{**settings, **changes}))


def allreduce_s(nbytes: int, ranks: int) -> float:
    return 2 * (ranks - 1) * 5e-6 + 2 * (ranks - 1) / ranks * nbytes * 8 / 10e9


BARRIER_S = 2 * 3 * 5e-6  # 8 ranks: 2 ⌈log₂ 8⌉ latencies


def test_an_ssgd_replay_charges_each_step_what_the_cost_model_says():
    # compute, the barrier before the gradients' allreduce, the allreduce, the update
    step = 2_000 * 1e-6 + BARRIER_S + allreduce_s(4 * 10_000_000, 8) + 0.01
    assert replay("ssgd", 8, WORKLOAD, cluster()).seconds == pytest.approx(20 * step, rel=1e-9)
    # the compute is carried to another model by its FLOPs a frame, the update by its parameters
    half = Workload(parameters=5_000_000, flops_per_frame=0.5e9, frames_per_step=2_000, steps=20)
    step = 2_000 * 0.5e-6 + BARRIER_S + allreduce_s(4 * 5_000_000, 8) + 0.005
    assert replay("ssgd", 8, half, cluster()).seconds == pytest.approx(20 * step, rel=1e-9)


def test_what_an_averaging_moves_and_what_ng_sgd_costs_are_charged():
    """KAVG averaging every step: Adam's two moments with the weights, or the weights alone; MA
    pays its preconditioning at every step."""
    both = replay("kavg", 8, WORKLOAD, cluster(), {"period": 1}).seconds
    weights = replay("kavg", 8, WORKLOAD, cluster(), {"period": 1, "averages": "model"}).seconds
    moved = 20 * (allreduce_s(3 * 4 * 10_000_000, 8) - allreduce_s(4 * 10_000_000, 8))
    assert both - weights == pytest.approx(moved, rel=1e-6)
    options = {"frames_per_job": 1_000_000, "max_param_change": 0.0}
    natural = replay("ma", 8, WORKLOAD, cluster(), {**options, "natural_gradient": True}).seconds
    plain = replay("ma", 8, WORKLOAD, cluster(), {**options, "natural_gradient": False}).seconds
    assert natural - plain == pytest.approx(20 * 0.04, rel=1e-6)


def test_a_parameter_servers_link_serialises_its_learners():
    """ASGD's pushes and replies queue on the server's link, in the order of the modelled clock: on
    a slow network 16 learners' epoch takes about their messages back to back."""
    slow = cluster(network_link={"latency_us": 5.0, "bandwidth_gbps": 1.0}, learners_per_node=1)
    message_s = 4 * 10_000_000 * 8 / 1e9
    assert replay("asgd", 16, WORKLOAD, slow).seconds >= 16 * 20 * 2 * message_s


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_replays_at_the_studies_scale(algorithm):
    """16 learners of a 43M-parameter model: no arithmetic, no memory for values."""
    study = Workload(parameters=43_000_000, flops_per_frame=86e6, frames_per_step=2_688, steps=10)
    learners = 1 if algorithm == "seq" else 16
    seconds = replay(algorithm, learners, study, cluster()).seconds
    assert seconds >= 10 * 2_688 * 1e-6 * 0.086


def test_a_replay_needs_a_device_that_states_its_compute():
    with pytest.raises(ValueError, match="hardware.test shares this machine's"):
        replay("ssgd", 2, WORKLOAD, Hardware.from_config("test", profile_defaults()))
