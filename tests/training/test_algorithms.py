import itertools
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from asrscale.config.schema import profile_defaults
from asrscale.errors import ConfigError
from asrscale.training.algorithms import make_algorithm
from asrscale.training.algorithms.adpsgd import neighbours
from asrscale.training.algorithms.asgd import DONE, GRADIENT
from asrscale.training.learner import Learner, make_optimizer
from asrscale.worlds import ops
from asrscale.worlds.clock import CostModel, Hardware
from asrscale.worlds.ops import Layout
from asrscale.worlds.simulated import SimWorld
from helpers import CALIBRATION, GPU, run_config, run_paths


@pytest.mark.parametrize("graph", ["ring", "exponential"])
@pytest.mark.parametrize("size", range(1, 65))
def test_adpsgd_graphs_join_active_to_passive_learners_symmetrically_and_connect_every_learner(
    size, graph
):
    links = {rank: neighbours(rank, size, graph) for rank in range(size)}
    for rank, peers in links.items():
        assert all(peer % 2 != rank % 2 and rank in links[peer] for peer in peers)
    reached, frontier = {0}, [0]  # every learner reaches every other along the graph
    while frontier:
        frontier = [peer for rank in frontier for peer in links[rank] if peer not in reached]
        reached.update(frontier)
    assert reached == set(range(size))
    if size > 2 and graph == "ring":
        assert all(len(peers) <= 2 for peers in links.values())


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("kavg", {"period": 0}, "algorithms.kavg.period: 0 is less than the minimum of 1"),
        (
            "kavg",
            {"period_policy": "sometimes"},
            r"algorithms.kavg.period_policy: 'sometimes' is not one of \['fixed'",
        ),
        ("adpsgd", {"graph": "star"}, "algorithms.adpsgd.graph: 'star' is not one of"),
        (
            "hadpsgd",
            {"node_size": 2},
            r"algorithms.hadpsgd: .*'node_size' was unexpected",
        ),  # the study's
        (
            "asgd",
            {"max_staleness": -1},
            "algorithms.asgd.max_staleness: -1 is less than the minimum of 0",
        ),
        ("ma", {"reduce": "gather"}, "algorithms.ma.reduce: 'gather' is not one of"),
        ("ssgd", {"period": 2}, r"algorithms.ssgd: .*'period' was unexpected"),
    ],
)
def test_options_are_validated_eagerly_by_the_table_of_algorithms(name, options, message):
    with pytest.raises(ConfigError, match=message):
        make_algorithm(name, Layout(rank=0, size=4), options)


def test_kavg_period_policies():
    assert (
        make_algorithm("kavg", Layout(0, 16), {"period": 8, "period_policy": "by_learners"}).period
        == 2
    )
    assert (
        make_algorithm("kavg", Layout(0, 2), {"period": 8, "period_policy": "by_learners"}).period
        == 16
    )
    plateau = make_algorithm(
        "kavg", Layout(0, 4), {"period": 8, "period_policy": "plateau", "plateau": 0.05}
    )
    for dev_loss in (1.0, 0.5, 0.49):
        list(plateau.end_epoch(None, dev_loss))
    assert plateau.period == 4


def test_the_algorithms_that_are_seq_with_one_learner():
    # each is checked against SEQ with one learner on a real rank in test_mpi.py; ASGD (a server
    # round trip) and MA (natural gradient, capped change) cost or compute differently
    from asrscale.config.algorithms import ALGORITHMS

    alone_is_seq = {name for name, spec in ALGORITHMS.items() if spec.alone_is_seq}
    assert alone_is_seq == {"ssgd", "kavg", "adpsgd", "hadpsgd", "bmuf"}


def test_asgd_messages_are_float32_on_the_wire():
    """A gradient push is the gradient and a 3-value header, all float32: a float64 header would
    promote the whole message and double the server's traffic on real ranks."""
    from torch import nn

    from asrscale.training.learner import Learner, make_optimizer
    from asrscale.worlds import ops

    model = nn.Linear(5, 3)
    learner = Learner(model, make_optimizer("sgd", 0.9, model), 0.0, "asgd")
    for parameter in learner.parameters:
        parameter.grad = torch.ones_like(parameter)
    asgd = make_algorithm("asgd", Layout(rank=0, size=2, servers=1))
    program = asgd._request(learner, 0, lr=0.1, payload=learner.gradients)
    push = next(program)
    assert isinstance(push, ops.Send) and push.to == 0
    wire = ops.flatten(push.tensors)
    assert wire.dtype == torch.float32 and wire.numel() * wire.element_size() == 4 * (5 * 3 + 3 + 3)


