"""The cost model against the studies' published measurements: each figure's setup replayed, the
shared parameters fitted once over all of them, each figure predicted out of sample."""

import math
import re

import pandas as pd
import pytest
import yaml

from asrscale.analysis import fit as fitting
from asrscale.analysis.claims import CLAIMS
from asrscale.analysis.validation import (
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
from asrscale.worlds.costmodel import Achieved

FAST = {"latency_us": 0.0, "bandwidth_gbps": 1e6}  # links that cost (almost) nothing
#: transports that achieve all of their links' nominal bandwidth
NOMINAL = Achieved(shares=dict.fromkeys(("tcp", "infiniband", "nvlink", "pcie", "host-copy"), 1.0), serving=0.0,
                   node_data_frames_per_s=1e12, forward_share=0.33)  # fmt: skip


def figure(**changes) -> Figure:
    """KAVG at 4 learners of a 1M-parameter model against SEQ, on links that cost nothing."""
    entry = {"study": "a study", "figure": "4× on 4", "speedup": 4.0, "algorithm": "kavg", "learners": 4,
             "baseline": "seq", "workload": {"parameters": 1_000_000, "flops_per_frame": 2e6, "frames_per_step": 1000},
             "options": {"period": 4}, "compute": {"backward_s_per_batch": 0.0, "backward_s_per_frame": 1e-5,
                                                   "update_s": 0.001},
             "cluster": {"learners_per_node": 4, "node_link": FAST, "network_link": FAST, "jitter": 0.0},
             "assumptions": ["read: nothing"], "miss": "everything",
             "unknown": {"key": "cluster.network_link.bandwidth_gbps", "what": "the network",
                         "range": [0.01, 1e6]}}  # fmt: skip
    return Figure.from_entry({**entry, **changes})


def test_every_published_figure_is_a_studys_with_its_assumptions_tagged():
    figures = load_figures()
    assert {f.study for f in figures} == {claim.study for claim in CLAIMS if "," not in claim.study}  # each study
    assert len(figures) == 7 and all(f.speedup > 1 and f.miss for f in figures)
    for f in figures:
        assert all(re.match(r"(read|derived|assumed)\b", item) for item in f.assumptions), f
        links = [f.hardware.node_link, f.hardware.network_link]
        assert all(link.transport != "measured" for link in links), f  # every published link by its transport
    (table,) = load_time_tables()
    assert table.study == "su15" and table.published(32) == pytest.approx((254.5 / 15.24, 2.31 / 15.24))


def test_a_replayed_speedup_is_the_baseline_over_the_same_frames():
    """Links that cost nothing and no jitter: 4 learners take a quarter of SEQ's time; slower
    links take their share; a speedup to an accuracy that needed twice the epochs halves it."""
    assert modelled_speedup(figure(), NOMINAL) == pytest.approx(4.0, rel=1e-3)
    slow = {"latency_us": 0.0, "bandwidth_gbps": 1.0}
    assert modelled_speedup(figure(cluster={"learners_per_node": 4, "node_link": slow, "network_link": slow}),
                            NOMINAL) < 3.5  # fmt: skip
    assert modelled_speedup(figure(epochs_ratio=2.0), NOMINAL) == pytest.approx(2.0, rel=1e-3)


def test_a_links_transport_achieves_its_fitted_share_of_the_nominal_bandwidth():
    """The same 10 Gb/s card as TCP at a share of 0.1 costs what a 1 Gb/s card measured costs."""
    tcp = {"latency_us": 0.0, "bandwidth_gbps": 10.0, "transport": "tcp"}
    measured = {"latency_us": 0.0, "bandwidth_gbps": 1.0}
    two_nodes = {"learners_per_node": 2, "node_link": FAST, "jitter": 0.0}
    share = Achieved(**{**NOMINAL.__dict__, "shares": {**NOMINAL.shares, "tcp": 0.1}})
    every_step = {"period": 1}
    by_tcp = modelled_speedup(figure(cluster={**two_nodes, "network_link": tcp}, options=every_step), share)
    as_measured = modelled_speedup(figure(cluster={**two_nodes, "network_link": measured}, options=every_step), share)
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
    ma = {"algorithm": "ma", "options": {"frames_per_job": 10_000, "natural_gradient": False, "max_param_change": 0}}
    assert modelled_speedup(figure(**ma, baseline="same"), NOMINAL) == pytest.approx(4.0, rel=1e-3)
    # Kaldi's scripts: the training without prefetch, and a launch and the models' round trip a period
    stock = figure(**ma, baseline="stock_kaldi", stock_kaldi={"launch_s": 2.0, "filesystem_gbps": 1.0})
    periods = 40 * 1000 / 10_000
    round_trip_s = (3 * 4 + 1) * 32e6 / 1e9
    trained = _replayed(stock, "ma", 4, 40, NOMINAL, prefetch=0).seconds
    assert stock_kaldi_s(stock, NOMINAL) == pytest.approx(trained + periods * (2.0 + round_trip_s), rel=1e-9)
    assert modelled_speedup(stock, NOMINAL) == pytest.approx(
        stock_kaldi_s(stock, NOMINAL) / _replayed(stock, "ma", 4, 40, NOMINAL).seconds, rel=1e-9)  # fmt: skip


def test_averaging_through_a_master_queues_every_model_on_its_link():
    """rosc17's trainer: learner 0 receives the 3 others' models and sends the average back to each
    through its one port, where one allreduce crosses each port twice over 3/4 of the model."""
    slow = {"latency_us": 0.0, "bandwidth_gbps": 1.0}
    cluster = {"learners_per_node": 4, "node_link": slow, "network_link": slow, "jitter": 0.0}
    ma = {"algorithm": "ma", "cluster": cluster}
    options = {"frames_per_job": 40_000, "natural_gradient": False, "max_param_change": 0, "averages": "model"}
    ring = _replayed(figure(**ma, options=options), "ma", 4, 40, NOMINAL).seconds
    star = _replayed(figure(**ma, options={**options, "reduce": "master"}), "ma", 4, 40, NOMINAL).seconds
    model_s = 4e6 * 8 / 1e9
    assert star - ring == pytest.approx(6 * model_s - 2 * 3 / 4 * model_s, rel=1e-3)


def test_a_figure_without_a_known_baseline_is_named():
    with pytest.raises(ConfigError, match="a study, 4× on 4: baseline is one of"):
        figure(baseline="kaldi")
    with pytest.raises(ConfigError, match="stock_kaldi states its costs"):
        figure(baseline="stock_kaldi")
    with pytest.raises(ConfigError, match="Kaldi's scripts average models: the algorithm is ma"):
        figure(baseline="stock_kaldi", stock_kaldi={"launch_s": 1.0, "filesystem_gbps": 1.0})
    with pytest.raises(ConfigError, match="a study, 4× on 4: cluster: a link's transport is one of"):
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
    assert agreeing_value(figure(cluster=two_nodes, speedup=5.0), NOMINAL) is None  # above 4 learners' 4×
    with pytest.raises(ConfigError, match="a study, 4× on 4: unknown.key 'cluster.wires' is not a key of its setup"):
        figure(unknown={"key": "cluster.wires", "what": "wires", "range": [1, 2]})
    with pytest.raises(ConfigError, match="a study, 4× on 4: unknown.range is .low, high. with 0 < low < high"):
        figure(unknown={"key": "workload.parameters", "what": "size", "range": [2, 1]})
    with pytest.raises(ConfigError, match="a study, 4× on 4: unknown states key, what and range"):
        figure(unknown={"key": "workload.parameters"})


def test_the_fit_recovers_the_share_that_made_the_figures_and_leaves_the_unconstrained_at_their_priors():
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


def test_leaving_a_figure_out_leaves_its_time_table_row_out_with_it():
    data = fitting.published_data(load_figures(), load_time_tables())
    with_su15_at_16 = [d.what for d in data if d.figure == "su15, 16"]
    assert with_su15_at_16 == ["su15, 16: speedup", "su15 table, 16: MPI share"]
    assert {d.what for d in data if d.figure == "su15 table, 4"} == {"su15 table, 4: speedup",
                                                                    "su15 table, 4: MPI share"}  # fmt: skip


def test_the_fitted_file_is_the_fit_of_published_yaml_as_it_is():
    """fitted.yaml records the fit of this published.yaml (a changed file needs `asrscale
    fit-cost-model`), its in-sample predictions are what its parameters give, and its band is the
    range of the published speedups over the leave-one-out predictions."""
    record = fitting.fitted_record()
    assert record["published_digest"] == fitting.digest()
    figures = {(f.study, f.learners): f for f in load_figures()}
    for row in record["figures"]:
        assert modelled_speedup(figures[row["study"], row["learners"]]) == pytest.approx(row["fitted"], rel=1e-2)
    ratios = [row["published"] / row["left_out"] for row in record["figures"]]
    assert (record["band"]["low"], record["band"]["high"]) == pytest.approx((min(ratios), max(ratios)), abs=1e-3)
    within = sum(abs(math.log(row["ratio"])) <= math.log(1.25) for row in record["figures"])
    assert record["within_tolerance"] == within
    rows = modelled_rows(load_time_tables()[0])
    assert list(rows.learners) == [2, 4, 8, 16, 32] and rows.modelled_mpi_share.between(0, 1).all()


def test_your_own_setup_replays_from_a_file_in_published_yamls_form(tmp_path):
    from asrscale.cli import main

    own = figure(speedup=2.5).entry
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"figures": [own]}))
    main(["replay-published", "--figures", str(tmp_path / "mine.yaml"), "--out", str(tmp_path / "mine.tsv")])
    (row,) = pd.read_csv(tmp_path / "mine.tsv", sep="\t").itertuples()
    assert (row.study, row.published, row.fitted) == ("a study", 2.5, pytest.approx(4.0, rel=1e-2))
    assert row.left_out != row.left_out  # not in the fit: no leave-one-out prediction
    del own["unknown"]
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"figures": [own]}))
    with pytest.raises(SystemExit, match=r"mine.yaml: a study, 4× on 4: unknown missing \(a figure states study"):
        main(["replay-published", "--figures", str(tmp_path / "mine.yaml"), "--out", str(tmp_path / "mine.tsv")])
