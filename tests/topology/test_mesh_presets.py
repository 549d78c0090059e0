"""Meshes with per-pair link counts: the DGX-1 V100 hybrid cube-mesh, and the MI300X run that beat the old ceiling.

Expected values are counted by hand from the sources in ringlab.topology.presets (DGX-1 V100 whitepaper,
NVIDIA/nccl#671's topology dump, the V100 and MI300X datasheets), not taken from the model.
"""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.nccl import read_texts
from ringlab.nccl.ceiling import ceilings, cluster_for, line_rate_busbw
from ringlab.nccl.facts import Facts
from ringlab.topology import custom_cluster, get_cluster
from ringlab.topology.algorithms import build_on_cluster, default_channels
from ringlab.topology.cluster import Cluster
from ringlab.topology.schedules import mesh_rings
from ringlab.topology.timing import group_cluster, link_loads

GB = 1e9
NVLINK2 = 25 * GB  # V100: 6 links, 300 GB/s both ways -> 25 GB/s per link per direction
PCIE3 = 16 * GB
# The DGX-1 V100 from the whitepaper's figure, as pairs: two quads fully connected, GPU i joined to i + 4;
# doubled: 0-3, 0-4, 1-2, 1-5, 2-3, 4-7, 5-6, 6-7 (nccl#671: GPU 0 -> 1, 2 once, 3, 4 twice; GPU 1 -> 2, 5 twice).
DOUBLE = {(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)}
SINGLE = {(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)}
MI300X_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "nccl" / "hisohara_ai_scripts_mi300x_8gpu_rccl_tests.txt"


def _links(a, b):
    pair = (min(a, b), max(a, b))
    return 2 if pair in DOUBLE else 1 if pair in SINGLE else 0


def test_dgx1_link_counts_are_the_cube_mesh():
    node = get_cluster("dgx1-v100")
    counts = node.link_counts
    want = np.array([[_links(a, b) for b in range(8)] for a in range(8)])
    assert (counts == want).all()
    assert (counts.sum(axis=1) == 6).all()  # 6 NVLink 2 links per V100
    assert int((counts > 0).sum()) // 2 == 16 and int((counts == 0).sum() - 8) // 2 == 12  # 16 linked, 12 not
    quads = [list(range(4)), list(range(4, 8))]
    assert all(counts[a, b] for q in quads for a in q for b in q if a != b)  # each quad fully connected
    assert all(counts[i, i + 4] for i in range(4))  # the cube's edges between the quads
    assert node.mesh_class == "nvlink" and set(node.links.cls.tolist()) == {"nvlink", "pcie", "nic"}


def test_dgx1_bandwidth_per_gpu_and_routes():
    node = get_cluster("dgx1-v100")
    assert node.nics_per_node * node.nic_gbps == 400 and node.pcie_bandwidth == PCIE3  # 4 x 100 Gb/s EDR
    links = node.links
    per_gpu = sum(links.bandwidth[node.link_id("nvlink", "tx", 0, a * 8 + b)] for a in [0] for b in range(8)
                  if _links(a, b))
    assert per_gpu == pytest.approx(6 * NVLINK2)  # 150 GB/s per GPU per direction
    hops, _ = node.route([0, 0, 0], [4, 1, 5])
    assert links.label(hops[0, 0]) == "node 0 nvlink gpu 0->gpu 4" and links.bandwidth[hops[0, 0]] == 2 * NVLINK2
    assert links.bandwidth[hops[1, 0]] == NVLINK2 and (hops[:2, 1:] == -1).all()
    assert [links.label(h) for h in hops[2, :2]] == ["node 0 gpu 0 pcie tx", "node 0 gpu 5 pcie rx"]  # no NVLink
    assert "NVLink mesh of 6 links per GPU" in node.describe() and "over PCIe" in node.describe()


def test_dgx1_rings_follow_nvlink_and_use_every_link_once_each_way():
    node = get_cluster("dgx1-v100")
    rings = mesh_rings(8, node.mesh_links)
    assert len(rings) == 6 == default_channels(node)
    used = np.zeros((8, 8), dtype=int)
    for ring in rings:
        assert sorted(ring) == list(range(8))
        for a, b in zip(ring, ring[1:] + ring[:1]):
            assert _links(a, b) > 0  # NCCL's rings use NVLink pairs only
            used[a, b] += 1
    assert (used == np.array([[_links(a, b) for b in range(8)] for a in range(8)])).all()


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter", "all_gather"])
def test_dgx1_ring_ceiling_is_six_links(collective):
    """Six rings, each on its own 25 GB/s link out of every GPU: busbw = 6 x 25 = 150 GB/s."""
    assert line_rate_busbw(collective, "ring_channels", get_cluster("dgx1-v100")) == pytest.approx(150 * GB)