def test_the_consensus_is_measured_not_imposed_on_the_learners():
    """After an epoch the averaging algorithms evaluate the learners' average, and each learner
    goes on from its own model (no synchronisation the algorithm does not make itself)."""
    from asrscale.worlds import ops

    class Holder:
        def __init__(self, value):
            self.state = [torch.full((3,), float(value))]

    for name in ("kavg", "ma", "adpsgd", "hadpsgd", "bmuf"):
        learners = [Holder(rank) for rank in range(2)]
        programs = [
            make_algorithm(name, Layout(rank=rank, size=2, node_size=1, nodes=2)).consensus(
                learners[rank]
            )
            for rank in range(2)
        ]
        requests = [next(program) for program in programs]
        assert all(isinstance(request, ops.Allreduce) for request in requests)
        average = sum(ops.flatten(r.tensors) for r in requests) / 2
        for request in requests:
            ops.unflatten(average, request.tensors)
        results = []
        for program in programs:
            with pytest.raises(StopIteration) as done:
                next(program)
            results.append(done.value.value)
        assert all(torch.equal(result[0], torch.full((3,), 0.5)) for result in results)
        assert [learner.state[0][0].item() for learner in learners] == [0.0, 1.0], name


@pytest.mark.parametrize("name", ["kavg", "ma", "adpsgd", "hadpsgd", "bmuf"])
def test_an_averaging_shares_the_model_and_the_optimizers_state_or_the_weights_alone(name):
    """What an averaging's requests carry: the model and Adam's two moments (3× the model's bytes),
    or with `averages: model` the weights alone, as the studies averaged."""
    from torch import nn

    from asrscale.training.learner import Learner, make_optimizer

    model = nn.Linear(5, 3)
    learner = Learner(model, make_optimizer("adam", 0.0, model), 0.0, name)
    weights = sum(t.numel() for t in learner.state)
    for averages, values in (("model_and_optimizer", 3 * weights), ("model", weights)):
        algorithm = make_algorithm(
            name, Layout(rank=1, size=2, node_size=1, nodes=2), {"averages": averages}
        )
        assert sum(t.numel() for t in algorithm.shared(learner)) == values
    with pytest.raises(ConfigError, match=f"algorithms.{name}.averages: 'gradients' is not one of"):
        make_algorithm(name, Layout(rank=0, size=2), {"averages": "gradients"})


class GivenGradient(Learner):
    """A learner of one linear layer (no bias) holding `weights`, under SGD without momentum (a step
    moves it by -lr × its gradient), whose every minibatch has `gradient` (no loss computed)."""

    def __init__(self, weights: list[float], gradient: list[float]):
        model = nn.Linear(len(weights), 1, bias=False)
        with torch.no_grad():
            model.weight.copy_(torch.tensor([weights]))
        super().__init__(model, make_optimizer("sgd", 0.0, model), 0.0, "given")
        self.gradient = torch.tensor([gradient])

    def backward(self, batch, recorder=None):
        self.parameters[0].grad.copy_(self.gradient)
        yield from ()
        return 0.0

    @property
    def weights(self) -> list[float]:
        return self.parameters[0].detach().reshape(-1).tolist()


def carry_out(program) -> list:
    """One learner's program alone: its updates carried out as they come, its exchanges answered
    with nothing (a learner alone has no one to exchange with); returns the requests it made."""
    requests, result = [], None
    while True:
        try:
            request = program.send(result)
        except StopIteration:
            return requests
        requests.append(request)
        result = request.alone() if isinstance(request, ops.Update) else None


def ma(layout: Layout | None = None, **options):
    """MA (of one learner alone unless `layout` says) without natural gradient (a linear layer has
    no recording forward pass), averaging the weights alone."""
    return make_algorithm(
        "ma", layout or Layout(0, 1), {"natural_gradient": False, "averages": "model", **options}
    )


