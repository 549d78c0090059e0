"""Step time and MFU: placement of groups on the cluster, closed-form ends, consistency with calc comm."""

import pytest

from ringlab.calc import MODELS, grad_comm_bytes, peak_flops
from ringlab.calc.training.flops import step_flops
from ringlab.calc.training.layout import ParallelLayout, check_layout
from ringlab.calc.training.step import group_subcluster, item_seconds, resolve_cluster, step_time
from ringlab.calc.training.traffic import stage_traffic
from ringlab.topology import get_cluster


def _time(model, layout, seq, mb, gb, topology="dgx-h100", strategy="zero1", **kw):
    batch = check_layout(model, layout, seq, mb, gb)
    traffic = [stage_traffic(model, layout, batch, s, strategy) for s in range(layout.pp)]
    return step_time(model, layout, batch, traffic, topology, strategy=strategy, **kw)


def test_group_placement():
    c = get_cluster("dgx-h100", 4)
    inside = group_subcluster(c, 8, 1)
    assert (inside.nodes, inside.gpus_per_node) == (1, 8)
    rail = group_subcluster(c, 4, 8)  # DP across 4 nodes, one GPU each, on its own rail
    assert (rail.nodes, rail.gpus_per_node) == (4, 1)
    assert rail.node_network_bandwidth == pytest.approx(c.node_network_bandwidth / 8)
    mixed = group_subcluster(c, 8, 2)  # 4 members per node, two groups share a node's NICs
    assert (mixed.nodes, mixed.gpus_per_node) == (2, 4)
    assert mixed.node_network_bandwidth == pytest.approx(c.node_network_bandwidth / 2)
    with pytest.raises(ValueError, match="tile"):
        group_subcluster(c, 3, 1)


def test_one_gpu_runs_its_matmuls_at_the_assumed_efficiency():
    m = MODELS["llama-2-7b"]
    st = _time(m, ParallelLayout(), 2048, 1, 4, strategy="ddp", compute_efficiency=0.6)
    f = step_flops(m, 2048, 4)
    peak = peak_flops("h100-sxm")
    assert st.compute == pytest.approx(f.model_flops / (0.6 * peak))
    assert st.step_time == pytest.approx(st.compute + st.memory_bound)  # plus the memory-bound kernels
    assert st.mfu == pytest.approx(0.6 * st.compute / st.step_time) and st.tp == st.dp_exposed == st.bubble == 0


def test_world_dp_time_equals_calc_comm_on_the_cluster():
    """DP over every GPU of 2 nodes: the same rings `ringlab calc comm --topology` times."""
    m = MODELS["llama-2-7b"]
    lay = ParallelLayout(dp=16)
    batch = check_layout(m, lay, 1024, 1, 16)
    items = [i for i in stage_traffic(m, lay, batch, 0, "ddp") if i.dim == "dp"]
    cluster = resolve_cluster("dgx-h100", 16)
    ours = sum(item_seconds(i, lay, cluster) for i in items)
    theirs = grad_comm_bytes("ddp", m.param_count(), 16, "bf16").time_on_cluster(cluster)
    assert ours == pytest.approx(theirs, rel=1e-9)


def test_bubble_is_the_1f1b_fraction():
    from ringlab.calc.training.kernels import optimizer_bytes_per_param
    from ringlab.calc.training.memory import model_state_memory

    m = MODELS["llama-2-13b"]  # 40 layers: 4 stages of 10
    lay = ParallelLayout(pp=4)
    st = _time(m, lay, 1024, 1, 8, strategy="ddp")
    states = model_state_memory(m, lay, "ddp")[st.stage]
    optimizer = states.optimizer_states // 12 * optimizer_bytes_per_param() / st.hbm_bandwidth  # once per step, no bubble
    assert st.bubble == pytest.approx(3 / 8 * (st.compute + st.memory_bound - optimizer))


def test_tp_across_nodes_is_timed_on_the_nics():
    """TP inside one NVLink domain rides NVLink; TP over two nodes crosses the NICs (P12: about 1.2x for
    rings that spread over all rails; a single rail would be far worse)."""
    m = MODELS["llama-2-70b"]
    lay8, lay16 = ParallelLayout(tp=8, dp=2), ParallelLayout(tp=16)
    inside = _time(m, lay8, 4096, 1, 2)
    across = _time(m, lay16, 4096, 1, 1)

    def tp_bytes(lay, gb):
        batch = check_layout(m, lay, 4096, 1, gb)
        return sum(i.bytes_sent for i in stage_traffic(m, lay, batch, 0, "zero1") if i.dim == "tp")

    per_byte_inside = inside.tp / tp_bytes(lay8, 2)
    per_byte_across = across.tp / tp_bytes(lay16, 1)
    assert 1.05 < per_byte_across / per_byte_inside < 2


def test_dp_exposed_zero_when_compute_hides_it_and_growing_otherwise():
    m = MODELS["llama-2-7b"]
    hidden = _time(m, ParallelLayout(dp=16), 4096, 4, 64, strategy="ddp")
    assert hidden.dp_exposed == 0
    # tiny micro-batches: the all-reduce outlasts one micro-batch's compute and shows
    short = _time(m, ParallelLayout(dp=16), 128, 1, 16, strategy="ddp")
    shorter = _time(m, ParallelLayout(dp=16), 64, 1, 16, strategy="ddp")
    assert 0 < short.dp_exposed < shorter.dp_exposed


def test_errors():
    m = MODELS["llama-2-7b"]
    with pytest.raises(ValueError, match="compute_efficiency"):
        _time(m, ParallelLayout(), 128, 1, 1, compute_efficiency=1.5)
    with pytest.raises(ValueError, match="unknown topology"):
        _time(m, ParallelLayout(), 128, 1, 1, topology="dgx-z100")
    with pytest.raises(ValueError, match="whole"):
        _time(m, ParallelLayout(dp=12), 128, 1, 12)


def test_placement_says_which_dimension_stays_in_the_nvlink_domain():
    from ringlab.calc.training.step import dimension_placement

    lay = ParallelLayout(dp=4, tp=4, pp=2, cp=2)  # 64 GPUs on 8 DGX H100 nodes
    where = dimension_placement(lay, resolve_cluster("dgx-h100", lay.world_size))
    assert where == {"tp": "NVLink, 4 GPUs in one node", "cp": "NVLink, 2 GPUs in one node",
                     "dp": "network: 4 nodes, 1 GPU each on its rail", "pp": "network: 2 nodes, 1 GPU each on its rail"}
    mixed = dimension_placement(ParallelLayout(dp=8, tp=2), resolve_cluster("dgx-h100", 16))
    assert mixed["dp"] == "network: 2 nodes, 4 GPUs each"
