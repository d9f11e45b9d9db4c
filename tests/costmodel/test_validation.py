"""The cost model against the studies' published measurements: each figure's setup replayed, the
shared parameters fitted on the figures whose facts are complete, each figure predicted with its
system held out, and the band a modelled run carries."""

import dataclasses
import math
import re

import pandas as pd
import pytest
import yaml

from asrscale.analysis.claims import CLAIMS
from asrscale.costmodel import fit as fitting
from asrscale.costmodel.fitted import BOUNDS, Band, bound_by, digest, fitted_record
from asrscale.costmodel.validation import (
    Figure,
    _replayed,
    agreeing_value,
    baseline_s,
    load_figures,
    load_time_tables,
    modelled_rows,
    modelled_speedup,
    stock_kaldi_s,
)
from asrscale.errors import ConfigError
from asrscale.worlds.clock import Achieved

FAST = {"latency_us": 0.0, "bandwidth_gbps": 1e6}  # links that cost (almost) nothing
#: transports that achieve all of their links' nominal bandwidth
NOMINAL = Achieved(
    shares=dict.fromkeys(("tcp", "infiniband", "nvlink", "pcie", "host-copy", "mpi-host"), 1.0),
    serving=0.0,
    node_data_frames_per_s=1e12,
    forward_share=0.33,
)


def figure(**changes) -> Figure:
    """KAVG at 4 learners of a 1M-parameter model against SEQ, on links that cost nothing."""
    entry = {
        "study": "a study",
        "figure": "4× on 4",
        "system": "a cluster",
        "reading": "same-epochs",
        "history": ["2026-11-29: set"],
        "speedup": 4.0,
        "algorithm": "kavg",
        "learners": 4,
        "baseline": "seq",
        "workload": {"parameters": 1_000_000, "flops_per_frame": 2e6, "frames_per_step": 1000},
        "options": {"period": 4},
        "compute": {"backward_s_per_batch": 0.0, "backward_s_per_frame": 1e-5, "update_s": 0.001},
        "cluster": {"learners_per_node": 4, "node_link": FAST, "network_link": FAST, "jitter": 0.0},
        "assumptions": ["read: nothing"],
        "miss": "everything",
        "unknown": {
            "key": "cluster.network_link.bandwidth_gbps",
            "what": "the network",
            "range": [0.01, 1e6],
        },
    }
    return Figure.from_entry({**entry, **changes})


def test_every_published_figure_is_a_studys_with_its_assumptions_tagged_and_one_reading():
    figures = load_figures()
    # each study's, but chen16's: its "almost linear" is no figure to replay (its body could not be
    # read)
    assert {f.study for f in figures} == {
        claim.study for claim in CLAIMS if "," not in claim.study
    } - {"chen16"}
    assert len(figures) == 7 and all(f.speedup > 1 and f.miss for f in figures)
    for f in figures:
        assert all(re.match(r"(read|derived|assumed)\b", item) for item in f.assumptions), f
        assert f.history and all(re.match(r"2026-\d\d-\d\d\b", item) for item in f.history), (
            f
        )  # dated
        links = [f.hardware.node_link, f.hardware.network_link]
        assert all(link.transport != "measured" for link in links), (
            f
        )  # every published link by its transport
    in_fit = {f.name for f in figures if f.in_fit}
    assert in_fit == {
        "su15, 16",
        "su15, 32",
        "zhang19, 32",
        "zhang19b, 64",
    }  # complete, comparable facts
    by_name = {f.name: f for f in figures}
    assert not by_name["cong17, 20"].comparable and by_name["cong17, 20"].facts.startswith(
        "not comparable"
    )
    assert (
        by_name["zhang13, 4"].unstated and by_name["rosc17, 8"].unstated
    )  # they turn on values nothing states
    assert by_name["zhang19, 32"].system == by_name["zhang19b, 64"].system  # one cluster and model
    (table,) = load_time_tables()
    assert table.study == "su15" and table.published(32) == pytest.approx(
        (254.5 / 15.24, 2.31 / 15.24)
    )


