"""``ringlab.topology.timing``: protocol efficiency in the step model and the CLI, and groups of any size.

The expected times are the alpha-beta closed form of a ring all-reduce inside one NVSwitch node of N GPUs:
2 (N - 1) steps, each paying the hop latency and moving S / N bytes per link at the link rate times the
protocol's data share (NCCL LL: 4 data bytes per 8-byte store, 1/2; LL128: 120 of 128 bytes).
"""

from __future__ import annotations

import json

import pytest

from ringlab.cli import main
from ringlab.topology import build_on_cluster, cost_of, custom_cluster, get_cluster
from ringlab.topology.timing import group_cluster, linear_time

GPUS, RATE, LATENCY = 8, 300e9, 3e-6
SIZE = 8 * 2**20
SHARE = {None: 1.0, "simple": 1.0, "ll128": 120 / 128, "ll": 0.5}


def ring_seconds(size: int, share: float, gpus: int = GPUS, rate: float = RATE, latency: float = LATENCY) -> float:
    return 2 * (gpus - 1) * (latency + size / gpus / (rate * share))


@pytest.mark.parametrize("protocol", list(SHARE))
def test_the_protocol_divides_the_link_rate(protocol):
    cluster = custom_cluster(1, GPUS, RATE, gpu_latency=LATENCY)
    cost = cost_of(build_on_cluster("all_reduce", "ring", cluster), cluster, SIZE, protocol)
    assert cost.seconds == pytest.approx(ring_seconds(SIZE, SHARE[protocol]), rel=1e-12)
    assert cost.line_rate_seconds == pytest.approx(2 * (GPUS - 1) * SIZE / GPUS / (RATE * SHARE[protocol]), rel=1e-12)
    assert cost.protocol == (protocol or "simple")


def test_ll_is_slower_than_simple_and_ll128_in_between():
    cluster = custom_cluster(1, GPUS, RATE, gpu_latency=LATENCY)
    ring = build_on_cluster("all_reduce", "ring", cluster)
    simple, ll128, ll = (cost_of(ring, cluster, SIZE, p).seconds for p in ("simple", "ll128", "ll"))
    assert simple < ll128 < ll


@pytest.mark.parametrize("protocol", ["simple", "ll128", "ll"])
def test_cost_cli_applies_the_protocol(protocol, capsys):
    argv = ["cost", "--topology", "custom", "--gpus-per-node", str(GPUS), "--gpu-gbs", str(RATE / 1e9),
            "--algorithm", "ring", "--size", str(SIZE), "--protocol", protocol, "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    latency = custom_cluster(1, GPUS, RATE).gpu_latency  # the CLI's custom cluster keeps the default hop latency
    assert out["protocol"] == protocol
    (row,) = out["algorithms"]
    assert row["seconds"] == pytest.approx(ring_seconds(SIZE, SHARE[protocol], latency=latency), rel=1e-12)
    assert row["line_rate_busbw"] == pytest.approx(RATE * SHARE[protocol], rel=1e-12)


@pytest.mark.parametrize("preset", ["dgx-h100", "aws-p5"])
@pytest.mark.parametrize("size", range(1, 9))
def test_a_group_of_any_size_within_a_node_keeps_each_gpus_nic_share(preset, size):
    """3, 5, 6 and 7 GPUs included: the group is those GPUs of one node, each with the NIC bandwidth it has in
    the full node (dgx-h100: one 400 Gb/s NIC per GPU; aws-p5: four 100 Gb/s EFA NICs per GPU)."""
    cluster = get_cluster(preset, 2)
    group = group_cluster(cluster, size)
    assert (group.nodes, group.gpus_per_node, group.world_size) == (1, size, size)
    per_gpu = cluster.node_network_bandwidth / cluster.gpus_per_node
    assert group.node_network_bandwidth / group.gpus_per_node == pytest.approx(per_gpu)
    assert group.gpu_bandwidth == cluster.gpu_bandwidth


def test_a_group_of_whole_nodes_and_refusals():
    cluster = get_cluster("dgx-h100", 4)
    assert group_cluster(cluster, 16).nodes == 2
    with pytest.raises(ValueError, match="part of a 8-GPU node"):
        group_cluster(cluster, 12)
    with pytest.raises(ValueError, match="does not fit"):
        group_cluster(cluster, 33)


@pytest.mark.parametrize("gpus, crossing", [(2, 2 / 4), (4, 2 / 8)])
def test_inter_node_fraction_of_a_flat_ring_over_two_nodes(gpus, crossing):
    """Ranks 0..2G-1 in one ring: of its 2G equal transfers per step, two cross between the nodes (G-1 -> G and
    2G-1 -> 0), so that share of the bytes leaves a node."""
    cluster = custom_cluster(2, gpus, RATE, nics_per_node=gpus, nic_gbps=400)
    cost = cost_of(build_on_cluster("all_reduce", "ring", cluster), cluster, 2 * gpus * 1000)
    assert cost.inter_node_fraction == pytest.approx(crossing, rel=1e-12)


def test_the_line_rate_bound_is_the_busiest_link_a_nic_on_two_nodes():
    """A flat ring over 2 nodes x 4 GPUs: every ring hop carries 2 (N - 1) chunks of S / N; two hops cross between
    the nodes on 400 Gb/s NICs (50 GB/s), slower than the 300 GB/s NVLink ports, so the NICs bound the run."""
    cluster = custom_cluster(2, 4, RATE, nics_per_node=4, nic_gbps=400)
    size = 8 * 10_000
    cost = cost_of(build_on_cluster("all_reduce", "ring", cluster), cluster, size)
    assert cost.line_rate_seconds == pytest.approx(2 * 7 * size / 8 / 50e9, rel=1e-12)
    assert cost.bottleneck_class == "nic"
    assert cost.line_rate_busbw == pytest.approx(2 * 7 / 8 * size / cost.line_rate_seconds, rel=1e-12)


def test_linear_time_sums_the_latency_of_every_step():
    cluster = custom_cluster(1, GPUS, RATE, gpu_latency=LATENCY)
    a, b, b_line = linear_time(build_on_cluster("all_reduce", "ring", cluster), cluster)
    assert a == pytest.approx(2 * (GPUS - 1) * LATENCY, rel=1e-12)
    assert b == pytest.approx(b_line, rel=1e-12) == pytest.approx(2 * (GPUS - 1) / GPUS / RATE, rel=1e-12)
