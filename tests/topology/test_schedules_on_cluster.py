"""Every topology-aware schedule at 1, 2, 3 and 8 nodes, odd GPU counts included: results against the direct
computation, bytes per link against the closed forms, the links' sums against the bytes moved."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.sim.on_cluster import expected_slots, run_on_cluster, verify_on_cluster
from ringlab.sim.interpret import interpret
from ringlab.topology import CLUSTER_ALGORITHMS, build_on_cluster, custom_cluster, get_cluster, link_loads


def _shaped(preset: str, nodes: int, gpus: int | None):
    c = get_cluster(preset, nodes)
    if gpus is None:
        return c
    nics = c.nics_per_node if c.nics_per_node <= c.gpus_per_node else gpus * (c.nics_per_node // c.gpus_per_node)
    return replace(c, gpus_per_node=gpus, nics_per_node=min(nics, gpus) if nics <= c.gpus_per_node else nics)


CASES = [(coll, name) for coll, name in CLUSTER_ALGORITHMS]
PRESETS = ["dgx-h100", "mi300x-platform", "pcie-8gpu", "aws-p5"]


def _runs_on(shapes):
    """pytest params ``(*shape, coll, name)`` for the algorithms available on each shape: an algorithm that does not
    apply (NVLS without NVSwitch, SHARP without it in the fabric...) is not generated, so a skip means something."""
    out = []
    for shape in shapes:
        cluster = shape[-1]
        for coll, name in CASES:
            if not CLUSTER_ALGORITHMS[(coll, name)].unavailable(cluster):
                out.append(pytest.param(*shape[:-1], coll, name, id="-".join(map(str, (*shape[:-1], coll, name)))))
    return out


EVERYWHERE = _runs_on([(preset, nodes, gpus, _shaped(preset, nodes, gpus))
                       for preset in PRESETS for gpus in (None, 3, 5) for nodes in (1, 2, 3, 8)])


def test_every_algorithm_runs_somewhere_in_the_sweep():
    assert {(p.values[3], p.values[4]) for p in EVERYWHERE} == set(CASES)


@pytest.mark.slow  # a large sweep: every available algorithm on 48 cluster shapes, 2 sizes each
@pytest.mark.parametrize("preset, nodes, gpus, coll, name", EVERYWHERE)
def test_topology_schedules_check_out_everywhere(preset, nodes, gpus, coll, name):
    cluster = _shaped(preset, nodes, gpus)
    for numel in (1001, 7):  # uneven chunks, and fewer elements than chunks
        check = verify_on_cluster(coll, name, cluster, numel=numel, seed=nodes)
        assert check.ok, check


@pytest.mark.parametrize("name", ["ring", "double_binary_tree", "rabenseifner", "direct"])
@pytest.mark.parametrize("nodes", [1, 2, 3])
def test_flat_algorithms_routed_on_a_cluster_count_every_link(name, nodes):
    check = verify_on_cluster("all_reduce", name, get_cluster("dgx-h100", nodes), numel=333)
    assert check.ok and check.closed_form is None


def _switched(nodes: int, gpus: int):
    return custom_cluster(nodes, gpus, 100e9, nics_per_node=gpus, nic_gbps=400, nvls=True, sharp=True)


@pytest.mark.parametrize("nodes, gpus, coll, name",
                         _runs_on([(nodes, gpus, _switched(nodes, gpus)) for nodes, gpus in [(1, 3), (2, 3), (3, 2)]]))
def test_executor_agrees_with_the_one_transfer_interpreter(nodes, gpus, coll, name):
    cluster = _switched(nodes, gpus)
    sched = build_on_cluster(coll, name, cluster, channels=2)
    x = np.random.default_rng(0).integers(-50, 50, size=(cluster.world_size, 29))
    outputs, sent, received = interpret(sched, x)
    run = run_on_cluster(sched, cluster, x)
    bounds = np.concatenate([[0], np.cumsum([len(a) for a in np.array_split(np.zeros(29), sched.num_chunks)])])
    for (r, c), value in outputs.items():
        assert np.array_equal(run.out[r, bounds[c]:bounds[c + 1]], value)
    assert np.array_equal(run.counts.bytes_sent, sent.sum(axis=0))
    assert np.array_equal(run.counts.bytes_received, received.sum(axis=0))
    mask, expected = expected_slots(sched, x)
    assert np.array_equal(run.out[mask], expected[mask])


@given(nodes=st.integers(1, 4), gpus=st.integers(1, 6), channels=st.integers(1, 7), numel=st.integers(0, 300),
       coll=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]), mesh=st.booleans())
def test_ring_channels_on_any_shape(nodes, gpus, channels, numel, coll, mesh):
    cluster = custom_cluster(nodes, gpus, 64e9, nics_per_node=max(1, gpus // 2), nic_gbps=200,
                             fabric="mesh" if mesh else "nvswitch")
    check = verify_on_cluster(coll, "ring_channels", cluster, numel=numel, channels=channels)
    assert check.ok, check


@given(nodes=st.integers(1, 5), gpus=st.integers(1, 5), numel=st.integers(0, 200),
       name=st.sampled_from(["hierarchical", "sharp", "tree_chains", "nvls_tree", "nvls"]))
def test_hierarchy_trees_and_switch_reductions_on_any_shape(nodes, gpus, numel, name):
    cluster = custom_cluster(nodes, gpus, 450e9, nics_per_node=gpus, nic_gbps=400, nvls=True, sharp=True)
    if CLUSTER_ALGORITHMS[("all_reduce", name)].unavailable(cluster):
        return
    check = verify_on_cluster("all_reduce", name, cluster, numel=numel, channels=2)
    assert check.ok, check


def test_counting_from_the_schedule_needs_the_matching_cluster():
    sched = build_on_cluster("all_reduce", "ring_channels", get_cluster("dgx-h100", 2))
    with pytest.raises(ValueError, match="ranks"):
        link_loads(sched, get_cluster("dgx-h100", 1), 100)
    with pytest.raises(ValueError, match="no in-switch reduction"):
        build_on_cluster("all_reduce", "nvls", get_cluster("mi300x-platform"))
    with pytest.raises(ValueError, match="one of"):
        build_on_cluster("all_reduce", "rings", get_cluster("dgx-h100"))