@pytest.mark.parametrize(
    "cap, expected",
    [
        (1.0, [1 - 0.6, 2 - 0.8]),  # a change of 5 scaled to exactly the cap: 1/5 of (-3, -4)
        (10.0, [1 - 3, 2 - 4]),  # under the cap: untouched
        (5.0, [1 - 3, 2 - 4]),  # at the cap: untouched (Kaldi scales a change that exceeds it)
        (0.0, [1 - 3, 2 - 4]),  # 0: no cap
    ],
)
def test_mas_change_cap_scales_a_step_over_it_to_exactly_the_cap(cap, expected):
    """Kaldi's max-param-change on a known step: the gradient (3, 4) at rate 1 moves the weights
    (1, 2) by (-3, -4), a change of norm 5."""
    learner = GivenGradient([1.0, 2.0], [3.0, 4.0])
    averaging = ma(max_param_change=cap, frames_per_job=10**6)
    carry_out(averaging.plan(1.0))
    carry_out(averaging.step(learner, None, lr=1.0))
    assert learner.weights == pytest.approx(expected, rel=1e-6)
    change = torch.linalg.vector_norm(
        torch.tensor(learner.weights) - torch.tensor([1.0, 2.0])
    ).item()
    assert change == pytest.approx(min(5.0, cap or 5.0), rel=1e-6)


@pytest.mark.parametrize(
    "frames_per_job, frames_per_step, period",
    [
        (
            600_000,
            32_000.0,
            19,
        ),  # rosc17's 600k frames over steps of 32 utterances of 1,000 frames: 18.75
        (400_000, 16_000.0, 25),  # Kaldi's default for LSTMs over 16 utterances of 1,000 frames
        (10_000, 32_000.0, 1),  # less than one step's frames: every step averages
    ],
)
def test_mas_period_is_its_frames_per_job_over_a_steps_frames_in_steps(
    frames_per_job, frames_per_step, period
):
    averaging = ma(frames_per_job=frames_per_job, max_param_change=0.0)
    carry_out(averaging.plan(frames_per_step))
    learner = GivenGradient([0.0], [0.0])
    steps = [carry_out(averaging.step(learner, None, 0.1)) for _ in range(2 * period)]
    averaged_at = [
        step
        for step, made in enumerate(steps, 1)
        if any(isinstance(r, ops.Allreduce) for r in made)
    ]
    assert averaging.period == period and averaged_at == [period, 2 * period]


def recorded(program, kinds: list[str]):
    """`program`'s requests, the kind of each appended to `kinds`."""
    result = None
    while True:
        try:
            request = program.send(result)
        except StopIteration as done:
            return done.value
        kinds.append(type(request).__name__)
        result = yield request


def averaged_by_ma(
    models: list[list[float]], reduce: str
) -> tuple[list[list[float]], list[list[str]]]:
    """Each simulated learner's weights after one MA averaging of `models` (learner r's weights
    models[r]) with `reduce`, and the kinds of request each made for it."""
    costs = CostModel(Hardware.from_config("test", profile_defaults(**GPU)), CALIBRATION)
    held = [SimpleNamespace(state=[torch.tensor(weights)]) for weights in models]
    made = [[] for _ in models]

    def program(layout, serving, clock):
        averaging = ma(layout, reduce=reduce, frames_per_job=1)
        yield from averaging.plan(1.0)  # a period of one step
        yield from recorded(averaging.count_step(held[layout.rank]), made[layout.rank])

    SimWorld(len(models), costs, name="ma").launch(program)
    return [learner.state[0].tolist() for learner in held], made


def test_mas_averaging_gives_every_learner_the_mean_by_allreduce_or_through_learner_0():
    """rosc17's master rank (learner 0 receives the others' models, averages and sends the average
    back) ends where one allreduce does: the equal-weight mean of the learners' models."""
    models = [[1.0, -4.0], [2.0, 0.0], [6.0, 10.0]]
    for reduce in ("allreduce", "master"):
        assert averaged_by_ma(models, reduce)[0] == [[3.0, 2.0]] * 3, reduce
        assert averaged_by_ma([[1.0], [3.0]], reduce)[0] == [[2.0]] * 2, reduce
    assert averaged_by_ma(models, "allreduce")[1] == [["Barrier", "Allreduce"]] * 3
    through_master = [["Barrier", "Receive", "Receive", "Send", "Send"]] + [
        ["Barrier", "Send", "Receive"]
    ] * 2
    assert averaged_by_ma(models, "master")[1] == through_master