def test_a_figure_has_one_reading():
    with pytest.raises(
        ConfigError, match="reading is one of .* epochs_ratio belongs to a to-accuracy one"
    ):
        figure(epochs_ratio=2.0)
    unstated = figure(reading="to-accuracy", epochs_ratio=None)
    assert not unstated.comparable and not unstated.in_fit
    assert fitting.published_data([unstated, figure(study="b")], []) == [
        fitting.Datum("b, 4: speedup", "a cluster", 4.0, "speedup")
    ]  # only what a replay can time is fitted


def test_mpi_through_host_memory_as_one_path_is_one_transport_of_its_own():
    """su15's MPI on host memory: in series, a copy each way over the GPU's link around a transfer
    at InfiniBand's share; as one path, the transfer alone at the share MPI through host memory
    achieves. With every share 1 and the copies free, the two give one time."""
    (su15,) = [f for f in load_figures() if f.name == "su15, 16"]
    (one_path,) = [f for f in load_figures(structure="one path") if f.name == "su15, 16"]
    assert su15.hardware.host_staging is not None and one_path.hardware.host_staging is None
    assert (
        one_path.hardware.network_link.transport == "mpi-host" and one_path.structure == "one path"
    )
    free = Achieved(**{**NOMINAL.__dict__, "shares": {**NOMINAL.shares, "host-copy": 1e9}})
    sums = dataclasses.replace(su15.hardware.host_staging, memory_gbps=1e12)
    series = dataclasses.replace(
        su15, hardware=dataclasses.replace(su15.hardware, host_staging=sums)
    )
    assert modelled_speedup(series, free) == pytest.approx(
        modelled_speedup(one_path, free), rel=1e-3
    )


def test_a_replayed_speedup_is_the_baseline_over_the_same_frames():
    """Links that cost nothing and no jitter: 4 learners take a quarter of SEQ's time; slower
    links take their share; a speedup to an accuracy that needed twice the epochs halves it."""
    assert modelled_speedup(figure(), NOMINAL) == pytest.approx(4.0, rel=1e-3)
    slow = {"latency_us": 0.0, "bandwidth_gbps": 1.0}
    assert (
        modelled_speedup(
            figure(cluster={"learners_per_node": 4, "node_link": slow, "network_link": slow}),
            NOMINAL,
        )
        < 3.5
    )
    assert modelled_speedup(
        figure(reading="to-accuracy", epochs_ratio=2.0), NOMINAL
    ) == pytest.approx(2.0, rel=1e-3)


def test_a_links_transport_achieves_its_fitted_share_of_the_nominal_bandwidth():
    """The same 10 Gb/s card as TCP at a share of 0.1 costs what a 1 Gb/s card measured costs."""
    tcp = {"latency_us": 0.0, "bandwidth_gbps": 10.0, "transport": "tcp"}
    measured = {"latency_us": 0.0, "bandwidth_gbps": 1.0}
    two_nodes = {"learners_per_node": 2, "node_link": FAST, "jitter": 0.0}
    share = Achieved(**{**NOMINAL.__dict__, "shares": {**NOMINAL.shares, "tcp": 0.1}})
    every_step = {"period": 1}
    by_tcp = modelled_speedup(
        figure(cluster={**two_nodes, "network_link": tcp}, options=every_step), share
    )
    as_measured = modelled_speedup(
        figure(cluster={**two_nodes, "network_link": measured}, options=every_step), share
    )
    assert by_tcp == pytest.approx(as_measured, rel=1e-9) and by_tcp < 3.0


