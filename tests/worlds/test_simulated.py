"""The simulated world: virtual-time order, the cost model, and real training in one process."""

import copy

import pandas as pd
import pytest
import torch

from asrscale.config.schema import MINIMAL, profile_defaults
from asrscale.costmodel.calibration import calibrate, measured_compute
from asrscale.training.fused.learners import fusers
from asrscale.training.run import train
from asrscale.worlds import ops
from asrscale.worlds.clock import CostModel, Hardware
from asrscale.worlds.simulated import SimWorld
from helpers import (
    CALIBRATION,
    DEVICE,
    GPU,
    MODEL,
    TIMES,
    Killed,
    corpus_subset,
    diverged_run,
    kill_at_loss,
    run_config,
    run_paths,
    same_models,
)

MEGABYTE = 250_000  # float32 values


def profile(**changes) -> Hardware:
    """A hardware profile: a dedicated device per learner, 8 to a node, unless changed."""
    return Hardware.from_config("test", profile_defaults(**{**GPU, **changes}))


def world(learners, servers=0, seed=1, prefetch=4, **hardware):
    costs = CostModel(profile(**hardware), CALIBRATION, seed=seed)
    return SimWorld(learners, costs, servers=servers, prefetch=prefetch, name="test")


def launch(sim, program):
    """Run `program(layout, serving, log)` on every rank; returns each rank's (time, event) log."""
    logs = {rank.rank: [] for rank in sim.ranks}

    def make(layout, serving, clock):
        rank = next(r for r in sim.ranks if r.layout is layout)
        return program(
            layout, serving, lambda event: logs[rank.rank].append((round(clock.now(), 6), event))
        )

    sim.launch(make)
    return logs


def pushes_to_a_server(frames_of_learner):
    """Learner r computes on frames_of_learner(r) frames, then sends 1 MB to the server, which
    logs each sender as its message arrives."""

    def program(layout, serving, log):
        if serving:
            for _ in range(layout.size):
                source, _ = yield ops.Receive([torch.zeros(MEGABYTE)])
                log(source)
        else:
            yield ops.Compute(0, frames=frames_of_learner(layout.rank))
            yield ops.Send([torch.full((MEGABYTE,), float(layout.rank))], to=0)
            log("sent")

    return program


def test_messages_to_one_server_queue_on_its_link_in_order_of_virtual_time():
    # learner r is ready at 0.1·(r+1) s: each message has the link to itself (8 ms)
    logs = launch(world(3, servers=1), pushes_to_a_server(lambda rank: 200 * (rank + 1)))
    assert logs[0] == [(0.108, 1), (0.208, 2), (0.308, 3)]
    assert logs[1] == [(0.108, "sent")]
    # everyone is ready at 0.1 s: the server's link is the queue
    logs = launch(world(3, servers=1), pushes_to_a_server(lambda rank: 200))
    assert logs[0] == [(0.108, 1), (0.116, 2), (0.124, 3)]
    assert logs[3] == [(0.124, "sent")]


def test_a_straggler_arrives_last_and_the_others_do_not_wait_for_it():
    def program(layout, serving, log):
        if serving:
            for _ in range(layout.size):
                source, _ = yield ops.Receive([torch.zeros(1)])
                log(source)
        else:
            yield ops.Compute(0, frames=100)
            yield ops.Send([torch.zeros(1)], to=0)

    order = [source for _, source in launch(world(3, servers=1, stragglers={0: 3.0}), program)[0]]
    assert order == [2, 3, 1]  # world rank 1 is learner 0


def test_an_allreduce_completes_when_its_last_member_arrives_and_averages():
    def program(layout, serving, log):
        yield ops.Compute(0, frames=200 * (layout.rank + 1))
        values = [torch.full((MEGABYTE,), float(layout.rank))]
        yield ops.Allreduce(values, "learners")
        log(float(values[0][0]))

    sim = world(3)
    logs = launch(sim, program)
    ends = 0.3 + sim.costs.allreduce_s(4 * MEGABYTE, 3, same_node=True)
    assert all(log == [(round(ends, 6), 1.0)] for log in logs.values())


def test_a_nodes_learners_share_its_network_card_and_queue_on_it():
    """The 8 learners of node 0 each send 1 MB to their twin on node 1 at once: through the node's
    one card the messages go one after another (8 ms each at 1 Gb/s); with a card a learner, side
    by side. Inside a node each learner has a port of its own."""

    def twins(layout, serving, log):
        if layout.rank < 8:
            yield ops.Send([torch.zeros(MEGABYTE)], to=layout.rank + 8)
        else:
            yield ops.Receive([torch.zeros(MEGABYTE)], source=layout.rank - 8)
            log("received")

    def arrivals(**hardware):
        return sorted(
            time for log in launch(world(16, **hardware), twins).values() for time, _ in log
        )

    assert arrivals() == pytest.approx([0.008 * (i + 1) for i in range(8)])
    assert arrivals(nics_per_node=8) == pytest.approx([0.008] * 8)
    assert arrivals(learners_per_node=16) == pytest.approx([0.008] * 8)