def serve_pushes(asgd, server: Learner, pushes: list[tuple[int, int, int, float]]) -> list[float]:
    """ASGD's server driven through `pushes` ((learner, kind, server version it pulled, rate) in
    the order they arrive; a gradient's values all 1), its updates carried out; returns the rates
    it updated at."""
    program, pushes, rates = (
        asgd.serve(server, checkpoint=lambda step: None, roll_back=lambda: None),
        iter(pushes),
        [],
    )
    result = None
    while True:
        try:
            request = program.send(result)
        except StopIteration:
            return rates
        result = None  # a reply's send needs no answer
        if isinstance(request, ops.Update):
            rates.append(request.job[1])
            request.alone()
        elif isinstance(request, ops.Receive):
            learner, kind, pulled, rate = next(pushes)
            for gradient in request.tensors[:-1]:
                gradient.fill_(1.0)
            request.tensors[-1].copy_(torch.tensor([kind, pulled, rate]))
            result = (learner + asgd.layout.servers, kind)


def asgd_server(options: dict) -> tuple:
    """ASGD's server of 2 learners, and its model: one weight, 0, under SGD without momentum (a
    gradient of 1 at rate r takes r off it)."""
    return make_algorithm("asgd", Layout(rank=0, size=2, servers=1), options), GivenGradient(
        [0.0], [0.0]
    )


# learner 0's gradient from version 0, learner 1's from version 0 (one update stale), learner 0's
# from version 1 (one stale), learner 1's from version 0 (three stale), then both done
STALE = [
    (0, GRADIENT, 0, 0.1),
    (1, GRADIENT, 0, 0.1),
    (0, GRADIENT, 1, 0.1),
    (1, GRADIENT, 0, 0.1),
    (0, DONE, 0, 0.0),
    (1, DONE, 0, 0.0),
]


@pytest.mark.parametrize(
    "staleness_lr, rates",
    [(False, [0.1, 0.1, 0.1, 0.1]), (True, [0.1, 0.1 / 2, 0.1 / 2, 0.1 / 4])],
)
def test_asgds_staleness_lr_divides_a_gradients_rate_by_one_plus_its_staleness(staleness_lr, rates):
    asgd, server = asgd_server({"staleness_lr": staleness_lr})
    assert serve_pushes(asgd, server, STALE) == pytest.approx(rates)
    assert server.weights == pytest.approx([-sum(rates)])
    # (learner, version pulled, version once applied, staleness, applied): staleness is the
    # server's version at apply minus the version pulled
    assert asgd.records == [
        (0, 0, 1, 0, True),
        (1, 0, 2, 1, True),
        (0, 1, 3, 1, True),
        (1, 0, 4, 3, True),
    ]


@pytest.mark.parametrize(
    "bound, applied",
    [
        (None, [True] * 4),
        (3, [True] * 4),
        (1, [True, True, True, False]),
        (0, [True, False, True, False]),
    ],
)
def test_asgds_max_staleness_drops_a_gradient_staler_than_the_bound(bound, applied):
    """A dropped gradient leaves the model and the server's version as they were (its learner is
    still answered with the model): with a bound of 0, learner 1's first gradient (one stale) is
    dropped, so learner 0's second, pulled at version 1, is fresh and applied."""
    asgd, server = asgd_server({"max_staleness": bound})
    rates = serve_pushes(asgd, server, STALE)
    assert [record[-1] for record in asgd.records] == applied and len(rates) == sum(applied)
    assert server.weights == pytest.approx([-0.1 * sum(applied)]) and asgd.version == sum(applied)


