"""Per-link bytes and times against the textbook formulas and the worked numbers of PROBLEMS.md P2/P12."""

import numpy as np
import pytest

from ringlab.collectives.cost import alpha_beta_time
from ringlab.topology import build_on_cluster, closed_form_link_bytes, cost_of, get_cluster, linear_time, link_loads

GIB = 2**30


def _per_class(cluster, per_link, cls, direction="tx"):
    return per_link[cluster.links.of_class(cls, direction)]


@pytest.mark.parametrize("nodes", [2, 3, 8])
def test_ring_channels_put_2_n_minus_1_over_n_m_over_c_on_every_nic(nodes):
    c = get_cluster("dgx-h100", nodes)
    n, m = c.world_size, c.world_size * 8 * 1000  # divisible by N x C
    loads = link_loads(build_on_cluster("all_reduce", "ring_channels", c), c, m)
    nic = _per_class(c, loads.bytes, "nic")
    assert (nic == 2 * (n - 1) * m // n // 8).all()
    nvlink = _per_class(c, loads.bytes, "nvlink")
    assert (nvlink == 2 * (n - 1) * m // n * 7 // 8).all()  # every GPU exits one channel of 8 over PCIe
    assert (_per_class(c, loads.bytes, "pcie") == nic[0]).all()


def test_hierarchical_nvls_and_sharp_per_link_formulas():
    k, g = 4, 8
    c = get_cluster("dgx-h100", k)
    m = k * g * 2 * 4 * 1000
    hier = closed_form_link_bytes("all_reduce", "hierarchical", c, m)
    assert (_per_class(c, hier, "nic") == 2 * (k - 1) * m // k // g).all()
    assert (_per_class(c, hier, "nvlink") == 2 * (g - 1) * m // g).all()
    sharp = closed_form_link_bytes("all_reduce", "sharp", c, m)
    assert (_per_class(c, sharp, "nic") == m // g).all() and (_per_class(c, sharp, "nic", "rx") == m // g).all()
    one = get_cluster("dgx-h100", 1)
    nvls = link_loads(build_on_cluster("all_reduce", "nvls", one), one, m).bytes
    # M (1 + 1/G) each way: the switch also reads the GPU's own slice and multicasts it back (nccl#828, #1506)
    own = m + m // g
    assert (_per_class(one, nvls, "nvlink") == own).all() and (_per_class(one, nvls, "nvlink", "rx") == own).all()


def test_p12_two_dgx_nodes_take_about_1_2_times_one_node_not_ten():
    one, two = get_cluster("dgx-h100", 1), get_cluster("dgx-h100", 2)
    t1 = cost_of(build_on_cluster("all_reduce", "ring_channels", one), one, GIB)
    t2 = cost_of(build_on_cluster("all_reduce", "ring_channels", two), two, GIB)
    # line rate: 2(N-1)/N x 1 GiB over 450 GB/s NVLink, and over 8 x 50 GB/s of NICs
    assert t1.line_rate_seconds == pytest.approx(2 * 7 / 8 * GIB / 450e9)
    assert t2.line_rate_seconds == pytest.approx(2 * 15 / 16 * GIB / 400e9)
    assert round(t1.line_rate_seconds * 1e3, 1) == 4.2 and round(t2.line_rate_seconds * 1e3, 1) == 5.0
    assert 1.15 < t2.line_rate_seconds / t1.line_rate_seconds < 1.25
    assert t2.bottleneck_class == "nic" and t2.inter_node_fraction == pytest.approx(2 / 16)
    # the step model adds one latency per step: 30 network steps of 5 us
    assert t2.seconds == pytest.approx(t2.line_rate_seconds + 30 * 5e-6, rel=1e-9)


def test_the_single_channel_ring_is_the_single_nic_picture():
    two = get_cluster("dgx-h100", 2)
    flat = cost_of(build_on_cluster("all_reduce", "ring", two), two, GIB)
    assert flat.line_rate_busbw == pytest.approx(50e9)  # one ring leaves each node through one 50 GB/s NIC
    assert flat.bottleneck == "node 0 nic 7 tx"
    assert flat.line_rate_seconds == pytest.approx(2 * 15 / 16 * GIB / 50e9)


def test_one_node_ring_step_model_is_the_alpha_beta_model_of_one_link():
    c = get_cluster("dgx-h100", 1)
    ring = build_on_cluster("all_reduce", "ring", c)
    for size in (1000, GIB):  # divisible by 8: every step moves one equal chunk per link
        assert cost_of(ring, c, size).seconds == pytest.approx(alpha_beta_time("all_reduce", "ring", 8, size, "nvlink4"),
                                                               rel=1e-12)
    # uneven chunks: every step waits for the link carrying the largest one (ceil(12345 / 8) bytes)
    assert cost_of(ring, c, 12345).seconds == pytest.approx(14 * (2e-6 + 1544 / 450e9), rel=1e-12)


def test_protocol_efficiency_scales_only_the_bandwidth_term():
    c = get_cluster("dgx-h100", 2)
    sched = build_on_cluster("all_reduce", "ring_channels", c)
    a, b, b_line = linear_time(sched, c)
    a_ll, b_ll, line_ll = linear_time(sched, c, "ll")
    assert a_ll == a and b_ll == pytest.approx(2 * b) and line_ll == pytest.approx(2 * b_line)
    assert linear_time(sched, c, "ll128")[1] == pytest.approx(b * 128 / 120)
    m = sched.num_chunks * 64 * 1000
    assert cost_of(sched, c, m).seconds == pytest.approx(a + b * m)
    with pytest.raises(ValueError, match="protocol"):
        linear_time(sched, c, "fast")


def test_p2_seven_b_ddp_and_fsdp_at_64_h100s_on_the_cluster():
    c = get_cluster("dgx-h100", 8)
    m = 14_000_000_000  # 7e9 bf16 parameters
    ring = cost_of(build_on_cluster("all_reduce", "ring_channels", c), c, m)
    ag = cost_of(build_on_cluster("all_gather", "ring_channels", c), c, m)
    rs = cost_of(build_on_cluster("reduce_scatter", "ring_channels", c), c, m)
    ddp, fsdp = ring.line_rate_seconds, 2 * ag.line_rate_seconds + rs.line_rate_seconds
    assert ddp == pytest.approx(2 * 63 / 64 * m / 400e9) and fsdp == pytest.approx(1.5 * ddp)
    assert 0.065 < ddp < 0.07 and 0.10 < fsdp < 0.105  # 69 ms and 103 ms, not 0.55 s and 0.83 s
    assert np.isclose(ring.busbw, ring.line_rate_busbw, rtol=0.01)


@pytest.mark.parametrize("preset, nodes", [("dgx-h100", 2), ("dgx-h100", 8), ("dgx-b200", 2), ("gb200-nvl72", 2),
                                           ("hgx-h200", 1), ("dgx-b200", 1), ("dgx-a100", 2)])
def test_ex16_closed_form_agrees_with_the_routed_model(preset, nodes):
    from pathlib import Path

    from ringlab.check import load

    solution = load("13a", Path(__file__).resolve().parents[2] / "solutions" / "13_nvlink_and_fabric.py")
    c = get_cluster(preset, nodes)
    link, busbw = solution(nodes, c.gpus_per_node, c.gpu_bandwidth / 1e9, c.nics_per_node, c.nic_gbps)
    routed = cost_of(build_on_cluster("all_reduce", "ring_channels", c), c, c.world_size * c.gpus_per_node * 1000)
    assert busbw * 1e9 == pytest.approx(routed.line_rate_busbw) and link == routed.bottleneck_class
