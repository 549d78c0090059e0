"""Ring rules (ringlab.topology.scale) equal the explicit schedule wherever both run, and run at any size."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ringlab.topology import PRESETS, build_on_cluster, cost_of, get_cluster, linear_time
from ringlab.topology.scale import EXPLICIT_ROWS, SCALABLE, cluster_costs, ring_rule, rule_linear_time, scale_cost

PAIRS = sorted(SCALABLE)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(preset=st.sampled_from(sorted(PRESETS)), nodes=st.integers(1, 3), pair=st.sampled_from(PAIRS),
       units=st.integers(0, 3000), odd=st.integers(0, 997), gpus=st.sampled_from([None, 1, 3]))
def test_ring_rule_equals_the_explicit_schedule(preset, nodes, pair, units, odd, gpus):
    """Bytes per link, the line-rate bound, its link, bytes moved and steps for any size; the step model for sizes
    the schedule cuts evenly (and its line a + b S always)."""
    collective, algorithm = pair
    cluster = get_cluster(preset, nodes)
    if gpus is not None:  # odd node shapes (3 GPUs, 1 GPU) with NICs that fit them
        cluster = cluster.__class__(**{**cluster.__dict__, "gpus_per_node": gpus,
                                       "nics_per_node": gpus * max(1, cluster.nics_per_node // cluster.gpus_per_node),
                                       "mesh_links": cluster.mesh_links and tuple(r[:gpus] for r in
                                                                                  cluster.mesh_links[:gpus])})
    sched = build_on_cluster(collective, algorithm, cluster)
    for size in (units * sched.num_chunks, units * sched.num_chunks + odd):
        want, got = cost_of(sched, cluster, size), scale_cost(collective, algorithm, cluster, size)
        assert (got.line_rate_seconds, got.bottleneck, got.bytes_per_class, got.bytes_moved, got.steps) == \
               (want.line_rate_seconds, want.bottleneck, want.bytes_per_class, want.bytes_moved, want.steps)
        assert got.inter_node_fraction == pytest.approx(want.inter_node_fraction, rel=1e-15, abs=0)
        if size % sched.num_chunks == 0:
            assert got.seconds == pytest.approx(want.seconds, rel=1e-12, abs=0)
    a, b, _ = linear_time(sched, cluster)
    ra, rb = rule_linear_time(ring_rule(collective, algorithm, cluster), cluster)
    assert (ra, rb) == (pytest.approx(a, rel=1e-15, abs=0), pytest.approx(b, rel=1e-12))


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_at_16384_gpus(preset):
    """The ring rule at 16,384 GPUs (GB200 NVL72: 228 racks, 16,416): NCCL's rings are NIC-bound, so the line-rate
    busbw is the node's NIC total, G x port rate (x G / (G - 1) when NVLink binds instead, the exit hop leaving
    the node), derived here from the preset's numbers."""
    base = PRESETS[preset]
    cluster = base.with_nodes(-(-16384 // base.gpus_per_node))
    costs, skipped = cluster_costs("all_reduce", cluster, 2**30)
    ring = next(c for c in costs if c.algorithm == "ring_channels")
    g = cluster.gpus_per_node
    nic = cluster.ports_per_node * cluster.port_bandwidth
    # NVSwitch: G - 1 of a channel's G hops per node use NVLink; PCIe fabric: all G, the exit hop too (the GPU's
    # PCIe link carries its ring traffic whoever receives it); mesh: each link carries 7 of 56 channels, like a NIC
    intra = {"nvswitch": cluster.gpu_bandwidth * g / (g - 1), "pcie": cluster.gpu_bandwidth,
             "mesh": cluster.gpu_bandwidth * g}[cluster.fabric]
    pcie = cluster.pcie_bandwidth * g if cluster.fabric != "pcie" else float("inf")
    # 2**30 B is not a multiple of N x C chunks: the largest chunk is one byte over the mean (rel. ~1e-7)
    assert ring.line_rate_busbw == pytest.approx(min(nic, intra, pcie), rel=1e-6)
    assert any(name == "rabenseifner" for name, _ in skipped)  # quadratic: never built at this size


def test_explicit_schedules_only_where_they_fit():
    small = get_cluster("dgx-h100", 2)
    costs, _ = cluster_costs("all_reduce", small, 2**20)
    assert {c.algorithm for c in costs} >= {"ring", "ring_channels", "tree_chains", "nvls_tree", "rabenseifner"}
    big = get_cluster("dgx-h100", 2048)
    costs, skipped = cluster_costs("all_reduce", big, 2**20)
    assert {"ring", "ring_channels", "hierarchical"} <= {c.algorithm for c in costs}
    assert all(str(EXPLICIT_ROWS // 1) in why.replace(",", "") for name, why in skipped if name == "tree_chains")
    with pytest.raises(ValueError, match="no ring rule"):
        cluster_costs("all_reduce", big, 2**20, algorithms=["tree_chains"])


def test_ring_rule_refuses_other_algorithms():
    with pytest.raises(ValueError, match="ring rules"):
        ring_rule("all_reduce", "tree_chains", get_cluster("dgx-h100", 2))


def test_flat_ring_at_scale_is_bound_by_one_nic():
    """One flat ring crosses every node boundary through one GPU's NIC: busbw at line rate = that NIC, 50 GB/s."""
    c = scale_cost("all_reduce", "ring", get_cluster("dgx-h100", 1000), 2**30)
    assert c.line_rate_busbw == pytest.approx(50e9, rel=1e-9) and c.bottleneck_class == "nic"
    assert np.isclose(c.inter_node_fraction, 1 / 8)


@pytest.mark.slow
def test_cost_command_on_1000_dgx_h100_nodes(capsys):
    """Issue 29's case: 8,000 ranks. The rings' line-rate busbw is the node's 8 x 50 GB/s of NICs (ring_channels)
    or one NIC (one flat ring); per-link bytes of the busiest NIC: 2 (N - 1)/N x S / 8 for ring_channels."""
    import json

    from ringlab.cli import main as cli_main

    assert cli_main(["cost", "--topology", "dgx-h100", "--nodes", "1000", "--size", "1GiB", "--json"]) == 0
    rows = {r["algorithm"]: r for r in json.loads(capsys.readouterr().out)["algorithms"]}
    n, size = 8000, 2**30
    assert rows["ring_channels"]["line_rate_busbw"] == pytest.approx(400e9, rel=1e-6)
    assert rows["ring"]["line_rate_busbw"] == pytest.approx(50e9, rel=1e-6)
    nic_max = rows["ring_channels"]["bytes_per_link_class"]["nic"]["max"]
    assert nic_max == pytest.approx(2 * (n - 1) / n * size / 8, rel=1e-6)
