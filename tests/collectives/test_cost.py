"""Alpha-beta costs against Thakur et al.'s formulas worked by hand, crossovers and the NCCL-style table."""

import math

import pytest

from ringlab.collectives import ALGORITHMS
from ringlab.collectives.cost import (
    LINKS,
    Link,
    algbw,
    algorithm_table,
    alpha_beta_time,
    bus_factor,
    busbw,
    cost_table,
    crossover,
    get_link,
    reduced_bytes,
)

LINK = Link("test", alpha=1e-6, bandwidth=100e9)


@pytest.mark.parametrize("n", [2, 4, 8, 64])
def test_thakur_formulas_for_powers_of_two(n):
    m = 2 * n * n * 1000  # divisible by every chunk count
    a, beta, lg = 1e-6, 1 / 100e9, math.log2(n)

    def t(collective, algorithm):
        return alpha_beta_time(collective, algorithm, n, m, LINK)

    assert t("all_reduce", "ring") == pytest.approx(2 * (n - 1) * a + 2 * (n - 1) / n * m * beta)
    assert t("all_reduce", "recursive_doubling") == pytest.approx(lg * (a + m * beta))
    assert t("all_reduce", "rabenseifner") == pytest.approx(2 * lg * a + 2 * (n - 1) / n * m * beta)
    assert t("all_reduce", "direct") == pytest.approx((n - 1) * (a + m * beta))
    assert t("reduce_scatter", "ring") == pytest.approx((n - 1) * a + (n - 1) / n * m * beta)
    assert t("all_gather", "recursive_doubling") == pytest.approx(lg * a + (n - 1) / n * m * beta)
    assert t("broadcast", "binomial_tree") == pytest.approx(lg * (a + m * beta))
    assert t("broadcast", "scatter_allgather") == pytest.approx((lg + n - 1) * a + 2 * (n - 1) / n * m * beta)
    assert t("reduce", "binomial_tree") == pytest.approx(lg * a + m * beta)  # one send per rank, root receives lg
    assert t("all_to_all", "pairwise") == pytest.approx((n - 1) * a + (n - 1) / n * m * beta)


def test_gamma_adds_reduction_time():
    n, m = 8, 8000
    no_gamma = alpha_beta_time("all_reduce", "ring", n, m, LINK)
    assert alpha_beta_time("all_reduce", "ring", n, m, LINK, gamma=1e-9) == pytest.approx(no_gamma + 1e-9 * 7 / 8 * m)
    assert reduced_bytes("all_gather", "ring", n, m) == 0
    assert reduced_bytes("all_reduce", "recursive_doubling", 6, 100) == 2 * 100 + 100  # log2 4 + the fold


def test_nccl_tests_bus_factors():
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    for c in ("reduce_scatter", "all_gather", "all_to_all"):
        assert bus_factor(c, 8) == 7 / 8
    assert bus_factor("broadcast", 8) == bus_factor("reduce", 8) == 1
    assert algbw(1e9, 0.01) == 1e11
    assert busbw("all_reduce", 1e9, 0.01, 4) == 1e11 * 1.5


def test_ring_busbw_tends_to_link_bandwidth():
    t = alpha_beta_time("all_reduce", "ring", 64, 64 * 2**30, LINK)
    assert busbw("all_reduce", 64 * 2**30, t, 64) == pytest.approx(LINK.bandwidth, rel=1e-3)


def test_ring_vs_tree_crossover_worked_by_hand():
    # nvlink4, N=64: ring 126 alpha + (126/64) M / B; tree 12 alpha + 2 M / B
    # equal at M = 114 alpha B / (2 - 126/64) = 114 * 2e-6 * 450e9 * 32
    cross = crossover("all_reduce", "nvlink4", 64, ["double_binary_tree"])
    assert cross["double_binary_tree"] == pytest.approx(114 * 2e-6 * 450e9 * 32)
    m = cross["double_binary_tree"]
    unit = 2 * 64 * 64
    below, above = int(m * 0.9) // unit * unit, int(m * 1.1) // unit * unit
    t = {a: [alpha_beta_time("all_reduce", a, 64, s, "nvlink4") for s in (below, above)]
         for a in ("ring", "double_binary_tree")}
    assert t["double_binary_tree"][0] < t["ring"][0] and t["ring"][1] < t["double_binary_tree"][1]


