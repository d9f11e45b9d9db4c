"""The cost model against the studies' published speedups: each figure's setup replayed."""

import re

import pandas as pd
import pytest
import yaml

from asrscale.analysis.claims import CLAIMS
from asrscale.analysis.validation import (
    Figure,
    _seconds,
    agreeing_value,
    load_figures,
    modelled_speedup,
    stock_kaldi_s,
    validate,
)
from asrscale.errors import ConfigError

FAST = {"latency_us": 0.0, "bandwidth_gbps": 1e6}  # links that cost (almost) nothing


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


def test_a_replayed_speedup_is_the_baseline_over_the_same_frames():
    """Links that cost nothing and no jitter: 4 learners take a quarter of SEQ's time, as the
    table says; slower links take their share."""
    assert modelled_speedup(figure()) == pytest.approx(4.0, rel=1e-3)
    table = validate([figure(), figure(speedup=2.0)])
    assert list(table.ratio) == pytest.approx([1.0, 2.0], rel=1e-3) and list(table.agrees) == [True, False]
    slow = {"latency_us": 0.0, "bandwidth_gbps": 1.0}
    assert modelled_speedup(figure(cluster={"learners_per_node": 4, "node_link": slow, "network_link": slow})) < 3.5
    assert modelled_speedup(figure(epochs_ratio=2.0)) == pytest.approx(2.0, rel=1e-3)  # twice the epochs to an accuracy


def test_against_the_algorithm_at_one_learner_and_against_kaldis_scripts():
    ma = {"algorithm": "ma", "options": {"frames_per_job": 10_000, "natural_gradient": False, "max_param_change": 0}}
    assert modelled_speedup(figure(**ma, baseline="same")) == pytest.approx(4.0, rel=1e-3)
    # Kaldi's scripts: the training without prefetch, and a launch and the models' round trip a period
    stock = figure(**ma, baseline="stock_kaldi", stock_kaldi={"launch_s": 2.0, "filesystem_gbps": 1.0})
    periods = 40 * 1000 / 10_000
    round_trip_s = (3 * 4 + 1) * 32e6 / 1e9
    trained = _seconds(stock, "ma", 4, 40, prefetch=0)
    assert stock_kaldi_s(stock) == pytest.approx(trained + periods * (2.0 + round_trip_s), rel=1e-9)
    assert modelled_speedup(stock) == pytest.approx(stock_kaldi_s(stock) / _seconds(stock, "ma", 4, 40), rel=1e-9)


def test_a_figure_without_a_known_baseline_is_named():
    with pytest.raises(ConfigError, match="a study, 4× on 4: baseline is one of"):
        figure(baseline="kaldi")
    with pytest.raises(ConfigError, match="stock_kaldi states its costs"):
        figure(baseline="stock_kaldi")
    with pytest.raises(ConfigError, match="Kaldi's scripts average models: the algorithm is ma"):
        figure(baseline="stock_kaldi", stock_kaldi={"launch_s": 1.0, "filesystem_gbps": 1.0})


def test_the_value_of_a_figures_unknown_that_agrees_with_it_is_found_or_said_not_to_be():
    """Two nodes of two learners: the slower the network, the lower the speedup; the value found
    gives the published speedup (to 1%), and a range that cannot give it gives none."""
    slow = {"latency_us": 0.0, "bandwidth_gbps": 10.0}
    two_nodes = {"learners_per_node": 2, "node_link": FAST, "network_link": slow, "jitter": 0.0}
    stated = figure(cluster=two_nodes, options={"period": 1}, speedup=2.5)
    found = agreeing_value(stated)
    assert stated.assumed() == 10.0 and modelled_speedup(stated) < 2.5 and found > 10.0
    assert modelled_speedup(stated.with_unknown(found)) == pytest.approx(2.5, rel=0.01)
    assert agreeing_value(figure(cluster=two_nodes, speedup=5.0)) is None  # above 4 learners' 4×
    row = validate([stated]).iloc[0]
    assert (row.unknown, row.assumed, row.agrees_at) == ("the network", 10.0, pytest.approx(found, rel=1e-2))
    with pytest.raises(ConfigError, match="a study, 4× on 4: unknown.key 'cluster.wires' is not a key of its setup"):
        figure(unknown={"key": "cluster.wires", "what": "wires", "range": [1, 2]})
    with pytest.raises(ConfigError, match="a study, 4× on 4: unknown.range is .low, high. with 0 < low < high"):
        figure(unknown={"key": "workload.parameters", "what": "size", "range": [2, 1]})
    with pytest.raises(ConfigError, match="a study, 4× on 4: unknown states key, what and range"):
        figure(unknown={"key": "workload.parameters"})


def test_your_own_setup_replays_from_a_file_in_published_yamls_form(tmp_path):
    from asrscale.cli import main

    own = figure(speedup=2.5).entry
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"figures": [own]}))
    main(["replay-published", "--figures", str(tmp_path / "mine.yaml"), "--out", str(tmp_path / "mine.tsv")])
    (row,) = pd.read_csv(tmp_path / "mine.tsv", sep="\t").itertuples()
    assert (row.study, row.published, row.modelled) == ("a study", 2.5, pytest.approx(4.0, rel=1e-2))
    del own["unknown"]
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"figures": [own]}))
    with pytest.raises(SystemExit, match=r"mine.yaml: a study, 4× on 4: unknown missing \(a figure states study"):
        main(["replay-published", "--figures", str(tmp_path / "mine.yaml"), "--out", str(tmp_path / "mine.tsv")])
