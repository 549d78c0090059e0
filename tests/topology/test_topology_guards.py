"""Refusal before allocation on clusters (issue 31, sections 3 and 7): estimates from the shape alone, sparse
routing on clusters with many links, non-finite clusters, options that do not apply, and quick defaults."""

from __future__ import annotations

import json
import math
import tracemalloc

import numpy as np
import pytest

from ringlab.cli import main as cli_main
from ringlab.collectives import ALGORITHMS, get_schedule
from ringlab.sim.on_cluster import verify_on_cluster
from ringlab.sim.memory import cluster_verify_bytes
from ringlab.topology import CLUSTER_ALGORITHMS, build_on_cluster, custom_cluster, get_cluster, link_loads
from ringlab.topology import algorithms as algos
from ringlab.topology.algorithms import MAX_ROWS, transfers_estimate


def expanded(schedule) -> int:
    return sum(len(step.expanded()) for step in schedule.steps)


@pytest.mark.parametrize("key", sorted(ALGORITHMS))
def test_flat_estimate_bounds_every_schedule(key):
    collective, algorithm = key
    for n in [*range(1, 70), 100, 127, 128, 129, 255, 256, 257, 600]:
        cluster = custom_cluster(1, n, 1e9)
        est = transfers_estimate(collective, algorithm, cluster)
        actual = expanded(get_schedule(collective, algorithm, n))
        assert actual <= est, (key, n, actual, est)
        slack = 4 * max(1, n.bit_length())  # trees: N x steps counts log N steps of partial rows
        assert est <= slack * actual + 8 * n, (key, n, actual, est)  # a bound, not a wild overestimate


@pytest.mark.parametrize("key", sorted(CLUSTER_ALGORITHMS))
def test_cluster_estimate_is_exact(key):
    collective, algorithm = key
    tried = 0
    for k in (1, 2, 3, 5, 8):
        for g in (1, 2, 3, 4, 8):
            for ch in (1, 2, 3, 8):
                cluster = custom_cluster(k, g, 1e9, nics_per_node=g if k > 1 else 0, nic_gbps=100, nvls=True,
                                         sharp=True)
                try:
                    sched = build_on_cluster(collective, algorithm, cluster, ch)
                except ValueError:
                    continue
                tried += 1
                assert transfers_estimate(collective, algorithm, cluster, ch) == expanded(sched), (k, g, ch)
    assert tried >= 10