def test_a_collective_across_nodes_occupies_the_cards_it_crosses():
    """The two nodes' leaders allreduce 10 MB (80 ms over their cards) while learner 1 sends 1 MB
    to learner 9 from 10 ms: through the same card it waits for the allreduce; through a card of
    its own it does not."""

    def program(layout, serving, log):
        if layout.node_rank == 0:
            yield ops.Allreduce([torch.zeros(10 * MEGABYTE)], "leaders")
            log("allreduced")
        elif layout.rank == 1:
            yield ops.Compute(0, frames=20)  # 10 ms
            yield ops.Send([torch.zeros(MEGABYTE)], to=9)
        elif layout.rank == 9:
            yield ops.Receive([torch.zeros(MEGABYTE)], source=1)
            log("received")

    def times(**hardware):
        logs = launch(world(16, **hardware), program)
        return logs[0][0][0], logs[9][0][0]

    assert times() == pytest.approx((0.08, 0.088))
    assert times(nics_per_node=8) == pytest.approx((0.08, 0.018))


def test_a_deadlock_is_an_error_naming_every_blocked_rank():
    def program(layout, serving, log):
        yield ops.Receive([torch.zeros(1)], source=1 - layout.rank)

    with pytest.raises(RuntimeError, match=r"deadlock\): rank 0 in Receive; rank 1 in Receive"):
        launch(world(2), program)

    def disagreeing(layout, serving, log):
        yield (
            ops.Barrier("learners")
            if layout.rank == 0
            else ops.Allreduce([torch.zeros(1)], "learners")
        )

    with pytest.raises(RuntimeError, match="rank 1 entered Allreduce .* rank 0 is in Barrier"):
        launch(world(2), disagreeing)


def test_jitter_is_drawn_from_the_seed():
    def program(layout, serving, log):
        for _ in range(3):
            yield ops.Compute(0, frames=100)
        log("done")

    def times(seed):
        return [log[0][0] for log in launch(world(4, seed=seed, jitter=0.2), program).values()]

    assert times(1) == times(1) and times(1) != times(2) and len(set(times(1))) == 4


@pytest.mark.parametrize("prefetch, waits", [(0, [0.1] * 3), (2, [0.1, 0.0, 0.0])])
def test_data_loading_overlaps_compute_only_with_prefetch(prefetch, waits):
    def program(layout, serving, log):
        for _ in range(3):
            log("asks")
            yield ops.DataWait(0, frames=1000)  # 0.1 s to build at 10,000 frames/s
            log("has")
            yield ops.Compute(0, frames=800)  # 0.4 s

    (log,) = launch(world(1, prefetch=prefetch, data_frames_per_s=10_000.0), program).values()
    assert [round(has - asks, 6) for (asks, _), (has, _) in zip(log[::2], log[1::2])] == waits


def test_learners_are_grouped_into_nodes_and_shared_cores_slow_them_down():
    sim = world(10, servers=1, learners_per_node=8)
    learners = [r.layout for r in sim.ranks if not r.serving]
    assert [r.machine for r in sim.ranks] == [0] * 9 + [1, 1]
    assert [learner.node for learner in learners] == [0] * 8 + [1, 1]
    assert learners[-1].node_size == 2 and learners[0].nodes == 2 and sim.ranks[0].node == 0
    # an algorithm may group learners into smaller nodes than the machines (H-ADPSGD's option)
    grouped = SimWorld(10, sim.costs, servers=1, node_size=4)
    assert [r.layout.node for r in grouped.ranks[1:]] == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert [r.machine for r in grouped.ranks] == [0] * 9 + [1, 1] and grouped.sharing[1] == 9
    shared = CostModel(profile(device="shared", compute=None), CALIBRATION)
    # two ranks on two cores: one thread each; four: one thread each at half speed
    assert shared.compute_s("backward", 100, 0, ranks_on_machine=1) == pytest.approx(0.05)
    assert shared.compute_s("backward", 100, 0, ranks_on_machine=2) == pytest.approx(0.1)
    assert shared.compute_s("backward", 100, 0, ranks_on_machine=4) == pytest.approx(0.2)
    # ranks sharing a machine's GPUs take turns on them
    on_gpus = dict(
        CALIBRATION, device="cuda", gpus=2, by_threads={"2": CALIBRATION["by_threads"]["2"]}
    )
    assert (
        CostModel(profile(device="shared", compute=None), on_gpus).compute_s("backward", 100, 0, 8)
        == 0.2
    )
    dedicated = CostModel(profile(), CALIBRATION)
    assert dedicated.compute_s("backward", 100, 0, ranks_on_machine=8) == pytest.approx(0.05)


