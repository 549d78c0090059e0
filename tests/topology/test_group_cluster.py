"""One home for "the part of a cluster a group runs on" (issue 34): timing.group_cluster, which
calc.training.step.resolve_cluster asks, keeps the NICs the group's GPUs are wired to."""

import pytest

from ringlab.calc.training.step import resolve_cluster
from ringlab.topology import PRESETS, get_cluster
from ringlab.topology.timing import group_cluster


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("size", [1, 2, 3, 5, 6, 7, 8])
def test_a_part_of_a_node_keeps_the_nics_its_gpus_use(preset, size):
    """Counted independently: the distinct NIC ports ``port_of_gpu`` assigns to GPUs 0 .. size-1, each port being
    one NIC or (more NICs than GPUs) nics / G striped NICs."""
    node = get_cluster(preset)
    if size > node.gpus_per_node:
        return
    part = group_cluster(node, size)
    ports = {int(p) for p in node.port_of_gpu(range(size))}
    per_port = node.nics_per_node // node.gpus_per_node if node.nics_per_node > node.gpus_per_node else 1
    assert part.nics_per_node == len(ports) * per_port
    assert part.nodes == 1 and part.gpus_per_node == size
    assert resolve_cluster(preset, size) == part  # one rule for both


def test_pcie_box_groups_share_nics_as_wired():
    """pcie-8gpu: 4 NICs for 8 GPUs, GPU i on NIC i // 2. GPUs 0-2 use NICs 0 and 1, so 2 NICs, not 3; aws-p5: 4 EFA
    devices per GPU stay striped, 12 for 3 GPUs (the old step.resolve_cluster gave 3)."""
    assert group_cluster(get_cluster("pcie-8gpu"), 3).nics_per_node == 2
    assert group_cluster(get_cluster("aws-p5"), 3).nics_per_node == 12
    assert resolve_cluster("aws-p5", 3).port_bandwidth == pytest.approx(4 * 12.5e9)


def test_whole_nodes_and_refusals():
    assert resolve_cluster("dgx-h100", 64) == get_cluster("dgx-h100", 8)
    with pytest.raises(ValueError, match="do not fill whole 8-GPU nodes"):
        resolve_cluster("dgx-h100", 12)
