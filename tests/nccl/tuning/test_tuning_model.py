"""ncclTopoTuneModel and the choice: values derived by hand from the C source, and properties."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.nccl.tuning import VERSIONS, Comm, Graph, algo_time, choose, get_version, tune
from ringlab.nccl.tuning.model import parse_list
from ringlab.nccl.tuning.versions import PROTOCOLS


def h100_two_nodes(**env):
    """2 x 8 H100, 8 ring channels at 45 GB/s over the NICs (balanced tree, Intel CPUs)."""
    ring = Graph(8, 45.0, 45.0, "NVL", "PXN", "ring")
    tree = Graph(8, 45.0, 45.0, "NVL", "PXN", "balanced_tree")
    return Comm(16, 2, 90, ring, tree, env=env)


def test_2_19_by_hand():
    t = tune(h100_two_nodes(), "2.19")
    # Ring/Simple all-reduce: base 8.4 + (2(16-1) - 2*2) steps x max(NVLink 3.4, 3 x net overhead 1) + 4 x net 14
    assert t.lat("AllReduce", "Ring", "Simple") == pytest.approx(8.4 + 26 * 3.4 + 4 * 14, abs=1e-4)
    assert t.bw("AllReduce", "Ring", "Simple") == pytest.approx(8 * 45 * 16 / 30, rel=1e-6)  # busBw x nRanks/nsteps
    # Ring/LL: capped by llMaxBws[Intel][2 nodes] = 39 GB/s
    assert t.bw("AllReduce", "Ring", "LL") == pytest.approx(39.0 * 16 / 30, rel=1e-6)
    assert t.lat("AllReduce", "Ring", "LL") == pytest.approx(6.6 + 26 * 1.0 + 4 * 2.7, abs=1e-4)
    # Tree/LL: min(8 x 45 x .92, 8 x 41.4) / 3.8 capped at 39, halved; latency 6.8 + 2 (7 x .6 + log2(2) x 5)
    assert t.bw("AllReduce", "Tree", "LL") == pytest.approx(19.5, rel=1e-6)
    assert t.lat("AllReduce", "Tree", "LL") == pytest.approx(6.8 + 2 * (7 * 0.6 + 5.0), abs=1e-4)
    assert t.lat("AllReduce", "Tree", "Simple") == pytest.approx(2 * (7 * 28 + 28), abs=1e-4)  # 2.19: 28 us hops
    assert t.bw("Broadcast", "Tree", "LL") == 0  # Tree is all-reduce only


def test_2_30_by_hand():
    t = tune(h100_two_nodes(), "2.30")
    # inter-node steps are 2 (nNodes - 1) since 2.20; Tree/Simple hops 4 us (NVLink) and 14 (network)
    assert t.lat("AllReduce", "Ring", "Simple") == pytest.approx(8.4 + 28 * 3.4 + 2 * 14, abs=1e-4)
    assert t.lat("AllReduce", "Ring", "LL") == pytest.approx(6.6 + 28 * 1.0 + 2 * 2.7, abs=1e-4)
    assert t.bw("AllReduce", "Tree", "Simple") == pytest.approx(min(8 * 45 * .92, 8 * 41.4) * .5, rel=1e-6)
    assert t.lat("AllReduce", "Tree", "Simple") == pytest.approx(8.4 + 2 * (7 * 4.0 + 14), abs=1e-4)
    # 1 GiB Ring/Simple: the 1.4x plateau latency + bytes / (1000 x 192 GB/s)
    c = algo_time(t, "AllReduce", "Ring", "Simple", 2**30)
    assert c == pytest.approx(1.4 * (8.4 + 28 * 3.4 + 28) + 2**30 / (1000 * 192.0), rel=1e-6)


def test_one_rank_has_no_table():
    g = Graph(1, 10.0, 10.0)
    t = tune(Comm(1, 1, 90, g, g), "2.30")
    assert not any(v for f in t.bandwidth for a in f for v in a)
    assert choose(t, "AllReduce", 1 << 20).label == "RING/SIMPLE"


@pytest.mark.parametrize("text, expected", [("^LL128", [1, 0, 1]), ("LL,Simple", [1, 0, 1]), ("simple", [0, 0, 1]),
                                            ("^ll,ll128", [0, 0, 1])])
def test_parse_list(text, expected):
    assert parse_list(text, PROTOCOLS)[0] == expected


def test_parse_list_per_function():
    rows = parse_list("^LL128;allreduce:LL128", PROTOCOLS, ("Broadcast", "AllReduce"))
    assert rows == [[1, 0, 1], [0, 1, 0]]
    with pytest.raises(ValueError, match="unknown element 'LL256'"):
        parse_list("LL256", PROTOCOLS, ("AllReduce",))
    with pytest.raises(ValueError, match="unknown function prefix"):
        parse_list("alltoall:LL", PROTOCOLS, ("AllReduce",))
    with pytest.raises(ValueError, match="2.24"):
        parse_list("allreduce:LL", PROTOCOLS)


def test_forcing_protocol_and_algorithm():
    base = tune(h100_two_nodes(), "2.30")
    simple = tune(h100_two_nodes(NCCL_PROTO="Simple"), "2.30")
    assert simple.bw("AllReduce", "Ring", "LL") == 0 and simple.bw("AllReduce", "Ring", "Simple") > 0
    ring = tune(h100_two_nodes(NCCL_ALGO="Ring"), "2.30")
    assert ring.bw("AllReduce", "Tree", "Simple") == 0 and choose(ring, "AllReduce", 1024).algorithm == "Ring"
    assert choose(base, "AllReduce", 1024).label == "TREE/LL"


def test_ll128_off_on_pcie_unless_forced():
    g = Graph(2, 12.0, 12.0, "PXB", "PIX", "ring")
    comm = Comm(8, 1, 89, g, g)
    assert tune(comm, "2.30").bw("AllReduce", "Ring", "LL128") == 0  # not NVLink: untested, off
    forced = tune(comm.with_env(NCCL_PROTO="LL128"), "2.30")
    assert forced.bw("AllReduce", "Ring", "LL128") > 0 and forced.bw("AllReduce", "Ring", "Simple") == 0


def test_max_nchannels_caps_bandwidth():
    from ringlab.nccl.tuning.knobs import apply_channel_limits

    capped = apply_channel_limits(h100_two_nodes(NCCL_MAX_NCHANNELS="2"))
    assert capped.ring.n_channels == 2 and capped.channels == 2
    assert tune(capped, "2.30").bw("AllReduce", "Ring", "Simple") == pytest.approx(2 * 45 * 16 / 30, rel=1e-6)


def test_no_algorithm_available_is_an_error():
    t = tune(h100_two_nodes(NCCL_ALGO="Tree"), "2.30")  # Tree exists for all-reduce only
    with pytest.raises(ValueError, match="no algorithm/protocol available for AllGather with NCCL_ALGO=Tree"):
        choose(t, "all_gather", 1 << 20)


def test_bad_inputs():
    g = Graph(1, 1.0, 1.0)
    with pytest.raises(ValueError, match="n_ranks=12 is not a multiple of n_nodes=5"):
        Comm(12, 5, 90, g, g)
    with pytest.raises(ValueError, match="bw_intra"):
        Graph(1, -1.0, 1.0)
    with pytest.raises(ValueError, match="versions: 2.19, 2.29, 2.30"):
        get_version("2.4")
    with pytest.raises(ValueError, match="unknown function"):
        choose(tune(h100_two_nodes(), "2.30"), "all_to_all", 8)


comms = st.builds(
    lambda nodes, gpus, ch, bw, cc, pattern, nvls: Comm(
        nodes * gpus, nodes, cc, Graph(ch, bw, bw, "NVL" if gpus > 1 else "LOC", "PIX", "ring"),
        Graph(ch, bw, bw, "NVL" if gpus > 1 else "LOC", "PIX", pattern),
        nvls=Graph(max(gpus, 2), bw, bw, "NVL", "PIX", "nvls"), nvls_channels=16, nvls_support=nvls and gpus > 1),
    st.integers(1, 16), st.integers(1, 8), st.integers(1, 16), st.floats(0.5, 60), st.sampled_from([70, 80, 90, 100]),
    st.sampled_from(["balanced_tree", "tree"]), st.booleans())


@given(comm=comms, version=st.sampled_from(sorted(VERSIONS)), size=st.integers(0, 1 << 34),
       fn=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "broadcast"]))
def test_choice_is_the_least_time(comm, version, size, fn):
    t = tune(comm, version)
    c = choose(t, fn, size)
    times = [v for v in c.times.values() if v is not None]
    assert times and c.time_us == min(times)
    assert 1 <= c.channels and c.threads >= 96


@given(comm=comms, version=st.sampled_from(sorted(VERSIONS)), size=st.integers(1, 1 << 33))
def test_restricting_never_helps_and_time_grows_with_size(comm, version, size):
    full = choose(tune(comm, version), "AllReduce", size)
    for env in ({"NCCL_PROTO": "Simple"}, {"NCCL_ALGO": "Ring"}):
        assert choose(tune(comm.with_env(**env), version), "AllReduce", size).time_us >= full.time_us
    t = tune(comm, version)
    for algo in ("Ring", "Tree"):
        for proto in PROTOCOLS:
            a, b = algo_time(t, "AllReduce", algo, proto, size), algo_time(t, "AllReduce", algo, proto, 2 * size)
            if a is not None:
                assert b >= a


@given(comm=comms, version=st.sampled_from(sorted(VERSIONS)))
def test_printed_table_reads_back(comm, version):
    """format_table then parse_table gives every cell to NCCL's one decimal, in every release's layout."""
    from ringlab.nccl.tuning import format_table, parse_table
    from ringlab.nccl.tuning.versions import FUNCTIONS

    t = tune(comm, version)
    printed = parse_table([f"host:1:2 [0] NCCL INFO {line}" for line in format_table(t)])
    names = get_version(version).algorithms
    assert len(printed.cells) == len(FUNCTIONS) * len(names) * 3
    for (f, a, p), (lat, bw) in printed.cells.items():
        assert lat == pytest.approx(t.lat(f, a, p), abs=0.05 + 1e-9)
        assert bw == pytest.approx(t.bw(f, a, p), abs=0.05 + 1e-9)