def test_a_runs_ma_period_is_its_frames_per_job_over_the_mean_frames_of_a_step(
    corpus, tmp_path, monkeypatch
):
    """On the tiny corpus's 96 training utterances, 2 learners of 48 each take 6 steps of 8 an
    epoch: a step has a twelfth of the corpus's frames on average, and a job of 3 such steps'
    frames averages every third step."""
    from asrscale.data.features import read_frame_counts
    from asrscale.training.algorithms.ma import ModelAveraging
    from asrscale.training.run import train

    frames = sum(read_frame_counts(corpus / "feats" / "train").values())
    planned, real_plan = [], ModelAveraging.plan

    def plan(self, frames_per_step):
        yield from real_plan(self, frames_per_step)
        planned.append((frames_per_step, self.period))

    monkeypatch.setattr(ModelAveraging, "plan", plan)
    options = {"frames_per_job": round(3 * frames / 12), "natural_gradient": False}
    world = SimWorld(
        2, CostModel(Hardware.from_config("test", profile_defaults(**GPU)), CALIBRATION), name="ma"
    )
    run = run_config("ma", options=options, epochs=1, batch_size=8)
    train(run, run_paths(corpus, corpus / "shards" / "P2", tmp_path), world)
    assert planned == [(pytest.approx(frames / 12), 3)] * 2


class QuadraticLearner:
    """A learner of one weight on the loss ½(w − c)², its own c: a step at rate lr moves w by lr·(c
    − w)."""

    def __init__(self, target: float):
        self.state = [torch.zeros(1, dtype=torch.float64)]
        self.averaged, self.target = self.state, target

    def backward(self, batch):
        yield from ()
        return 0.5 * float((self.state[0] - self.target) ** 2)

    def update(self, lr):
        yield from ()
        self.state[0].add_(lr * (self.target - self.state[0]))

    def restart_momentum(self):
        """Plain gradient steps: no momentum to restart."""

    def momentum_correction(self, steps):
        """Plain gradient steps: no momentum to correct."""
        return 1.0


class ScriptedLearner(Learner):
    """A real learner (asrscale's SGD with momentum 0.9) of two weights on a scripted loss: g·w, a
    steady gradient g, or ½(w − c)² of its own c."""

    def __init__(self, target: float | None = None, gradient: float = 1.0):
        model = nn.Module()
        model.w = nn.Parameter(torch.zeros(2, dtype=torch.float64))
        super().__init__(model, make_optimizer("sgd", 0.9, model), 0.0, "scripted")
        self.target, self.gradient = target, gradient

    def backward(self, batch):
        yield from ()
        weight = self.parameters[0]
        steady = torch.full_like(weight, self.gradient)
        weight.grad.copy_(steady if self.target is None else weight.detach() - self.target)
        return 0.0


def in_lockstep(programs) -> None:
    """The learners' programs run together, each Allreduce averaged over all, each Broadcast from
    the first."""
    requests = [request for program in programs if (request := next(program, None)) is not None]
    while requests:
        if isinstance(requests[0], ops.Allreduce | ops.Broadcast):
            for tensors in zip(*(request.tensors for request in requests)):
                common = (
                    tensors[0].clone()
                    if isinstance(requests[0], ops.Broadcast)
                    else sum(tensors) / len(tensors)
                )
                for tensor in tensors:
                    tensor.copy_(common)
        for request in requests:
            if isinstance(request, ops.Update):
                request.alone()
        requests = [request for program in programs if (request := next(program, None)) is not None]


@pytest.mark.parametrize(
    "nesterov, starts", [(False, [1.0, 2.0, 2.5]), (True, [1.5, 2.125, 2.21875])]
)
def test_bmuf_filters_each_blocks_average_with_its_block_momentum(nesterov, starts):
    """Two learners of targets 1 and 3 (the optimum of their sum is 2), rate 0.5, a block a step, η
    = 0.5, ζ = 1, worked by hand: W̄ − W_g is filtered into G ← η·G + Δ, W ← W + G, and the next
    block starts from W (overshooting 2: momentum), or from the look-ahead W + η·G (see the
    module)."""
    learners = [QuadraticLearner(1.0), QuadraticLearner(3.0)]
    options = {"period": 1, "block_momentum": 0.5, "block_lr": 1.0, "nesterov": nesterov}
    bmufs = [make_algorithm("bmuf", Layout(rank, 2), options) for rank in range(2)]
    in_lockstep([bmuf.start(learner) for bmuf, learner in zip(bmufs, learners)])
    found = []
    for _ in starts:
        in_lockstep([bmuf.step(learner, None, 0.5) for bmuf, learner in zip(bmufs, learners)])
        assert (
            learners[0].state[0].item() == learners[1].state[0].item()
        )  # every learner holds the same start
        found.append(learners[0].state[0].item())
    assert found == starts