def test_crossover_edge_cases():
    cross = crossover("all_reduce", "nvlink4", 64)
    assert cross["rabenseifner"] is None  # same bytes, fewer steps: ring never wins in this model
    assert crossover("all_reduce", "nvlink4", 2, ["reduce_broadcast"])["reduce_broadcast"] == 0.0  # same line
    assert set(crossover("broadcast", "ib-ndr", 16)) == {"binomial_tree"}
    with pytest.raises(ValueError, match="one algorithm"):
        crossover("all_to_all", "nvlink4", 8)


@pytest.mark.parametrize("fabric", list(LINKS))
def test_algorithm_table_is_the_lower_envelope(fabric):
    rows = algorithm_table("all_reduce", fabric, 48)
    assert rows[0].lo_bytes == 0 and rows[-1].hi_bytes == math.inf
    assert all(a.hi_bytes == b.lo_bytes and a.algorithm != b.algorithm for a, b in zip(rows, rows[1:]))
    unit = 2 * 48 * 32
    for row in rows:
        hi = row.hi_bytes if row.hi_bytes < math.inf else row.lo_bytes * 4 + unit * 10
        m = max(unit, int((row.lo_bytes + hi) / 2) // unit * unit)
        if not row.lo_bytes <= m < hi:
            continue  # range narrower than one unit
        times = {a: alpha_beta_time("all_reduce", a, 48, m, fabric) for c, a in ALGORITHMS if c == "all_reduce"}
        assert min(times, key=times.get) == row.algorithm


def test_link_presets_carry_sources_and_per_direction_bandwidth():
    assert LINKS["nvlink4"].bandwidth == 450e9 and LINKS["nvlink5"].bandwidth == 900e9
    assert LINKS["pcie5-x16"].bandwidth == 64e9
    assert LINKS["ib-ndr"].bandwidth == 400e9 / 8 and LINKS["ib-xdr"].bandwidth == 800e9 / 8
    assert all(link.source and link.alpha > 0 for link in LINKS.values())


def test_get_link_errors_and_duck_typing():
    with pytest.raises(ValueError, match="did you mean nvlink4"):
        get_link("nvlnk4")
    with pytest.raises(TypeError, match="alpha"):
        get_link(3.0)
    with pytest.raises(ValueError, match="bandwidth"):
        Link("bad", 1e-6, 0)

    class Custom:
        alpha, bandwidth = 1e-6, 1e9

    assert get_link(Custom()).bandwidth == 1e9


def test_links_work_with_calc_duck_typing():
    from ringlab.calc import grad_comm_bytes

    comm = grad_comm_bytes("ddp", 7e9, 64, dtype="bf16")
    expected = 2 * 63 * comm.bytes_sent_per_rank / (2 * 63) / 450e9 + 2 * 63 * 2e-6
    assert comm.time(LINKS["nvlink4"]) == pytest.approx(expected)


def test_cost_table_rows():
    rows = cost_table("all_reduce", 64, 2**30, "nvlink4")
    names = [r["algorithm"] for r in rows]
    assert names == [a for c, a in ALGORITHMS if c == "all_reduce"]
    ring = rows[names.index("ring")]
    assert ring["steps"] == 126 and ring["bytes_per_rank_max"] == 2 * 2**30 - 2 * (2**30 // 64)
    assert cost_table("all_reduce", 1, 1000, "nvlink4")[0]["busbw"] is None  # nothing moves


def test_plot_has_one_line_per_algorithm(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from ringlab.viz.collectives import plot_collective_times

    fig = plot_collective_times("all_reduce", "ib-ndr", 32)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")] == [
        a for c, a in ALGORITHMS if c == "all_reduce"]
    fig.savefig(tmp_path / "times.png")
