"""Presets against their datasheets, routing against the wiring it describes, and bad input."""

import numpy as np
import pytest

from ringlab.topology import PRESETS, Cluster, custom_cluster, get_cluster


def test_every_preset_cites_a_source_and_describes_itself_in_gbps_and_gbytes():
    for name, c in PRESETS.items():
        assert c.source and c.name == name
        text = c.describe()
        assert f"{c.nic_gbps:g} Gb/s" in text and f"{c.nic_bandwidth / 1e9:g} GB/s" in text


@pytest.mark.parametrize("name, gpus, per_gpu, node_net", [
    ("dgx-h100", 8, 450e9, 400e9),  # NVLink 4 900 GB/s both ways; 8 x 400 Gb/s
    ("dgx-a100", 8, 300e9, 200e9),  # NVLink 3 600 GB/s both ways; 8 x HDR 200 Gb/s
    ("hgx-h200", 8, 450e9, 400e9),
    ("dgx-b200", 8, 900e9, 400e9),  # NVLink 5 1.8 TB/s both ways
    ("gb200-nvl72", 72, 900e9, 72 * 50e9),
    ("aws-p5", 8, 450e9, 400e9),  # 3200 Gbps of EFA
    ("pcie-8gpu", 8, 32e9, 200e9),
])
def test_preset_numbers_match_the_datasheets(name, gpus, per_gpu, node_net):
    c = PRESETS[name]
    assert c.gpus_per_node == gpus and c.gpu_bandwidth == per_gpu
    assert c.node_network_bandwidth == pytest.approx(node_net)


def test_mi300x_is_a_mesh_of_seven_64_gbps_links_per_gpu():
    c = PRESETS["mi300x-platform"]
    assert c.fabric == "mesh" and c.gpu_bandwidth == 64e9
    assert (c.gpus_per_node - 1) * c.gpu_bandwidth * 2 == 896e9  # AMD: 896 GB/s aggregate bidirectional


def test_nic_rates_are_sold_in_bits():
    assert get_cluster("dgx-h100").nic_bandwidth == 50e9  # 400 Gb/s = 50 GB/s
    p5 = get_cluster("aws-p5", 2)
    assert p5.nic_bandwidth == 12.5e9 and p5.ports_per_node == 8 and p5.port_bandwidth == 50e9


def test_routes_inside_a_node_use_the_switch_ports_and_between_nodes_the_rails():
    c = get_cluster("dgx-h100", 2)
    links = c.links
    hops, switch_at = c.route([0, 3], [5, 11])  # 0 -> 5 inside node 0; 3 -> 11 is node 0 gpu 3 -> node 1 gpu 3
    assert [links.label(h) for h in hops[0] if h >= 0] == ["node 0 gpu 0 nvlink tx", "node 0 gpu 5 nvlink rx"]
    assert [links.label(h) for h in hops[1]] == ["node 0 gpu 3 pcie tx", "node 0 nic 3 tx", "node 1 nic 3 rx",
                                                 "node 1 gpu 3 pcie rx"]
    assert switch_at.tolist() == [1, 2]


def test_mesh_routes_are_one_link_and_fewer_nics_are_shared_evenly():
    mesh = get_cluster("mi300x-platform")
    hops, switch_at = mesh.route([2], [5])
    assert mesh.links.label(hops[0, 0]) == "node 0 xgmi gpu 2->gpu 5" and (hops[0, 1:] == -1).all()
    assert switch_at[0] == -1
    four = custom_cluster(2, 8, 300e9, nics_per_node=4, nic_gbps=200)  # DGX A100-like with 4 NICs
    assert four.port_of_gpu(np.arange(8)).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


@pytest.mark.parametrize("kwargs, match", [
    (dict(nodes=0), "nodes"), (dict(nodes=2, nics_per_node=0), "nics_per_node"),
    (dict(fabric="torus"), "fabric"), (dict(gpu_bandwidth=0), "gpu_bandwidth"),
    (dict(nics_per_node=12), "multiple"), (dict(fabric="mesh", nvls=True), "nvls"),
    (dict(nodes=True), "nodes"),
])
def test_bad_clusters_are_refused_with_the_argument_named(kwargs, match):
    args = dict(name="x", nodes=1, gpus_per_node=8, fabric="nvswitch", gpu_bandwidth=1e9, gpu_latency=0,
                nics_per_node=8, nic_gbps=400, nic_latency=0, pcie_bandwidth=1e9)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        Cluster(**args)


def test_unknown_preset_names_its_close_match():
    with pytest.raises(ValueError, match="did you mean dgx-h100"):
        get_cluster("dgx-h10")


def test_a_rank_cannot_route_to_itself_or_off_the_cluster():
    c = get_cluster("dgx-h100", 1)
    with pytest.raises(ValueError, match="itself"):
        c.route([1], [1])
    with pytest.raises(ValueError, match="out of range"):
        c.route([0], [8])