def test_nothing_is_built_over_the_limit(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("a schedule was built before the size check")

    monkeypatch.setattr(algos, "get_schedule", forbidden)
    big = get_cluster("gb200-nvl72", 500)
    for name in ("direct", "ring", "rabenseifner"):
        with pytest.raises(ValueError, match=r"would route about [\d,]+ transfers, over the limit of"):
            build_on_cluster("all_reduce", name, big)
    n = big.world_size
    assert transfers_estimate("all_reduce", "direct", big) == max(n, 2 * n * (n - 1)) > MAX_ROWS


def test_cost_on_500_gb200_nodes_refuses_what_does_not_fit(capsys):
    """Rings and the hierarchy run from ring rules at 36,000 ranks; what has none and does not fit is refused."""
    assert cli_main(["cost", "--topology", "gb200-nvl72", "--nodes", "500", "--size", "1GiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ran = {r["algorithm"] for r in data["algorithms"]}
    skipped = {s["algorithm"]: s["why"] for s in data["skipped"]}
    assert {"ring", "ring_channels", "hierarchical"} <= ran and "direct" in skipped
    assert "36,000 ranks" in skipped["direct"] and "transfers" in skipped["direct"]
    assert ran.isdisjoint(skipped)


def test_cost_refuses_at_once_when_nothing_fits(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["cost", "--topology", "gb200-nvl72", "--nodes", "100000"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.strip().splitlines()) == 1
    assert "--nodes 100,000" in err and "links, over the limit" in err


def test_sparse_routing_matches_a_dense_count_on_a_big_mesh():
    cluster = custom_cluster(1, 64, 50e9, fabric="mesh")  # 4,096 xgmi links
    sched = get_schedule("all_reduce", "ring", 64)
    loads = link_loads(sched, cluster, 64 * 1000, 1)
    dense = np.zeros(cluster.link_count, dtype=np.int64)
    busiest = []
    sizes = np.full(64, 1000)
    for step in sched.steps:
        e = step.expanded()
        hops, _ = cluster.route(e.src, e.dst)
        per = np.zeros(cluster.link_count, dtype=np.int64)
        np.add.at(per, hops[:, 0], sizes[e.chunk])
        dense += per
        busiest.append((per / cluster.links.bandwidth).max())
    assert np.array_equal(loads.bytes, dense)
    assert np.allclose(loads.step_seconds, busiest)


def test_a_1024_gpu_mesh_costs_ring_without_per_link_work(capsys):
    code = cli_main(["cost", "--topology", "custom", "--gpus-per-node", "1024", "--gpu-gbs", "50", "--intra", "mesh",
                     "--algorithm", "ring", "--json"])
    assert code == 0
    row = json.loads(capsys.readouterr().out)["algorithms"][0]
    n, s = 1024, 2**30
    assert row["steps"] == 2 * (n - 1)
    assert row["bytes_moved"] == 2 * (n - 1) * s  # every rank sends 2(N-1)/N of S


@pytest.mark.parametrize("field,value", [("gpu_bandwidth", math.inf), ("gpu_bandwidth", math.nan),
                                         ("gpu_latency", math.inf), ("nic_latency", math.inf),
                                         ("nic_gbps", math.inf), ("pcie_bandwidth", -1.0), ("gpu_bandwidth", 10**400)])
def test_custom_cluster_refuses_non_finite_numbers(field, value):
    args = dict(nodes=2, gpus_per_node=4, gpu_bandwidth=1e9, nics_per_node=4, nic_gbps=100.0)
    args[field] = value
    with pytest.raises(ValueError, match=field):
        custom_cluster(**args)


def test_custom_is_not_called_an_unknown_preset():
    with pytest.raises(ValueError) as exc:
        get_cluster("custom")
    assert "unknown" not in str(exc.value) and "custom_cluster" in str(exc.value)
    with pytest.raises(ValueError) as exc:
        get_cluster("dgx-h1000")
    assert "or custom" not in str(exc.value) and "dgx-h100" in str(exc.value)


@pytest.mark.parametrize("argv,option", [
    (["--topology", "dgx-h100", "--intra", "mesh"], "--intra"),
    (["--topology", "dgx-h100", "--fabric", "ib-ndr"], "--fabric"),
    (["--intra", "pcie"], "--intra"),
    (["--topology", "custom", "--gpus-per-node", "8", "--gpu-gbs", "1e-300"], "--gpu-gbs"),
    (["--topology", "custom", "--gpus-per-node", "8", "--gpu-gbs", "450", "--nodes", "2", "--nics", "8",
      "--nic-gbps", "1e-300"], "--nic-gbps"),
])
def test_cost_refuses_options_that_would_be_ignored_or_absurd(argv, option, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["cost", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and option in err and len(err.strip().splitlines()) == 1


def test_channel_help_agrees_with_the_limit_and_the_default(capsys):
    with pytest.raises(SystemExit):
        cli_main(["cost", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "at most 16" not in text and "1 to 1024" in text and "72 on gb200-nvl72" in text
    assert algos.default_channels(get_cluster("gb200-nvl72")) == 72


def test_verify_topology_defaults_are_small(capsys):
    assert cli_main(["verify", "--topology", "gb200-nvl72", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and data["rows"]
    for row in data["rows"]:
        est = transfers_estimate("all_reduce", "ring_channels", get_cluster("gb200-nvl72", row["nodes"]))
        assert est <= 1 << 21


def test_verify_topology_refuses_too_many_nodes_before_running(capsys, monkeypatch):
    import ringlab.sim.on_cluster as sim_cluster

    monkeypatch.setattr(sim_cluster, "verify_on_cluster", lambda *a, **k: pytest.fail("ran before refusing"))
    with pytest.raises(SystemExit) as exc:
        cli_main(["verify", "--topology", "gb200-nvl72", "--nodes", "1,8"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--nodes 8" in err and "transfers" in err


def test_verify_topology_refuses_numel_that_does_not_fit(capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(["verify", "--topology", "dgx-h100", "--numel", "1e12"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--numel 1,000,000,000,000" in err and "GiB" in err


@pytest.mark.parametrize("algorithm,nodes", [("ring_channels", 2), ("hierarchical", 3), ("direct", 2),
                                             ("tree_chains", 2), ("ring", 3)])
def test_cluster_verify_estimate_covers_the_measured_peak(algorithm, nodes):
    cluster = get_cluster("dgx-h100", nodes)
    numel = 200_003
    tracemalloc.start()
    try:
        verify_on_cluster("all_reduce", algorithm, cluster, numel=numel)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    estimate = cluster_verify_bytes(build_on_cluster("all_reduce", algorithm, cluster), numel)
    assert peak <= estimate <= 4 * peak
