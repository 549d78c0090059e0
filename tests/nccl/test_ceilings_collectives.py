"""explain's ceilings (issue 29 §2, §3): every modelled collective has its own, from closed forms, at any size."""

import pytest

from ringlab.nccl import explain_texts
from ringlab.nccl.ceiling import ceiling_busbw, line_rate_busbw
from ringlab.nccl.facts import Facts
from ringlab.topology import build_on_cluster, cost_of, get_cluster

from nccl_fixtures import fixture_text


def test_published_mi300x_run_is_under_the_ceiling():
    """hpc-ai-envs#30's rccl-tests all_reduce on one 8 x MI300X node printed 161.14 GB/s at 8 MiB; the ring
    ceiling over all seven xGMI links is 7 x 64 = 448 GB/s (the old 4-link ceiling was 256)."""
    report = explain_texts([("m", fixture_text("hpc_ai_envs_30_mi300x_rccl_tests_excerpt.txt"))])[0]
    assert report.expected_busbw == pytest.approx(448e9, rel=1e-12)
    assert report.peak_busbw < report.expected_busbw


@pytest.mark.parametrize("nodes, want", [(1, 450e9), (2, 15 / 8 * 50e9), (4, 31 / 24 * 50e9)])
def test_all_to_all_cannot_aggregate_the_nodes_nics(nodes, want):
    """N = 8K ranks, each sends S/N to every peer: (N - G)/N of S leaves through the GPU's own 50 GB/s NIC, so
    busbw = (N - 1)/N x S / t = (N - 1)/(N - G) x 50 GB/s; on one node the 450 GB/s NVLink port binds."""
    assert line_rate_busbw("all_to_all", "p2p", get_cluster("dgx-h100", nodes)) == pytest.approx(want, rel=1e-12)


def test_all_to_all_equals_routing_nccl_tests_pattern():
    """The closed form against the routed pairwise schedule (every rank sends its chunk k to rank k)."""
    cluster = get_cluster("dgx-h100", 2)
    sched = build_on_cluster("all_to_all", "pairwise", cluster)
    routed = cost_of(sched, cluster, 16 * 16 * 64).line_rate_busbw
    assert line_rate_busbw("all_to_all", "p2p", cluster) == pytest.approx(routed, rel=1e-12)


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize("preset, nodes, want", [("dgx-h100", 1, 450e9), ("dgx-h100", 2, 400e9),
                                                 ("mi300x-platform", 1, 448e9), ("pcie-8gpu", 2, 32e9)])
def test_broadcast_and_reduce_chains(collective, preset, nodes, want):
    """busbw = algbw: every hop of each channel's chain carries its share once, so the ceiling is the slower of
    a GPU's links (all of a mesh GPU's seven) and the node's rails (8 x 50 GB/s on DGX H100)."""
    assert line_rate_busbw(collective, "ring_chain", get_cluster(preset, nodes)) == pytest.approx(want, rel=1e-12)


def test_sendrecv_is_one_nic_across_nodes():
    assert line_rate_busbw("sendrecv", "p2p", get_cluster("dgx-h100", 2)) == pytest.approx(50e9)
    assert line_rate_busbw("sendrecv", "p2p", get_cluster("dgx-h100", 1)) == pytest.approx(450e9)


def test_no_fallback_to_the_all_gather_ring():
    facts = Facts(collective="gather", world_size=16, nodes=2, gpu="NVIDIA H100 80GB HBM3", nics=8,
                  nic_bandwidth=50e9)
    assert ceiling_busbw(facts) is None
    facts.collective = "all_to_all"
    bw, why = ceiling_busbw(facts)
    assert bw == pytest.approx(93.75e9) and "own NIC" in why


def test_explain_1440_gpus_on_20_gb200_racks():
    """A 1,440-rank all_reduce on 20 NVL72 racks (72 GPUs and 72 x 400 Gb/s NICs per rack, the NICs given as
    overrides): the ceiling comes from the whole cluster; the ring's is NVLink-bound at 900 x 72/71 GB/s."""
    lines = ["# nThread 1 nGpus 1 minBytes 1073741824 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    lines += [f"#  Rank {r:4d} Group  0 Pid {1000 + r:6d} on rack{r // 72:02d} device {r % 72:2d} [0x{r % 72:02x}] "
              "NVIDIA GB200" for r in range(1440)]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
              "algbw   busbw #wrong",
              "  1073741824     268435456     float     sum      -1   3000.0  357.91  715.33      0   3000.0  357.91  "
              "715.33      0"]
    report = explain_texts([("gb200", "\n".join(lines))], nics=72, nic_gbps=400)[0]
    assert (report.facts.world_size, report.facts.nodes, report.facts.gpus_per_node) == (1440, 20, 72)
    assert report.expected_busbw == pytest.approx(900e9 * 72 / 71, rel=1e-6)