def test_a_held_out_set_evaluated_by_every_learner_is_not_divided_among_them():
    """su15's cross-validation: each learner evaluates the held-out set at every epoch's end, at a
    forward pass's share of a forward-backward; 4 learners pay it as one does."""
    held = figure(held_out=0.5)
    alone, together = baseline_s(held, NOMINAL), _replayed(held, "kavg", 4, 40, NOMINAL).seconds
    plain_alone = baseline_s(figure(), NOMINAL)
    evaluation = 0.5 * 4 * 40 * 1000 * 1e-5 * NOMINAL.forward_share
    assert alone == pytest.approx(plain_alone + evaluation, rel=1e-6)
    assert together == pytest.approx(plain_alone / 4 + evaluation, rel=1e-3)


def test_against_the_algorithm_at_one_learner_and_against_kaldis_scripts():
    ma = {
        "algorithm": "ma",
        "options": {"frames_per_job": 10_000, "natural_gradient": False, "max_param_change": 0},
    }
    assert modelled_speedup(figure(**ma, baseline="same"), NOMINAL) == pytest.approx(4.0, rel=1e-3)
    # Kaldi's scripts: the training without prefetch, and a launch and the models' round trip a
    # period
    stock = figure(
        **ma, baseline="stock_kaldi", stock_kaldi={"launch_s": 2.0, "filesystem_gbps": 1.0}
    )
    periods = 40 * 1000 / 10_000
    round_trip_s = (3 * 4 + 1) * 32e6 / 1e9
    trained = _replayed(stock, "ma", 4, 40, NOMINAL, prefetch=0).seconds
    assert stock_kaldi_s(stock, NOMINAL) == pytest.approx(
        trained + periods * (2.0 + round_trip_s), rel=1e-9
    )
    assert modelled_speedup(stock, NOMINAL) == pytest.approx(
        stock_kaldi_s(stock, NOMINAL) / _replayed(stock, "ma", 4, 40, NOMINAL).seconds, rel=1e-9
    )


def test_averaging_through_a_master_queues_every_model_on_its_link():
    """rosc17's trainer: learner 0 receives the 3 others' models and sends the average back to each
    through its one port, where one allreduce crosses each port twice over 3/4 of the model."""
    slow = {"latency_us": 0.0, "bandwidth_gbps": 1.0}
    cluster = {"learners_per_node": 4, "node_link": slow, "network_link": slow, "jitter": 0.0}
    ma = {"algorithm": "ma", "cluster": cluster}
    options = {
        "frames_per_job": 40_000,
        "natural_gradient": False,
        "max_param_change": 0,
        "averages": "model",
    }
    ring = _replayed(figure(**ma, options=options), "ma", 4, 40, NOMINAL).seconds
    star = _replayed(
        figure(**ma, options={**options, "reduce": "master"}), "ma", 4, 40, NOMINAL
    ).seconds
    model_s = 4e6 * 8 / 1e9
    assert star - ring == pytest.approx(6 * model_s - 2 * 3 / 4 * model_s, rel=1e-3)


def test_a_figure_without_a_known_baseline_is_named():
    with pytest.raises(ConfigError, match="a study, 4× on 4: baseline is one of"):
        figure(baseline="kaldi")
    with pytest.raises(ConfigError, match="stock_kaldi states its costs"):
        figure(baseline="stock_kaldi")
    with pytest.raises(ConfigError, match="Kaldi's scripts average models: the algorithm is ma"):
        figure(baseline="stock_kaldi", stock_kaldi={"launch_s": 1.0, "filesystem_gbps": 1.0})
    with pytest.raises(
        ConfigError, match="a study, 4× on 4: cluster: a link's transport is one of"
    ):
        figure(cluster={"node_link": {**FAST, "transport": "pigeon"}})