@pytest.mark.parametrize("name", ["kavg", "bmuf"])
@pytest.mark.parametrize(
    "optimizer, restarted, kept",
    [("sgd", ["momentum_buffer"], []), ("adam", ["exp_avg"], ["exp_avg_sq"])],
)
def test_a_blocks_averaging_restarts_each_learners_momentum_unless_it_is_kept(
    name, optimizer, restarted, kept
):
    """CNTK's block-momentum learner resets its learners' SGD momentum after each aggregation: so
    do KAVG and BMUF where `learner_momentum` is "restarted" or "corrected" (SGD's velocity, Adam's
    first moment; Adam's second, a scale, is kept), and not where it is "kept", nor where a lone
    learner averages with no one (P = 1 is SEQ)."""
    for learners, treatment in itertools.product((2, 1), ("kept", "restarted", "corrected")):
        model = nn.Linear(3, 2)
        learner = Learner(model, make_optimizer(optimizer, 0.9, model), 5.0, "0")
        for state in learner.optimizer.state.values():
            for key in restarted + kept:
                state[key].fill_(1.0)
        options = {"learner_momentum": treatment}
        algorithm = make_algorithm(name, Layout(0, learners), options)
        if name == "bmuf":
            algorithm._new_block(learner)
        algorithm.block_steps = 3
        algorithm.after_averaging(learner)
        left = 1.0 if treatment == "kept" or learners == 1 else 0.0
        assert algorithm.block_steps == 0
        for state in learner.optimizer.state.values():
            assert all(bool((state[key] == left).all()) for key in restarted)
            assert all(bool((state[key] == 1.0).all()) for key in kept)


def test_a_restarted_velocity_corrected_steps_by_the_mean_of_its_gradients():
    """SGD's velocity from zero after t steps of a steady gradient g is (1 − 0.9^t)·g: corrected,
    the t-th step after a restart moves lr·g, as with the momentum built up; uncorrected, a block of
    4 moves 0.9049·lr·g."""
    learner, lr = ScriptedLearner(gradient=2.0), 0.1
    moved = []
    for steps in range(1, 5):
        before = learner.parameters[0].detach().clone()
        list(learner.backward(None))
        learner.apply(lr * learner.momentum_correction(steps))
        moved.append((before - learner.parameters[0].detach())[0].item())
    assert moved == pytest.approx([lr * 2.0] * 4, rel=1e-12)
    learner.restart_momentum()
    start = learner.parameters[0].detach().clone()
    for _ in range(4):
        list(learner.backward(None))
        learner.apply(lr)
    uncorrected = (start - learner.parameters[0].detach())[0].item()
    assert uncorrected == pytest.approx(lr * 2.0 * sum(1 - 0.9**t for t in range(1, 5)))
    assert uncorrected == pytest.approx(0.9049 * lr * 2.0)


def test_adams_first_moment_restarted_is_corrected_by_its_own_steps_not_adams():
    """Adam divides its first moment by 1 − β₁^n, n its steps in all; restarted t steps ago, the
    correction makes it 1 − β₁^t: the step after a restart is lr·g / (√v̂ + ε) with m̂ = g."""
    model = nn.Linear(3, 2)
    learner = Learner(model, make_optimizer("adam", 0.9, model), 0.0, "0")
    for _ in range(5):  # Adam's steps in all: 5, then the 6th
        for p in learner.parameters:
            p.grad = torch.randn_like(p)
        learner.apply(1e-3)
    learner.restart_momentum()
    gradient = [torch.randn_like(p) for p in learner.parameters]
    for p, g in zip(learner.parameters, gradient):
        p.grad = g.clone()
    before = [p.detach().clone() for p in learner.parameters]
    squares = [learner.optimizer.state[p]["exp_avg_sq"].clone() for p in learner.parameters]
    learner.apply(1e-3 * learner.momentum_correction(1))
    beta2, eps = 0.999, 1e-8
    for p, g, was, square in zip(learner.parameters, gradient, before, squares):
        second = (beta2 * square + (1 - beta2) * g * g) / (1 - beta2**6)
        assert torch.allclose(was - p.detach(), 1e-3 * g / (second.sqrt() + eps), rtol=1e-4)