def test_a_dedicated_device_computes_the_same_whatever_machine_simulates_it():
    """Its rates are the profile's, in seconds: a calibration at another host speed changes
    nothing; another model is carried over by FLOPs and parameters; relative_speed scales both."""
    slow_host = dict(
        CALIBRATION,
        by_threads={
            t: {k: 3 * v for k, v in r.items()} for t, r in CALIBRATION["by_threads"].items()
        },
    )
    costs = [CostModel(profile(), calibration) for calibration in (CALIBRATION, slow_host)]
    for kind in ("backward", "update", "precondition"):
        assert costs[0].compute_s(kind, 1000, 0, 8) == costs[1].compute_s(kind, 1000, 0, 8) > 0
    bigger = dict(CALIBRATION, model={"flops_per_frame": 4e6, "parameters": 200_000})
    costs = CostModel(profile(compute=dict(DEVICE, relative_speed=0.5)), bigger)
    assert costs.compute_s("backward", 1000, 0, 8) == pytest.approx(0.5 * 4 / 0.5)
    assert costs.compute_s("update", 1000, 0, 8) == pytest.approx(0.005 * 2 / 0.5)


def test_a_measured_efficiency_curve_carries_compute_to_other_widths():
    """Seconds per FLOP interpolated log-log between the measured widths, held beyond them; a
    batch's fixed cost not carried by FLOPs; without a curve, one efficiency (FLOPs alone)."""
    curved = dict(
        DEVICE, backward_s_per_batch=0.01, by_size=[[4e6, 1e-3]]
    )  # 4× the FLOPs at 2× the time

    def rates(flops, compute=curved):
        return CostModel(
            profile(compute=compute), dict(CALIBRATION, model=dict(MODEL, flops_per_frame=flops))
        )

    assert rates(1e6).dedicated_rates["backward_s_per_frame"] == pytest.approx(
        5e-4
    )  # the model measured
    assert rates(4e6).dedicated_rates["backward_s_per_frame"] == pytest.approx(
        1e-3
    )  # the other width
    assert rates(2e6).dedicated_rates["backward_s_per_frame"] == pytest.approx(
        2e6 * (5e-10 * 2.5e-10) ** 0.5
    )
    assert rates(16e6).dedicated_rates["backward_s_per_frame"] == pytest.approx(
        4e-3
    )  # at the largest's efficiency
    assert rates(0.5e6).dedicated_rates["backward_s_per_frame"] == pytest.approx(
        2.5e-4
    )  # at the smallest's
    assert rates(16e6).dedicated_rates["backward_s_per_batch"] == pytest.approx(0.01)
    assert rates(16e6, dict(curved, by_size=[])).dedicated_rates[
        "backward_s_per_frame"
    ] == pytest.approx(8e-3)
    assert rates(16e6, dict(curved, by_size=[])).dedicated_rates[
        "backward_s_per_batch"
    ] == pytest.approx(0.16)
    with pytest.raises(ValueError, match="hardware.test.compute: by_size holds .*pairs, each > 0"):
        profile(compute=dict(DEVICE, by_size=[[4e6]]))


def test_a_bad_profile_is_named():
    lab = profile_defaults()
    with pytest.raises(ValueError, match="hardware.lab.device must be one of"):
        Hardware.from_config("lab", dict(lab, device="tpu"))
    with pytest.raises(ValueError, match="latency_us >= 0"):
        Hardware.from_config("lab", dict(lab, node_link={"latency_us": -1, "bandwidth_gbps": 1}))
    with pytest.raises(
        ValueError, match="hardware.lab.compute: a dedicated device states its compute"
    ):
        Hardware.from_config("lab", dict(lab, device="dedicated"))
    with pytest.raises(
        ValueError, match="hardware.lab.compute: .*unexpected keyword argument 'speed'"
    ):
        Hardware.from_config("lab", dict(lab, device="dedicated", compute={"speed": 2}))


QUICK = run_config("asgd", epochs=1, batch_size=4)