def test_the_value_of_a_figures_unknown_that_agrees_with_it_is_found_or_said_not_to_be():
    """Two nodes of two learners: the slower the network, the lower the speedup; the value found
    gives the published speedup (to 1%), and a range that cannot give it gives none."""
    slow = {"latency_us": 0.0, "bandwidth_gbps": 10.0}
    two_nodes = {"learners_per_node": 2, "node_link": FAST, "network_link": slow, "jitter": 0.0}
    stated = figure(cluster=two_nodes, options={"period": 1}, speedup=2.5)
    found = agreeing_value(stated, NOMINAL)
    assert stated.assumed() == 10.0 and modelled_speedup(stated, NOMINAL) < 2.5 and found > 10.0
    assert modelled_speedup(stated.with_unknown(found), NOMINAL) == pytest.approx(2.5, rel=0.01)
    assert (
        agreeing_value(figure(cluster=two_nodes, speedup=5.0), NOMINAL) is None
    )  # above 4 learners' 4×
    with pytest.raises(
        ConfigError, match="a study, 4× on 4: unknown.key 'cluster.wires' is not a key of its setup"
    ):
        figure(unknown={"key": "cluster.wires", "what": "wires", "range": [1, 2]})
    with pytest.raises(
        ConfigError, match="a study, 4× on 4: unknown.range is .low, high. with 0 < low < high"
    ):
        figure(unknown={"key": "workload.parameters", "what": "size", "range": [2, 1]})
    with pytest.raises(ConfigError, match="a study, 4× on 4: unknown states key, what and range"):
        figure(unknown={"key": "workload.parameters"})


@pytest.mark.slow
def test_the_fit_recovers_the_share_and_leaves_the_unconstrained_at_their_priors():
    """Figures made by a TCP share of 0.3 (two nodes of two, averaging every step): the fit finds
    0.3 again; no figure here has InfiniBand, so its share stays at its prior."""
    truth = Achieved(**{**NOMINAL.__dict__, "shares": {**NOMINAL.shares, "tcp": 0.3}})
    tcp = {"latency_us": 0.0, "bandwidth_gbps": 10.0, "transport": "tcp"}
    made = []
    for learners, period in ((4, 1), (4, 2), (8, 1)):
        stated = figure(
            learners=learners,
            options={"period": period},
            study=f"K={period}",
            cluster={"learners_per_node": 2, "node_link": FAST, "network_link": tcp, "jitter": 0.0},
        )
        made.append(figure(**{**stated.entry, "speedup": modelled_speedup(stated, truth)}))
    found = fitting.fit(fitting.Problem(made, [], fitting.published_data(made, [])))
    assert found["shares.tcp"] == pytest.approx(0.3, rel=0.05)
    assert found["shares.infiniband"] == pytest.approx(0.85, rel=0.01)


def test_a_system_is_held_out_whole_its_figures_and_its_time_table_together():
    data = fitting.published_data(load_figures(), load_time_tables())
    su15 = {d.what for d in data if d.system.startswith("su15")}
    assert {
        "su15, 16: speedup",
        "su15, 32: speedup",
        "su15 table, 16: MPI share",
        "su15 table, 4: speedup",
    } <= su15
    held_out = fitting.problem(
        "series", without=next(d.system for d in data if d.what == "su15, 16: speedup")
    )
    assert not {d.what for d in held_out.data} & su15 and {d.what for d in held_out.data} == {
        "zhang19, 32: speedup",
        "zhang19b, 64: speedup",
    }


@pytest.mark.slow
def test_a_fit_from_another_start_lands_on_the_same_parameters():
    """Figures made by TCP and NVLink shares of 0.3 and 0.5 (nodes of two learners, averaging
    every step): the fit from the priors and from 3 times every prior find the same values."""
    truth = Achieved(
        **{**NOMINAL.__dict__, "shares": {**NOMINAL.shares, "tcp": 0.3, "nvlink": 0.5}}
    )
    tcp = {"latency_us": 0.0, "bandwidth_gbps": 10.0, "transport": "tcp"}
    nvlink = {"latency_us": 0.0, "bandwidth_gbps": 20.0, "transport": "nvlink"}
    made = []
    for learners, period in ((4, 1), (4, 2), (8, 1), (2, 1)):
        cluster = {"learners_per_node": 2, "node_link": nvlink, "network_link": tcp, "jitter": 0.0}
        stated = figure(
            learners=learners, options={"period": period}, study=f"K={period}", cluster=cluster
        )
        made.append(figure(**{**stated.entry, "speedup": modelled_speedup(stated, truth)}))
    problem = fitting.Problem(made, [], fitting.published_data(made, []))
    found = [
        fitting.fit(problem, {p.name: p.prior * start for p in fitting.PARAMETERS})
        for start in (1.0, 3.0)
    ]
    assert all(
        found[0][name] == pytest.approx(found[1][name], rel=fitting.STARTS_AGREE)
        for name in found[0]
    )
    assert found[0]["shares.tcp"] == pytest.approx(0.3, rel=0.05) and found[0][
        "shares.nvlink"
    ] == pytest.approx(0.5, rel=0.05)