KAVG_ARMS = ("kept", "restarted", "corrected")


def blocks(name: str, options: dict, learners: list, steps: int, lr: float = 0.05) -> list:
    """`steps` steps of `name` over `learners` in lockstep, at `lr` times the algorithm's factor
    (as the trainer applies it); the algorithms."""
    algorithms = [make_algorithm(name, Layout(rank, len(learners)), options) for rank in range(2)]
    in_lockstep([a.start(learner) for a, learner in zip(algorithms, learners)])
    rate = lr * algorithms[0].rate_factor
    for _ in range(steps):
        in_lockstep([a.step(learner, None, rate) for a, learner in zip(algorithms, learners)])
    return algorithms


def held(learners: list) -> list[torch.Tensor]:
    """Every learner's weights and velocities."""
    return [tensor.clone() for learner in learners for tensor in learner.averaged]


@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("treatment", ["kept", "restarted", "corrected"])
def test_bmuf_at_eta_0_is_its_kavg_arm_to_the_last_bit(treatment, nesterov):
    """η = 0, ζ = 1: BMUF is KAVG at the same K and learners' momentum, its weights and velocities
    equal to the last bit over 5 blocks of 3 steps (two learners, targets 1 and 3, SGD with
    momentum 0.9); KAVG at another treatment of the momentum is not."""
    trained = {}
    for name, momentum in [("bmuf", treatment), *(("kavg", t) for t in KAVG_ARMS)]:
        options = {"period": 3, "learner_momentum": momentum, "averages": "model"}
        if name == "bmuf":
            options |= {"block_momentum": 0.0, "block_lr": 1.0, "nesterov": nesterov}
        learners = [ScriptedLearner(1.0), ScriptedLearner(3.0)]
        blocks(name, options, learners, steps=15)
        trained[name, momentum] = held(learners)
    for other in KAVG_ARMS:
        same = all(
            torch.equal(a, b) for a, b in zip(trained["bmuf", treatment], trained["kavg", other])
        )
        assert same == (other == treatment), other


def test_a_block_of_bmuf_at_eta_0_moves_as_far_as_kavgs_with_its_momentum_corrected():
    """A steady gradient g, blocks of 4 steps at rate 0.05: KAVG with its momentum kept moves
    4·lr·g a block once its velocity has built; BMUF at η = 0 with its learners' momentum restarted
    and corrected moves as far from its first block; restarted alone, 0.9049·lr·g (CNTK's reset
    on a block of 4 steps)."""
    lr, g = 0.05, 1.0
    kept = [ScriptedLearner(gradient=g), ScriptedLearner(gradient=g)]
    kavg = blocks("kavg", {"period": 4, "learner_momentum": "kept"}, kept, 400, lr)
    moved = moved_in_a_block(kavg, kept, lr)
    assert moved == pytest.approx(4 * lr * g, rel=1e-12)
    eta_0 = {"period": 4, "block_momentum": 0.0}
    for treatment, expected in (("corrected", 4.0), ("restarted", 0.9049)):
        learners = [ScriptedLearner(gradient=g), ScriptedLearner(gradient=g)]
        bmuf = blocks("bmuf", eta_0 | {"learner_momentum": treatment}, learners, 0, lr)
        assert moved_in_a_block(bmuf, learners, lr) == pytest.approx(expected * lr * g, rel=1e-4)


def moved_in_a_block(algorithms: list, learners: list, lr: float) -> float:
    """How far one more block of `algorithms` moves the learners' (common) first weight."""
    before = learners[0].parameters[0][0].item()
    rate = lr * algorithms[0].rate_factor
    for _ in range(algorithms[0].period):
        in_lockstep([a.step(learner, None, rate) for a, learner in zip(algorithms, learners)])
    return before - learners[0].parameters[0][0].item()


