"""Findings and facts at their edges: what must NOT fire on healthy real runs, low efficiency held back while
busbw still rises, the rank count read from busbw/algbw only when it matches a factor closely, and the
tightest ceiling above a busbw no ring could reach."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nccl_fixtures import fixture_text
from ringlab.nccl import explain_texts
from ringlab.nccl.ceiling import ceiling_busbw, ceilings

HEADER = ["#       size         count      type   redop    root     time   algbw   busbw  #wrong"
          "     time   algbw   busbw  #wrong",
          "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
          "             (us)  (GB/s)  (GB/s)"]
H100_NODE = [f"#  Rank  {r} Group  0 Pid 1000 on      node0 device  {r} [0000:{r:02x}:00] NVIDIA H100 80GB HBM3"
             for r in range(8)]


def table(busbw: list[float], ratio: float, devices: list[str] = ()) -> str:
    """An all_reduce_perf table (sizes 1 MiB x 4^i) with these busbw values and busbw / algbw = ``ratio``."""
    rows = []
    for i, bus in enumerate(busbw):
        size = 2**20 * 4**i
        alg = bus / ratio
        us = size / (alg * 1e3)
        rows.append(f"{size:>12} {size // 4:>12}     float     sum      -1 {us:8.2f} {alg:7.2f} {bus:7.2f}       0 "
                    f"{us:8.2f} {alg:7.2f} {bus:7.2f}       0")
    return "\n".join(["# Collective test starting: all_reduce_perf", "# Using devices", *devices, *HEADER, *rows])


def report(text: str):
    (r,) = explain_texts([("run", text)])
    return r


@pytest.mark.parametrize("name, expected", [
    ("nccl_tests_293_a100pcie_2node_gdr_sys.txt", ["latency-bound"]),  # 2 nodes, its one listed NIC in use
    ("a100_sxm4_8gpu_nccl_tests_2_19.txt", ["latency-bound"]),
])
def test_healthy_real_runs_raise_nothing_else(name, expected):
    assert [f.id for f in report(fixture_text(name)).findings] == expected


def test_low_efficiency_waits_for_the_plateau():
    """8 H100s on NVLink reaching 100-odd GB/s busbw is low against any ceiling over 200 GB/s, but while busbw still
    rises by more than 10% at the largest size only no-plateau may be said; once it flattens, low-efficiency."""
    rising = report(table([40.0, 70.0, 90.0, 120.0], 1.75, H100_NODE))
    assert rising.expected_busbw and rising.expected_busbw > 2 * 120e9
    ids = [f.id for f in rising.findings]
    assert "no-plateau" in ids and "low-efficiency" not in ids
    flat = report(table([40.0, 70.0, 118.0, 120.0], 1.75, H100_NODE))
    ids = [f.id for f in flat.findings]
    assert "low-efficiency" in ids and "no-plateau" not in ids


@pytest.mark.parametrize("ratio, world", [
    (1.75, 8),  # 2 (8 - 1) / 8 exactly
    (1.745, 8),  # 0.3% off
    (1.495, 4),  # 0.3% below 2 (4 - 1) / 4 = 1.5
    (1.45, None),  # 3.4% below 1.5, 8.8% above 4/3: no rank count fits within 0.5%
    (1.2, None),
])
def test_rank_count_from_busbw_over_algbw(ratio, world):
    facts = report(table([40.0, 70.0, 90.0, 91.0], ratio)).facts
    assert facts.world_size == world
    assert any(n.startswith("rank count inferred") for n in facts.notes) == (world is not None)


def _two_h100_nodes_with_nvls():
    return SimpleNamespace(collective="all_reduce", world_size=16, nodes=2, gpus_per_node=8,
                           gpu="NVIDIA H100 80GB HBM3", nics=8, nic_bandwidth=50e9, graphs=["Ring", "Tree", "NVLS"],
                           algorithms=[])


def test_a_busbw_above_the_ring_is_bounded_by_the_tightest_ceiling_above_it():
    facts = _two_h100_nodes_with_nvls()
    by_name = ceilings(facts)
    ring = by_name["ring_channels"]
    others = sorted(v for n, v in by_name.items() if n != "ring_channels")
    assert len(others) >= 2 and others[0] > ring  # the tree and NVLS_TREE both beat the ring across 2 nodes
    assert ceiling_busbw(facts)[0] == ring  # no TUNING lines and no peak: the ring
    assert ceiling_busbw(facts, peak=ring * 0.9)[0] == ring
    just_above = (ring + others[0]) / 2
    assert ceiling_busbw(facts, peak=just_above)[0] == others[0]
    assert ceiling_busbw(facts, peak=(others[0] + others[1]) / 2)[0] == others[1]
    assert ceiling_busbw(facts, peak=others[-1] * 2)[0] == others[-1]  # above all: the highest, then above-ceiling


@pytest.mark.parametrize("over, fires", [(1.0, False), (1.04, False), (1.2, True)])
def test_above_ceiling_fires_past_five_percent(over, fires):
    """A plateau at the ceiling, or within 5% above it (measurement noise), is healthy; 20% above means the model of
    the links is wrong for this run (NVLS, a 2-node tree, a faster link)."""
    ceiling = report(table([40.0, 70.0, 90.0, 91.0], 1.75, H100_NODE)).expected_busbw / 1e9
    plateau = round(ceiling * over, 2)
    r = report(table([plateau * 0.5, plateau * 0.8, plateau * 0.99, plateau], 1.75, H100_NODE))
    assert r.expected_busbw / 1e9 == pytest.approx(ceiling)
    assert ("above-ceiling" in [f.id for f in r.findings]) == fires


def test_fit_residual_is_relative_to_the_measured_time():
    from ringlab.nccl.fit import fit_alpha_beta

    sizes = [2.0**k for k in range(10, 28, 2)]
    times = [20e-6 + s / 100e9 for s in sizes]
    times[4] *= 1.10  # one size 10% slow
    fit = fit_alpha_beta(sizes, times)
    worst = max(abs(fit.alpha + fit.beta * s - t) / t for s, t in zip(sizes, times))
    assert fit.max_relative_residual == pytest.approx(worst, rel=1e-9)
    assert 0.03 < fit.max_relative_residual < 0.10


@pytest.mark.parametrize("ratio, noted", [(1.75, False), (1.74, False), (1.6, True)])
def test_a_busbw_factor_off_by_more_than_two_percent_is_noted(ratio, noted):
    """8 ranks of all_reduce: nccl-tests prints busbw = 2 (8 - 1) / 8 x algbw = 1.75 x algbw (PERFORMANCE.md);
    1.6 is 8.6% off, a sign that the rank count or the collective is misread."""
    r = report(table([40.0, 70.0, 90.0, 91.0], ratio, H100_NODE))
    assert r.facts.world_size == 8
    assert ("busbw-factor" in [f.id for f in r.findings]) == noted


def test_tuning_lines_pick_the_highest_ceiling_of_the_algorithms_they_show():
    facts = _two_h100_nodes_with_nvls()
    by_name = ceilings(facts)
    facts.algorithms = ["RING/LL128", "TREE/SIMPLE"]
    assert ceiling_busbw(facts)[0] == max(by_name["ring_channels"], by_name["tree_chains"])


def test_one_node_is_bounded_by_its_rings_alone_without_nvls():
    """No tree on one node (NCCL's tree is between nodes) and no NVLS unless the log shows it: the ring only."""
    facts = SimpleNamespace(collective="all_reduce", world_size=8, nodes=1, gpus_per_node=8,
                            gpu="NVIDIA H100 80GB HBM3", nics=None, nic_bandwidth=None, graphs=["Ring"], algorithms=[])
    assert list(ceilings(facts)) == ["ring_channels"]