def test_a_runs_band_is_the_wider_of_its_parameters_spread_and_the_models_misses():
    """The held-out figures bound by arithmetic missed by ×0.9-1.1, those bound by links between
    nodes by ×0.5-2; no figure is bound by links inside a node. A run almost all arithmetic takes
    its kind's misses, never a band of no width (3.92 (3.92-3.92) was one); one that spent 70% of
    its time between nodes over TCP takes the wider of the TCP share's spread (0.3 to 2 times the
    fitted) and its kind's misses at each edge; a kind with no figure takes every figure's."""
    band = Band(
        {"arithmetic": (0.9, 1.1), "links between nodes": (0.5, 2.0)},
        {"arithmetic": ["a, 4"], "links between nodes": ["b, 32", "c, 64"]},
        {"shares.tcp": (0.3, 2.0), "shares.nvlink": (0.9, 1.1), "serving": (0.5, 1.5)},
    )
    assert band.of(3.9, 0.02, {"nvlink"}, False, "arithmetic") == pytest.approx(
        (3.9 / 1.1, 3.9 / 0.9)
    )
    assert band.of(1.0, 0.0, {"tcp"}, True, "arithmetic") == pytest.approx((1 / 1.1, 1 / 0.9))
    by_parameters = (20 / (0.3 + 0.7 / 0.3), 20 / (0.3 + 0.7 / 2.0))  # 7.6 and 30.8
    assert band.of(20.0, 0.7, {"nvlink", "tcp"}, False, "links between nodes") == pytest.approx(
        (by_parameters[0], 20 / 0.5)
    )
    assert band.of(20.0, 0.7, {"nvlink"}, False, "links inside a node") == pytest.approx(
        (20 / 2.0, 20 / 0.5)
    )
    assert band.factors({"tcp"}, gossip=False) == pytest.approx((1 / 2.0, 1 / 0.3))
    assert band.factors(set(), gossip=True) == pytest.approx((0.5, 1.5))  # serving grows the time
    assert band.rests_on("links between nodes") == (
        "bound by links between nodes: the model's misses of held-out figures also bound by links "
        "between nodes (b, 32; c, 64), 0.50-2.00×"
    )
    assert (
        "every held-out figure (none is bound by links inside a node), 0.50-2.00×"
        in band.rests_on("links inside a node")
    )
    assert (
        bound_by(0.9, True, 1),
        bound_by(0.49, True, 2),
        bound_by(0.5, False, 2),
        bound_by(0.5, True, 2),
    ) == BOUNDS
    # one learner's speedup over SEQ is of two measured arithmetics: no figure's miss applies
    assert band.of(1.0, 0.2, {"tcp"}, False, "one learner") == pytest.approx(
        (1 / (0.8 + 0.2 / 0.3), 1 / 0.9)
    )
    assert band.of(1.0, 0.0, set(), False, "one learner") == (
        1.0,
        1.0,
    ) and "measured" in band.rests_on("one learner")