@pytest.mark.parametrize("nesterov", [False, True])
def test_once_its_filter_has_built_a_block_of_bmuf_moves_as_far_as_kavgs(nesterov):
    """η = 15/16: the learners step at (1 − η)/ζ of KAVG's rate, and the filter's momentum, built
    over 1/(1 − η) = 16 blocks, makes up the rest: after 300 blocks of a steady gradient a block
    moves the model 4·lr·g, as KAVG's (with its momentum kept, as built); after 1 block, 1/16 of
    it."""
    lr, options = 0.05, {"period": 4, "block_momentum": 15 / 16, "nesterov": nesterov}
    learners = [ScriptedLearner(), ScriptedLearner()]
    bmuf = blocks("bmuf", options, learners, 0, lr)
    first = moved_in_a_block(bmuf, learners, lr)
    assert first == pytest.approx(4 * lr / 16 * (1 + (15 / 16 if nesterov else 0)), rel=1e-12)
    for _ in range(300):
        built = moved_in_a_block(bmuf, learners, lr)
    assert built == pytest.approx(4 * lr, rel=1e-6)


def test_bmufs_block_momentum_is_one_less_its_learners_share_unless_given():
    assert make_algorithm("bmuf", Layout(0, 16)).block_momentum == 1 - 1 / 16
    assert make_algorithm("bmuf", Layout(0, 16), {"block_momentum": 0.0}).block_momentum == 0.0
    with pytest.raises(ConfigError, match="algorithms.bmuf.block_momentum"):
        make_algorithm("bmuf", Layout(0, 16), {"block_momentum": 1.0})


def test_a_rejected_epoch_starts_bmufs_next_block_from_the_learners_average_without_momentum():
    learners = [QuadraticLearner(1.0), QuadraticLearner(3.0)]
    bmufs = [make_algorithm("bmuf", Layout(rank, 2), {"period": 2}) for rank in range(2)]
    in_lockstep([bmuf.start(learner) for bmuf, learner in zip(bmufs, learners)])
    for _ in range(3):  # a block and a half: momentum gathered, the models apart
        in_lockstep([bmuf.step(learner, None, 0.5) for bmuf, learner in zip(bmufs, learners)])
    assert (
        learners[0].state[0].item() != learners[1].state[0].item()
        and bmufs[0]._momentum[0].item() != 0
    )
    in_lockstep([bmuf.roll_back(learner) for bmuf, learner in zip(bmufs, learners)])
    for bmuf, learner in zip(bmufs, learners):
        assert learner.state[0].item() == bmuf._start[0].item() == learners[0].state[0].item()
        assert bmuf._momentum[0].item() == 0 and bmuf.local_steps == 0


@pytest.mark.parametrize("nesterov", [False, True])
def test_bmuf_is_slowmo_and_dilocos_outer_optimizer(
    nesterov,
):
    """The modern forms are BMUF's two settings: an outer SGD (torch's own, momentum 0.9, heavy-ball
    as SlowMo's or Nesterov as DiLoCo's) stepping the block's start by the outer gradient W_g − W̄
    at rate 0.7 gives the starts BMUF gives with ζ = 0.7, η = 0.9 (classical, or `nesterov`)."""
    targets, blocks = (1.0, 3.0), 4
    start = nn.Parameter(torch.zeros(1, dtype=torch.float64))
    outer = torch.optim.SGD([start], lr=0.7, momentum=0.9, nesterov=nesterov)
    expected = []
    for _ in range(blocks):
        locals_ = [start.detach().clone() for _ in targets]
        for weight, target in zip(locals_, targets):
            weight.add_(0.5 * (target - weight))
        start.grad = start.detach() - sum(locals_) / len(locals_)
        outer.step()
        expected.append(start.item())
    learners = [QuadraticLearner(target) for target in targets]
    options = {"period": 1, "block_momentum": 0.9, "block_lr": 0.7, "nesterov": nesterov}
    bmufs = [make_algorithm("bmuf", Layout(rank, 2), options) for rank in range(2)]
    in_lockstep([bmuf.start(learner) for bmuf, learner in zip(bmufs, learners)])
    found = []
    for _ in range(blocks):
        in_lockstep([bmuf.step(learner, None, 0.5) for bmuf, learner in zip(bmufs, learners)])
        found.append(learners[0].state[0].item())
    assert found == pytest.approx(expected, rel=1e-12)
