"""``ring_link`` routes rings on many identical nodes at ``RING_NODES`` nodes: the per-step latency and
bandwidth it returns must equal those of the full ring, routed here directly with the same functions."""

import pytest

from ringlab.calc.training.step import group_subcluster
from ringlab.topology import get_cluster
from ringlab.topology.algorithms import build_on_cluster
from ringlab.topology.presets import PRESETS
from ringlab.topology.timing import RING_NODES, linear_time, ring_link
from ringlab.collectives.cost import bus_factor


def _full(cluster, collective):
    sched = build_on_cluster(collective, "ring_channels", cluster)
    a, b, _ = linear_time(sched, cluster)
    return a / sched.num_steps, bus_factor(collective, cluster.world_size) / b


_CASES = [(p, c) for p in sorted(PRESETS) for c in ("all_reduce", "reduce_scatter", "all_gather")
          if get_cluster(p).gpus_per_node <= 8 or c == "all_gather"]  # 72-GPU nodes: one (the quickest to route)


@pytest.mark.parametrize("preset, collective", _CASES)
def test_ring_on_many_nodes_equals_the_full_route(preset, collective):
    base = get_cluster(preset)
    for nodes in (RING_NODES + 1, 2 * RING_NODES + 1) if base.gpus_per_node <= 8 else (RING_NODES + 1,):
        cluster = base.with_nodes(nodes)
        link = ring_link(cluster, collective)
        alpha, bandwidth = _full(cluster, collective)
        assert link.alpha == pytest.approx(alpha, rel=1e-12)
        assert link.bandwidth == pytest.approx(bandwidth, rel=1e-12)


@pytest.mark.parametrize("size, stride", [(16, 8), (24, 2), (12, 4), (40, 1)])
def test_rail_and_shared_nic_groups_equal_the_full_route(size, stride):
    """The sub-clusters ``calc train`` times DP and PP groups on (one GPU per node on its rail, or a few per node)."""
    sub = group_subcluster(get_cluster("dgx-h100").with_nodes(64), size, stride)
    assert sub.nodes > RING_NODES
    for collective in ("all_reduce", "all_gather"):
        link = ring_link(sub, collective)
        alpha, bandwidth = _full(sub, collective)
        assert (link.alpha, link.bandwidth) == (pytest.approx(alpha, rel=1e-12), pytest.approx(bandwidth, rel=1e-12))