def test_dgx1_rank_order_ring_and_all_to_all_cross_pcie():
    node = get_cluster("dgx1-v100")
    # rank order 0..7: 3 -> 4 and 7 -> 0 have no NVLink, so the flat ring runs at PCIe Gen3's 16 GB/s
    flat = link_loads(build_on_cluster("all_reduce", "ring", node), node, 8 * 1024).bytes
    assert flat[node.link_id("pcie", "tx", 0, 3)] > 0 and flat[node.link_id("pcie", "tx", 0, 7)] > 0
    # all-to-all: 3 of a GPU's 7 peers are unlinked, S/8 each over PCIe: t = 3 S / (8 x 16 GB/s)
    assert line_rate_busbw("all_to_all", "p2p", node) == pytest.approx(7 / 8 * 8 * PCIE3 / 3)


def test_dgx1_two_nodes_share_the_four_nics_evenly():
    """24 rings x 2 nodes: every (ring, exit GPU) pair once, so the four 12.5 GB/s NICs carry equal shares both
    ways: the ring ceiling is the node's 50 GB/s."""
    node = get_cluster("dgx1-v100", 2)
    assert default_channels(node) == 48
    assert line_rate_busbw("all_reduce", "ring_channels", node) == pytest.approx(50 * GB)


@given(size=st.integers(1, 8))
def test_a_part_of_a_dgx1_keeps_its_links(size):
    part = group_cluster(get_cluster("dgx1-v100"), size)
    want = np.array([[_links(a, b) for b in range(size)] for a in range(size)])
    assert (part.link_counts == want).all()
    ring = line_rate_busbw("all_reduce", "ring_channels", part) if size > 1 else None
    if size == 4:  # a quad: every GPU keeps 1 + 1 + 2 = 4 links, four rings: 100 GB/s
        assert ring == pytest.approx(4 * NVLINK2)
    if size > 1:
        assert ring <= 6 * NVLINK2 + 1


def test_mesh_links_are_checked():
    with pytest.raises(ValueError, match="mesh_links"):
        custom_cluster(1, 2, 1e9, fabric="mesh").__class__(**{**get_cluster("dgx1-v100").__dict__,
                                                               "mesh_links": ((0, 1), (2, 0))})
    with pytest.raises(ValueError, match="needs fabric='mesh'"):
        Cluster("x", 1, 2, "nvswitch", 1e9, 0, 0, 0, 0, 1e9, mesh_links=((0, 1), (1, 0)))
    with pytest.raises(ValueError, match="mesh_class"):
        Cluster("x", 1, 2, "mesh", 1e9, 0, 0, 0, 0, 1e9, mesh_class="infinity")


def test_explain_reads_8_v100_sxm2_as_a_dgx1():
    facts = Facts(collective="all_reduce", world_size=8, nodes=1, gpus_per_node=8, gpu="Tesla V100-SXM2-32GB")
    cluster, why = cluster_for(facts)
    assert why is None and cluster.mesh_links == get_cluster("dgx1-v100").mesh_links
    assert ceilings(facts)["ring_channels"] == pytest.approx(150 * GB)
    a2a = ceilings(Facts(collective="all_to_all", world_size=8, nodes=1, gpus_per_node=8, gpu="Tesla V100-SXM2-16GB"))
    assert a2a["p2p"] == pytest.approx(7 / 8 * 8 * PCIE3 / 3)  # not a switch's 7 x 150 / 7


def test_mi300x_published_run_is_between_the_old_and_the_new_ceiling():
    """rccl-tests on one 8x MI300X node (fixture, source in MANIFEST.json): 315.9 GB/s busbw, above the 4-link
    ring ceiling of 4 x 64 = 256 GB/s that 'no run can beat', below 7 x 64 = 448 GB/s of rings over all seven
    links, and below AMD's own ~48 GB/s usable per link after CRC and protocol (7 x 48 = 336 GB/s; ROCm blog
    'Understanding RCCL Bandwidth and xGMI Performance on AMD Instinct MI300X', 2025)."""
    run = read_texts([("mi300x", MI300X_FIXTURE.read_text())]).runs[0]
    peak = max(m.busbw for row in run.rows for m in row.measures()) * GB
    assert peak == pytest.approx(315.91 * GB)
    ceiling = line_rate_busbw("all_reduce", "ring_channels", get_cluster("mi300x-platform"))
    assert ceiling == pytest.approx(7 * 64 * GB)
    assert 4 * 64 * GB < peak < 7 * 48 * GB < ceiling
