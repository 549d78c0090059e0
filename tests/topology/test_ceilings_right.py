"""Ceilings that are right (issue 29 §2): MI300X rings over all seven xGMI links, NVLS's M (1 + 1/N)."""

import itertools

import numpy as np
import pytest

from ringlab.topology import build_on_cluster, closed_form_link_bytes, cost_of, get_cluster, link_loads
from ringlab.topology.algorithms import default_channels
from ringlab.topology.schedules import mesh_rings


@pytest.mark.parametrize("g", range(2, 17))
def test_mesh_rings_are_an_arc_disjoint_hamiltonian_decomposition(g):
    """Every ring visits every GPU once; no directed link a -> b is in two rings; where a decomposition of the
    complete digraph exists (every G but 4 and 6, Tillson 1980) the G - 1 rings use every link."""
    rings = mesh_rings(g)
    arcs = [(a, b) for ring in rings for a, b in zip(ring, ring[1:] + ring[:1])]
    assert all(sorted(ring) == list(range(g)) for ring in rings)
    assert len(arcs) == len(set(arcs)) and all(a != b for a, b in arcs)
    if g not in (4, 6):
        assert len(rings) == g - 1 and set(arcs) == set(itertools.permutations(range(g), 2))
    else:  # the strides coprime with G: 1, 3 (G = 4) and 1, 5 (G = 6)
        assert len(rings) == 2


def test_mi300x_ring_uses_all_seven_links():
    """7 x 64 GB/s = 448 GB/s per GPU per direction (AMD MI300X platform datasheet); each link carries one ring."""
    node = get_cluster("mi300x-platform", 1)
    assert default_channels(node) == 7
    c = cost_of(build_on_cluster("all_reduce", "ring_channels", node), node, 7 * 8 * 1024)
    assert c.line_rate_busbw == pytest.approx(7 * 64e9, rel=1e-12)
    xgmi = node.links.of_class("xgmi")
    used = link_loads(build_on_cluster("all_reduce", "ring_channels", node), node, 7 * 8 * 1024).bytes[xgmi]
    assert (used > 0).sum() == 56 and len(set(used[used > 0].tolist())) == 1  # all 56 links, equally


@pytest.mark.parametrize("g", [2, 4, 8])
def test_nvls_moves_m_times_one_plus_one_over_n(g):
    """NVIDIA/nccl#828, #1506: each GPU's NVLink port carries M (1 + 1/N) each way in NVLS all-reduce; the router
    (multimem reads of the owner's slice and the multicast back to the sender) and the closed form agree."""
    node = get_cluster("dgx-h100", 1).__class__(**{**get_cluster("dgx-h100", 1).__dict__, "gpus_per_node": g,
                                                     "nics_per_node": g})
    sched = build_on_cluster("all_reduce", "nvls", node)
    m = sched.num_chunks * 1000
    counted = link_loads(sched, node, m).bytes
    np.testing.assert_array_equal(counted, closed_form_link_bytes("all_reduce", "nvls", node, m))
    for d in ("tx", "rx"):
        assert (counted[node.links.of_class("nvlink", d)] == m + m // g).all()
    ceiling = cost_of(sched, node, m).line_rate_busbw
    assert ceiling == pytest.approx(2 * (g - 1) / (g + 1) * 450e9, rel=1e-12)


def test_nvls_ceiling_on_eight_h100_is_700():
    node = get_cluster("dgx-h100", 1)
    c = cost_of(build_on_cluster("all_reduce", "nvls", node), node, 2**30)
    assert c.line_rate_busbw == pytest.approx(700e9, rel=1e-6)
