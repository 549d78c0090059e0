"""Step-time terms one at a time, on a cluster built from round numbers so that each expected value is a
closed form: a GPU's point-to-point path (its NVLink port inside a node, its share of the node's NICs
across nodes), the PP messages on the fill and drain, the CP passes hidden behind attention, and the
window that hides one DDP all-reduce per step."""

from __future__ import annotations

import pytest

from ringlab.calc import MODELS
from ringlab.calc.training.layout import ParallelLayout, check_layout
from ringlab.calc.training.step import item_seconds, step_time
from ringlab.calc.training.traffic import TrafficItem, stage_traffic
from ringlab.topology import custom_cluster

GPU_BW, NIC_GBPS, GPU_LAT, NIC_LAT = 300e9, 200.0, 1e-6, 5e-6  # 8 NICs of 200 Gb/s = 25 GB/s per GPU
NIC_SHARE = NIC_GBPS * 1e9 / 8


def cluster(nodes: int, nic_gbps: float = NIC_GBPS, gpu_bw: float = GPU_BW):
    return custom_cluster(nodes, 8, gpu_bw, nics_per_node=8 if nodes > 1 else 0, nic_gbps=nic_gbps if nodes > 1 else 0,
                          gpu_latency=GPU_LAT, nic_latency=NIC_LAT, name="round numbers")


def _send(count: int, message: int) -> TrafficItem:
    return TrafficItem("pp", "send_recv", "forward", 2, count, message, count * message, "activations")


@pytest.mark.parametrize("tp, same_node", [(4, True), (8, False)])
def test_a_send_goes_at_the_nvlink_port_or_the_gpus_nic_share(tp, same_node):
    """PP pairs at stride tp: tp 4 x pp 2 fits one 8-GPU node; tp 8 puts the two stages on two nodes, where the GPU
    has one of the node's 8 NICs, not all of them."""
    layout = ParallelLayout(tp=tp, pp=2)
    c = cluster(2 if tp * 2 > 8 else 1)
    got = item_seconds(_send(10, 4_000_000), layout, c)
    latency, bandwidth = (GPU_LAT, GPU_BW) if same_node else (NIC_LAT, NIC_SHARE)
    assert got == pytest.approx(10 * latency + 10 * 4_000_000 / bandwidth, rel=1e-12)


def _step(model, layout, seq, mb, gb, c, strategy="ddp", **kw):
    batch = check_layout(model, layout, seq, mb, gb)
    traffic = [stage_traffic(model, layout, batch, s, strategy) for s in range(layout.pp)]
    return step_time(model, layout, batch, traffic, c, hardware="h100-sxm", strategy=strategy, **kw), batch


@pytest.mark.parametrize("pp, v", [(2, 1), (4, 1), (2, 2), (4, 2)])
def test_pp_exposes_one_message_per_boundary_each_way_on_fill_and_drain(pp, v):
    """1F1B: the first micro-batch's activations cross p - 1 boundaries before the last stage starts, the last
    one's gradients cross them back before the first stage ends; interleaving divides the hops' share of a
    stage by v. Those 2 (p - 1) / v messages lengthen every stage's step, the first and last included."""
    model = MODELS["llama-2-7b"]  # 32 layers
    layout = ParallelLayout(tp=8, pp=pp, virtual_stages=v)
    seq, mb = 1024, 1
    st, _ = _step(model, layout, seq, mb, 8, cluster(pp))
    message = seq * mb * model.hidden_size * 2  # bf16 hidden states of one micro-batch
    assert st.pp_exposed == pytest.approx(2 * (pp - 1) / v * (NIC_LAT + message / NIC_SHARE), rel=1e-12)


def test_no_pipeline_no_pp_term():
    st, _ = _step(MODELS["llama-2-7b"], ParallelLayout(tp=8), 1024, 1, 8, cluster(1))
    assert st.pp_exposed == 0


def _cp_seconds(model, layout, batch, c) -> float:
    """CP send/recv inside one node at stride tp: count x NVLink latency + bytes / NVLink port rate."""
    return sum(i.count * GPU_LAT + i.bytes_sent / c.gpu_bandwidth
               for i in stage_traffic(model, layout, batch, 0, "ddp") if i.dim == "cp")


def test_cp_is_exposed_only_beyond_the_attention_it_hides_behind():
    model = MODELS["llama-2-7b"]
    layout = ParallelLayout(tp=2, cp=4)
    fast = cluster(1)
    st, batch = _step(model, layout, 8192, 1, 2, fast)
    assert _cp_seconds(model, layout, batch, fast) > 0 and st.cp_exposed == 0  # NVLink passes hide entirely
    slow, slower = cluster(1, gpu_bw=1e9), cluster(1, gpu_bw=0.5e9)
    a, _ = _step(model, layout, 8192, 1, 2, slow)
    b, _ = _step(model, layout, 8192, 1, 2, slower)
    comm_a, comm_b = _cp_seconds(model, layout, batch, slow), _cp_seconds(model, layout, batch, slower)
    assert 0 < a.cp_exposed < comm_a  # part of it hidden: the attention compute of each ring step
    # the attention is the same, so every extra second of CP traffic is an extra second exposed
    assert b.cp_exposed - a.cp_exposed == pytest.approx(comm_b - comm_a, rel=1e-9)
    assert b.exposed_communication == pytest.approx(b.tp + b.ep + b.cp_exposed + b.pp_exposed + b.dp_exposed)


def test_ddp_hides_its_one_all_reduce_behind_one_micro_batch_only():
    """DDP (no_sync under accumulation) all-reduces once per step, overlapping the last backward: with 1 or 4
    micro-batches the same bytes meet the same window, so the exposed part is the same. ZeRO-2 reduce-scatters in
    every backward and hides behind all of them."""
    model = MODELS["llama-2-7b"]
    layout = ParallelLayout(dp=16)
    slow = cluster(2, nic_gbps=10.0)
    one, _ = _step(model, layout, 2048, 1, 16, slow)
    four, _ = _step(model, layout, 2048, 1, 64, slow)
    assert one.dp_exposed > 0
    assert four.dp_exposed == pytest.approx(one.dp_exposed, rel=1e-9)
    # the exposed part is the all-reduce less one micro-batch's compute and memory-bound kernels
    batch = check_layout(model, layout, 2048, 1, 16)
    dp = sum(item_seconds(i, layout, slow) for i in stage_traffic(model, layout, batch, 0, "ddp") if i.dim == "dp")
    assert one.dp_exposed < dp and dp - one.dp_exposed >= one.compute


@pytest.mark.parametrize("collective, steps", [("all_reduce", 2 * 7), ("all_gather", 7), ("reduce_scatter", 7)])
def test_every_call_of_a_ring_collective_pays_its_steps_latency(collective, steps):
    """A TP group of 8 in one NVSwitch node: each of the calls is a ring of 2 (n - 1) steps (all-reduce) or n - 1
    (gather, scatter), each step one NVLink hop's latency; the bytes go at the GPU's port rate."""
    layout = ParallelLayout(tp=8)
    item = TrafficItem("tp", collective, "forward", 8, 12, 8_000_000, 12 * 7_000_000 * steps // 7, "activations")
    got = item_seconds(item, layout, cluster(1))
    assert got == pytest.approx(12 * steps * GPU_LAT + item.bytes_sent / GPU_BW, rel=1e-9)