@pytest.mark.slow
def test_simulated_asgd_trains_and_its_staleness_comes_from_the_modelled_timings(corpus, tmp_path):

    train_set = corpus_subset(corpus)
    calibration = calibrate(QUICK.train, QUICK.model, QUICK.features, train_set, batches=3)
    for rates in calibration["by_threads"].values():
        assert (
            rates["frames_per_s"] > 0
            and rates["backward_s_per_frame"] > 0
            and rates["update_s"] > 0
        )
    # batches of a quarter, one and four times the policy's size; NG-SGD timed on one of its size
    assert (
        calibration["batch_sizes"] == [1, 4, 16]
        and calibration["preconditioned"]["utterances"] == 4
    )
    widths = calibration[
        "by_size"
    ]  # half and twice the units: an efficiency curve a profile can state
    assert [w["units"] for w in widths] == [QUICK.model.units // 2, QUICK.model.units * 2]
    assert (
        widths[0]["flops_per_frame"]
        < calibration["model"]["flops_per_frame"]
        < widths[1]["flops_per_frame"]
    )
    assert all(w["backward_s_per_frame"] > 0 for w in widths)
    printed = dict(measured_compute(calibration, {}), relative_speed=1.0)
    assert Hardware.from_config("printed", profile_defaults(device="dedicated", compute=printed))

    def staleness(out, **hardware):
        # the fixed calibration, not this machine's of the moment, keeps the schedule deterministic
        costs = CostModel(profile(**hardware), CALIBRATION, seed=QUICK.seed)
        paths = run_paths(corpus, corpus / "shards" / "P4", out)
        train(QUICK, paths, SimWorld(4, costs, servers=1, name="asgd"))
        metrics = pd.read_csv(out / "metrics.tsv", sep="\t")
        assert sorted(metrics[metrics.kind == "interval"]["rank"].unique()) == [0, 1, 2, 3]
        assert metrics[metrics.kind == "epoch"].dev_loss.notna().all()
        return pd.read_csv(out / "server.tsv", sep="\t").groupby("learner").staleness.mean()

    even = staleness(tmp_path / "even")
    assert 1.5 < even.mean() < 3.5  # about P - 1
    slow = staleness(tmp_path / "slow", stragglers={2: 4.0})
    # the straggler's gradients are the stalest (the others finish first, which caps its staleness)
    assert slow[2] > 1.3 * slow.drop(2).mean() and slow[2] >= even[2], (slow, even)


@pytest.mark.slow
@pytest.mark.parametrize("fused", [False, True], ids=["alone", "fused"])
@pytest.mark.parametrize("algorithm", ["ssgd", "kavg", "ma", "adpsgd", "hadpsgd", "asgd", "bmuf"])
def test_a_simulated_run_killed_mid_epoch_resumes_without_losing_or_repeating_a_row(
    corpus, tmp_path, monkeypatch, algorithm, fused
):
    """Fused learners too: killed while gradients wait deferred (ADPSGD's fixed by a gossip). The
    clock's jitter and its node's loader, which the learners wait for, resume where they were, so
    that ASGD's updates and ADPSGD's pairings come in the uninterrupted run's order."""

    config = run_config(algorithm, epochs=1, batch_size=4, log_interval=2, checkpoint_steps=4)
    servers = 1 if algorithm == "asgd" else 0

    def run(out):
        hardware = profile(jitter=0.1, data_frames_per_s=10_000.0)
        costs = CostModel(hardware, CALIBRATION, seed=QUICK.seed)
        paths = run_paths(corpus, corpus / "shards" / "P2", out)
        together = fusers(torch.device("cpu")) if fused else None
        train(config, paths, SimWorld(2, costs, servers=servers, name=algorithm, fusers=together))
        return torch.load(out / "model.pt", weights_only=False)["model"], pd.read_csv(
            out / "metrics.tsv", sep="\t"
        )

    whole, whole_metrics = run(tmp_path / "whole")
    kill_at_loss(monkeypatch, 2 * 10, fused)  # 2 learners, 12 steps an epoch: at step 10 of epoch 1
    with pytest.raises(Killed):
        run(tmp_path / "killed")
    monkeypatch.undo()
    resumed, metrics = run(tmp_path / "killed")
    key = ["kind", "epoch", "step", "rank"]
    assert not metrics.duplicated(key).any()
    assert metrics[key].equals(whole_metrics[key])
    # a finished run keeps learner 0's state (and the server's) and the clock's, in one file: every
    # rank lives here
    (kept,) = (tmp_path / "killed").glob("checkpoints/*/*.pt")
    names = sorted(torch.load(kept, weights_only=False)["skeletons"])
    assert kept.name == "ranks.pt" and names == ["clock", "rank0"] + ["server0"] * servers
    # the modelled clock resumes too, and with it the asynchronous ones' order of events
    assert same_models(whole, resumed)
    assert metrics.drop(columns=TIMES).equals(whole_metrics.drop(columns=TIMES))
    # the run extended by an epoch: every learner goes on from learner 0's state
    config = run_config(algorithm, epochs=2, batch_size=4, log_interval=2, checkpoint_steps=4)
    _, extended = run(tmp_path / "killed")
    assert sorted(set(extended[extended.kind == "epoch"].epoch)) == [1, 2]


def slower_host(calibration: dict, factor: float = 7.0) -> dict:
    """`calibration` as a machine `factor` times slower, with 8 times the cores, would have timed
    it: every second longer, every rate (the loading's too) lower, by `factor`."""
    slow = copy.deepcopy(calibration)
    for rates in slow["by_threads"].values():
        for key, value in rates.items():
            rates[key] = value / factor if key == "frames_per_s" else value * factor
    slow["data_frames_per_s"] /= factor
    slow["cores"] *= 8
    slow["by_size"] = [
        {**width, "backward_s_per_frame": width["backward_s_per_frame"] * factor}
        for width in slow.get("by_size", [])
    ]
    return slow


def simulated_at_two_host_speeds(corpus, out, algorithm, hardware, config, calibration):
    """A run of 4 simulated learners on `hardware` twice, calibrated on this machine and on one
    7 times slower: each run's metrics, server record (ASGD's) and model."""
    found = []
    for index, timed in enumerate((calibration, slower_host(calibration))):
        folder = out / str(index)
        costs = CostModel(hardware, timed, seed=config.seed)
        servers = 1 if algorithm == "asgd" else 0
        train(
            config,
            run_paths(corpus, corpus / "shards" / "P4", folder),
            SimWorld(4, costs, servers=servers, name=algorithm),
        )
        server = folder / "server.tsv"
        found.append(
            (
                pd.read_csv(folder / "metrics.tsv", sep="\t"),
                pd.read_csv(server, sep="\t") if server.exists() else None,
                torch.load(folder / "model.pt", weights_only=False)["model"],
            )
        )
    return found


@pytest.mark.parametrize("algorithm", ["ssgd", "asgd"])
def test_a_run_on_a_dedicated_profile_is_the_same_calibrated_at_two_host_speeds(
    corpus, tmp_path, algorithm
):
    """The modelled clock, ASGD's order of updates with it, and so the whole run, do not depend on
    how fast the machine that simulates it ran its calibration: not its compute, not its loading
    (a profile that states no loading rate loads at the fitted rate of a node)."""
    config = run_config(algorithm, epochs=1, batch_size=4)
    (metrics, server, model), (slow_metrics, slow_server, slow_model) = (
        simulated_at_two_host_speeds(
            corpus, tmp_path, algorithm, profile(jitter=0.1), config, CALIBRATION
        )
    )
    assert profile().data_frames_per_s is None
    assert metrics.equals(slow_metrics) and same_models(model, slow_model)
    if algorithm == "asgd":
        assert server.equals(slow_server)


def test_the_tiny_studys_asgd_is_as_accurate_whatever_speed_its_calibration_timed(corpus, tmp_path):
    """The tiny study's ASGD (studies/quick.yaml's model and training) at 4 learners on zhang19b's
    V100s, calibrated on this machine and on one 7 times slower: the same order of updates (the
    same staleness histogram), the same model, the same greedy WER on the test set."""
    from asrscale.config.schema import validate, with_profiles
    from asrscale.data.tokens import Tokens
    from asrscale.decoding.decode import wer
    from asrscale.decoding.log_probs import model_outputs
    from asrscale.models import build_model

    hardware = Hardware.from_config(
        "zhang19b-v100",
        validate(with_profiles(copy.deepcopy(MINIMAL)))["hardware"]["zhang19b-v100"],
    )
    tiny = run_config("asgd")  # 1 × 32 LSTM, Adam at 0.003, batch 8, 2 epochs: quick.yaml's
    runs = simulated_at_two_host_speeds(corpus, tmp_path, "asgd", hardware, tiny, CALIBRATION)
    (_, server, model), (_, slow_server, slow_model) = runs
    assert server.staleness.value_counts().equals(slow_server.staleness.value_counts())
    assert server.equals(slow_server) and same_models(model, slow_model)
    tokens = Tokens.read(corpus / "tokens.txt")
    test = corpus_subset(corpus, "test", tiny.cmvn)
    errors = []
    for weights in (model, slow_model):
        network = build_model(tiny.model, tiny.features.dim, len(tokens))
        network.load_state_dict(weights)
        outputs = model_outputs(network.eval(), test)
        errors.append(wer(outputs.references, outputs.greedy))
    assert errors[0] == errors[1] and 0 < errors[0] <= 1.5


@pytest.mark.parametrize("decentralized", ["adpsgd", "hadpsgd"])
def test_adpsgd_learners_do_not_wait_for_a_straggler_where_ssgd_learners_do(
    corpus, tmp_path, decentralized
):
    """One learner 3× slower: SSGD's others wait for it at every step (they end their steps when
    it does, mostly idle), ADPSGD's others go on at their own speed (a passive learner answers
    while it computes), ending their steps in about a third of its time; so do H-ADPSGD's nodes
    (of one learner each here: its leaders gossip as ADPSGD's learners do)."""

    def last_steps(algorithm, straggler):
        costs = CostModel(profile(stragglers={straggler: 3.0}), CALIBRATION, seed=QUICK.seed)
        paths = run_paths(corpus, corpus / "shards" / "P4", tmp_path / f"{algorithm}{straggler}")
        world = SimWorld(4, costs, node_size=1, name=algorithm)
        train(run_config(algorithm, epochs=1, batch_size=4, log_interval=1), paths, world)
        metrics = pd.read_csv(paths.out / "metrics.tsv", sep="\t")
        by_rank = metrics[metrics.kind == "interval"].groupby("rank")
        (epoch_s,) = metrics[metrics.kind == "epoch"].time_s
        return by_rank.time_s.max(), by_rank.idle_s.sum() + by_rank.communication_s.sum(), epoch_s

    for straggler in (1, 2):  # an active learner, a passive one
        (ssgd, ssgd_waiting, _), (gossiping, _, epoch_s) = (
            last_steps("ssgd", straggler),
            last_steps(decentralized, straggler),
        )
        others = [rank for rank in range(4) if rank != straggler]
        assert ssgd[others].min() > 0.9 * ssgd[straggler]
        assert ssgd_waiting[others].sum() > ssgd_waiting[straggler] * 10
        assert gossiping[others].max() < 0.5 * gossiping[straggler]
        # the epoch ends when its last learner does: the straggler's time, not the learners' mean
        assert epoch_s == pytest.approx(gossiping.max(), rel=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ssgd", "kavg", "ma", "adpsgd", "hadpsgd", "asgd"])
@pytest.mark.parametrize("checkpoint_steps", [0, 4])
def test_a_simulated_run_that_explodes_stops_alike_on_every_learner(
    corpus, tmp_path, algorithm, checkpoint_steps
):
    """Where the learners meet (an epoch's end, or a checkpoint within it) they stop together,
    the servers and passive gossipers too, and the leader writes what a diverged run leaves."""

    options = (
        {"max_param_change": 0} if algorithm == "ma" else {}
    )  # which would keep MA from diverging
    exploding = run_config(
        algorithm,
        options=options,
        lr=1e4,
        epochs=2,
        batch_size=4,
        log_interval=2,
        checkpoint_steps=checkpoint_steps,
    )
    costs = CostModel(profile(learners_per_node=2), CALIBRATION, seed=QUICK.seed)
    paths = run_paths(corpus, corpus / "shards" / "P4", tmp_path)
    train(
        exploding,
        paths,
        SimWorld(4, costs, servers=1 if algorithm == "asgd" else 0, name=algorithm),
    )
    diverged, metrics, _, _ = diverged_run(tmp_path)
    assert (diverged["epoch"], diverged["step"]) == (1, checkpoint_steps or 6)
    assert sorted(metrics["rank"].unique()) == [0, 1, 2, 3] and metrics.epoch.max() == 1


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_kavg_averaging_every_step_is_ssgd_under_sgd_and_not_under_adam(
    corpus, tmp_path, optimizer
):
    """K = 1: every learner's own step, then the average of the models and the optimizer's state,
    is SSGD's step on the averaged gradient where the update is linear in the gradient (SGD with
    momentum: docs/studies.md), and not under Adam (the mean of squared gradients is not the square
    of their mean)."""
    models = {}
    for algorithm, options in (("ssgd", {}), ("kavg", {"period": 1})):
        run = run_config(
            algorithm, options=options, epochs=1, batch_size=4, optimizer=optimizer, lr=0.05
        )
        costs = CostModel(profile(), CALIBRATION, seed=run.seed)
        paths = run_paths(corpus, corpus / "shards" / "P4", tmp_path / algorithm)
        train(run, paths, SimWorld(4, costs, name=algorithm))
        models[algorithm] = torch.load(tmp_path / algorithm / "model.pt", weights_only=False)[
            "model"
        ]
    differences = [
        (models["ssgd"][name] - models["kavg"][name]).abs().max().item() for name in models["ssgd"]
    ]
    if optimizer == "sgd":
        assert max(differences) < 1e-5, differences
    else:
        assert max(differences) > 1e-3, differences


def test_averaging_the_weights_alone_sends_a_third_of_adams_bytes(corpus, tmp_path):
    """KAVG averaging every step under Adam: the model and its two moments, or the weights alone
    (links without latency: the modelled allreduce time is in proportion to the bytes)."""
    communication = {}
    for averages in ("model_and_optimizer", "model"):
        run = run_config(
            "kavg", options={"period": 1, "averages": averages}, epochs=1, batch_size=4
        )
        costs = CostModel(profile(), CALIBRATION, seed=run.seed)
        train(
            run,
            run_paths(corpus, corpus / "shards" / "P4", tmp_path / averages),
            SimWorld(4, costs, name="kavg"),
        )
        metrics = pd.read_csv(tmp_path / averages / "metrics.tsv", sep="\t")
        communication[averages] = metrics[metrics.kind == "interval"].communication_s.sum()
    assert communication["model"] == pytest.approx(
        communication["model_and_optimizer"] / 3, rel=0.01
    ), communication


def test_h_adpsgd_whose_learners_are_all_in_one_node_is_ssgd_step_for_step(corpus, tmp_path):
    """One node is one super learner: its gradients allreduced every step, no gossip; so the table
    of algorithms says a study trains SSGD's run for it (asrscale.config.algorithms)."""
    from asrscale.config.algorithms import algorithm_spec

    assert algorithm_spec("hadpsgd").in_one_node_is == "ssgd"
    models = {}
    for algorithm in ("ssgd", "hadpsgd"):
        run = run_config(algorithm, epochs=1, batch_size=4)
        costs = CostModel(profile(learners_per_node=4), CALIBRATION, seed=run.seed)
        train(
            run,
            run_paths(corpus, corpus / "shards" / "P4", tmp_path / algorithm),
            SimWorld(4, costs, name="x"),
        )
        models[algorithm] = torch.load(tmp_path / algorithm / "model.pt", weights_only=False)[
            "model"
        ]
    assert all(
        torch.equal(models["ssgd"][name], models["hadpsgd"][name]) for name in models["ssgd"]
    )


def test_where_mpi_is_not_cuda_aware_every_allreduce_is_staged_through_host_memory():
    """su15's data path: 1 MB copied to the host (8 ms over a 1 Gb/s host link) and back around the
    allreduce, its sums made on the host (3·(R-1)/R·n bytes at 1 Gb/s of memory); the copies are
    the learners' staging time, the rest their communication."""

    def program(layout, serving, log):
        yield ops.Allreduce([torch.zeros(MEGABYTE)], "learners")
        log("done")

    plain = world(2)
    staged = world(
        2, host_staging={"link": {"latency_us": 0, "bandwidth_gbps": 1.0}, "memory_gbps": 1.0}
    )
    ring = plain.costs.allreduce_s(4 * MEGABYTE, 2, same_node=True)
    assert launch(plain, program)[0] == [(round(ring, 6), "done")]
    host_sums = 3 * 1 / 2 * 0.008
    assert launch(staged, program)[0] == [(round(ring + host_sums + 2 * 0.008, 6), "done")]
    split = staged.ranks[0].clock.snapshot()
    assert split["staging_s"] == pytest.approx(0.016) and split["communication_s"] == pytest.approx(
        ring + host_sums
    )


def test_a_node_loads_data_for_its_learners_in_turn_where_its_profile_says_how_fast():
    """A node's loaders at 10,000 frames/s build its two learners' 1,000-frame batches one after
    the other (0.1 s each): the second learner waits 0.2 s for its first. A shared device's
    profile without a node rate gives each learner a loader of its own at the calibrated rate; a
    dedicated one's node loads at the fitted rate."""

    def program(layout, serving, log):
        yield ops.DataWait(0, frames=1000)
        log("has")

    node = world(2, prefetch=1, data_frames_per_s=10_000.0)
    assert sorted(log[0][0] for log in launch(node, program).values()) == pytest.approx([0.1, 0.2])
    own = world(2, prefetch=1, device="shared", compute=None)  # the calibration's 10,000 frames/s
    assert sorted(log[0][0] for log in launch(own, program).values()) == pytest.approx([0.1, 0.1])
    fitted = world(2, prefetch=1).costs.achieved.node_data_frames_per_s
    found = sorted(log[0][0] for log in launch(world(2, prefetch=1), program).values())
    assert found == pytest.approx([1000 / fitted, 2000 / fitted])


def test_serving_a_gossip_exchange_costs_the_passive_learner_a_share_of_its_time():
    """ADPSGD: the passive learner answers while it computes; it loses `serving` of the
    exchange's time (two 8 ms transfers) from its next computation."""
    from asrscale.worlds.clock import Achieved

    def program(layout, serving, log):
        model = [torch.zeros(MEGABYTE)]
        if layout.rank == 0:  # passive: answers, computes twice
            yield ops.Serve(model, [1], "learners")
            for _ in range(2):
                yield ops.Compute(0, frames=200)  # 0.1 s
            log("computed")
            yield ops.StopServing()
        else:
            handle = yield ops.Gossip(model, [torch.zeros(MEGABYTE)], 0, "learners")
            yield ops.Wait(handle)
            yield ops.Notify([0], "learners")

    def computed(serving: float) -> float:
        fitted = Achieved.fitted()
        costs = CostModel(
            profile(), CALIBRATION, achieved=Achieved(**{**fitted.__dict__, "serving": serving})
        )
        return launch(SimWorld(2, costs, name="test"), program)[0][0][0]

    assert computed(0.0) == pytest.approx(0.2)
    assert computed(0.5) == pytest.approx(0.2 + 0.5 * 0.016)


def test_gossip_gives_both_learners_the_half_and_half_average_and_keeps_the_mean():
    """Learner 0 serves; learner 1 asks at once, learner 2 after computing 0.1 s, so the second
    averaging starts from the first's result: 0 and 1 make (0+4)/2, (0+8)/2 = (2, 4), then 0 and
    2 make (2+8)/2, (4+0)/2 = (5, 2). Each active learner takes the average from the answer (its
    peer's model before it averaged), as ADPSGD does; the sum 12, 8 of the three is kept."""
    from asrscale.training.algorithms.adpsgd import average_with

    models = [[torch.tensor([0.0, 0.0])], [torch.tensor([4.0, 8.0])], [torch.tensor([8.0, 0.0])]]
    answers = {}

    def program(layout, serving, log):
        mine = models[layout.rank]
        if layout.rank == 0:
            yield ops.Serve(mine, [1, 2], "learners")
            yield ops.StopServing()  # once both have notified
            return
        if layout.rank == 2:
            yield ops.Compute(0, frames=200)
        theirs = [torch.empty(2)]
        yield ops.Wait((yield ops.Gossip(mine, theirs, 0, "learners")))
        answers[layout.rank] = theirs[0].tolist()
        average_with(mine, theirs)
        yield ops.Notify([0], "learners")

    launch(world(3), program)
    assert answers == {1: [0.0, 0.0], 2: [2.0, 4.0]}
    assert [model[0].tolist() for model in models] == [[5.0, 2.0], [2.0, 4.0], [5.0, 2.0]]
    assert sum(model[0] for model in models).tolist() == [12.0, 8.0]  # as before: the mean kept


def test_bmuf_without_block_momentum_is_its_kavg_arm_bit_for_bit_and_with_it_is_not(
    corpus, tmp_path
):
    """η = 0 and ζ = 1 leave each block's average as it is and give the model of KAVG at the same K
    and treatment of the learners' momentum (kept; restarted and corrected) to the last bit, in a
    whole run; BMUF's own η (1 − 1/P) moves it, and so does another treatment."""
    models = {}
    eta_0 = {"block_momentum": 0.0}
    for name, algorithm, options in (
        ("kavg", "kavg", {}),
        ("bmuf-0", "bmuf", eta_0 | {"learner_momentum": "kept"}),
        ("kavg-corrected", "kavg", {"learner_momentum": "corrected"}),
        ("bmuf-0-corrected", "bmuf", eta_0 | {"learner_momentum": "corrected"}),
        ("bmuf", "bmuf", {}),
    ):
        run = run_config(algorithm, options={"period": 2, **options}, epochs=1, log_interval=2)
        costs = CostModel(profile(), CALIBRATION, seed=QUICK.seed)
        train(
            run,
            run_paths(corpus, corpus / "shards" / "P2", tmp_path / name),
            SimWorld(2, costs, name=name),
        )
        models[name] = torch.load(tmp_path / name / "model.pt", weights_only=False)["model"]
    assert same_models(models["kavg"], models["bmuf-0"])
    assert same_models(models["kavg-corrected"], models["bmuf-0-corrected"])
    assert not same_models(models["kavg"], models["kavg-corrected"])
    assert not same_models(models["kavg-corrected"], models["bmuf"])