def test_the_fitted_file_is_the_fit_of_published_yaml_as_it_is():
    """fitted.yaml records the fit of this published.yaml (a changed file needs `asrscale
    fit-cost-model`): its in-sample predictions are what its parameters give, every figure has a
    prediction out of sample, both structures were validated and the better kept, another start
    found the same parameters, and the band is the held-out fits' spread and structural error."""
    record = fitted_record()
    assert record["published_digest"] == digest()
    figures = {(f.study, f.learners): f for f in load_figures(structure=record["structure"])}
    for row in record["figures"]:
        assert modelled_speedup(figures[row["study"], row["learners"]]) == pytest.approx(
            row["fitted"], rel=1e-2
        )
        assert row["ratio"] == pytest.approx(row["held_out"] / row["published"], rel=1e-2)
    structures = record["structures"]
    assert set(structures) == {"series", "one path"} and structures[record["structure"]][
        "rms_log_miss"
    ] == min(s["rms_log_miss"] for s in structures.values())
    assert max(record["starts"]["largest_log_difference"].values()) <= math.log1p(
        fitting.STARTS_AGREE
    )
    kinds = {}
    for row in record["figures"]:
        learners_per_node = figures[row["study"], row["learners"]].hardware.learners_per_node
        assert row["bound_by"] == bound_by(
            row["outside_share"], row["learners"] > learners_per_node, row["learners"]
        )
        if row["comparable"]:
            kinds.setdefault(row["bound_by"], []).append(row)
    assert {f"{r['study']}, {r['learners']}" for r in record["figures"] if not r["comparable"]} == {
        "cong17, 20"
    }
    assert record["band"]["structural"] == {
        bound: {
            "misses": pytest.approx(
                [
                    min(r["ratio"] for r in rows + [{"ratio": 1.0}]),
                    max(r["ratio"] for r in rows + [{"ratio": 1.0}]),
                ],
                abs=1e-3,
            ),
            "figures": [f"{r['study']}, {r['learners']}" for r in rows],
        }
        for bound, rows in kinds.items()
    }
    for parameter in record["parameters"]:
        low, high = record["band"]["parameters"][parameter["name"]]
        assert low <= 1.0 <= high and len(parameter["held_out"]) == 2  # su15's system, IBM's
    rows = modelled_rows(load_time_tables(structure=record["structure"])[0])
    assert list(rows.learners) == [2, 4, 8, 16, 32] and rows.modelled_mpi_share.between(0, 1).all()


def test_your_own_setup_replays_from_a_file_in_published_yamls_form(tmp_path):
    from asrscale.cli import main

    own = figure(speedup=2.5).entry
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"figures": [own]}))
    main(
        [
            "replay-published",
            "--figures",
            str(tmp_path / "mine.yaml"),
            "--out",
            str(tmp_path / "mine.tsv"),
        ]
    )
    (row,) = pd.read_csv(tmp_path / "mine.tsv", sep="\t").itertuples()
    assert (row.study, row.published, row.fitted) == ("a study", 2.5, pytest.approx(4.0, rel=1e-2))
    assert row.held_out == pytest.approx(
        row.fitted, abs=0.01
    )  # not in the fit: its prediction is out of sample
    del own["unknown"]
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"figures": [own]}))
    with pytest.raises(
        SystemExit, match=r"mine.yaml: a study, 4× on 4: unknown missing \(a figure states study"
    ):
        main(
            [
                "replay-published",
                "--figures",
                str(tmp_path / "mine.yaml"),
                "--out",
                str(tmp_path / "mine.tsv"),
            ]
        )


def test_the_fits_digest_changes_with_a_figure_and_not_with_a_comment(tmp_path):
    from asrscale.costmodel.fitted import PUBLISHED

    text = PUBLISHED.read_text()
    commented, changed = tmp_path / "commented.yaml", tmp_path / "changed.yaml"
    commented.write_text("# a comment of one's own\n" + text)
    figures = yaml.safe_load(text)
    figures["figures"][0]["speedup"] = figures["figures"][0]["speedup"] * 1.01
    changed.write_text(yaml.safe_dump(figures))
    assert digest(commented) == digest(PUBLISHED) != digest(changed)
