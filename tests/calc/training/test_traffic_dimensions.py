"""Each dimension of a stage's traffic, and each part of grad_comm_bytes, alone against hand counts."""

import pytest

from ringlab.calc import ModelConfig
from ringlab.calc.comm import call_counts, grad_comm_bytes, model_states, shard_group_size
from ringlab.calc.training.layout import ParallelLayout, check_layout
from ringlab.calc.training.memory import Precision
from ringlab.calc.training.traffic import (StageShape, cp_traffic, dp_traffic, ep_traffic, pp_traffic, stage_traffic,
                                           tp_traffic)

# h 64, 6 layers, 8 heads of 8 (4 KV heads), 8 experts top-2: messages divide evenly by tp, cp, ep <= 4.
MOE = ModelConfig.from_hf_config(dict(
    model_type="mixtral", hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4,
    num_hidden_layers=6, vocab_size=1000, num_local_experts=8, num_experts_per_tok=2), name="moe-6")
DENSE = MOE.replace(num_local_experts=None, num_experts_per_tok=None, name="dense-6")
SEQ, MB, E = 64, 2, 2  # tokens per sequence, sequences per micro-batch, bytes per bf16 value


def _shape(model, layout, stage=0, microbatches=4, recompute="none"):
    batch = check_layout(model, layout, SEQ, MB, MB * layout.dp * microbatches)
    return batch, StageShape.of(model, layout, batch, stage, recompute)


def _one(items, collective, phase):
    (item,) = [i for i in items if (i.collective, i.phase) == (collective, phase)]
    return item


def test_tp_without_sp_is_two_all_reduces_per_block_of_ring_bytes():
    layout = ParallelLayout(dp=1, tp=4, pp=3)
    _, shape = _shape(DENSE, layout, stage=1)  # a middle stage: no embedding, no LM head
    hidden_bytes = MB * SEQ * 64 * E
    blocks = 2 * 2  # 2 layers per stage, attention + MLP each
    items = tp_traffic(shape)
    assert {(i.collective, i.phase) for i in items} == {("all_reduce", "forward"), ("all_reduce", "backward")}
    for item in items:
        assert item.count == 4 * blocks
        assert item.bytes_per_call == 2 * 3 * hidden_bytes // 4  # ring: 2 (t - 1) / t of the message


def test_tp_recompute_repeats_the_forward_and_ends_add_their_own():
    layout = ParallelLayout(dp=1, tp=2, pp=1, sequence_parallel=True)
    _, shape = _shape(DENSE, layout, recompute="full")
    items = tp_traffic(shape)
    assert _one([i for i in items if "recomputed" in i.what], "all_gather", "recompute").count == 4 * 12
    ends = [i.what for i in items if "embedding" in i.what or "LM head" in i.what]
    assert len(ends) == 5  # embedding RS + AG, LM head AG, AG again, RS (one stage is first and last)


@pytest.mark.parametrize("stage, forward, backward", [(0, 6 * 2, 6 * 1), (1, 6 * 2, 6 * 2), (2, 6 * 1, 6 * 2)])
def test_pp_sends_per_micro_batch_and_virtual_stage(stage, forward, backward):
    """m = 6 micro-batches, v = 2 chunks per stage: the first stage sends no gradient, the last no activation,
    except between their own chunks."""
    layout = ParallelLayout(dp=1, pp=3, virtual_stages=2)
    _, shape = _shape(DENSE, layout, stage=stage, microbatches=6)
    items = pp_traffic(shape)
    assert (_one(items, "send_recv", "forward").count, _one(items, "send_recv", "backward").count) == (forward,
                                                                                                        backward)
    assert all(i.bytes_per_call == MB * SEQ * 64 * E for i in items)


def test_pp_is_empty_on_one_stage_and_cp_on_one_rank():
    _, shape = _shape(DENSE, ParallelLayout(dp=2))
    assert pp_traffic(shape) == [] and cp_traffic(shape) == [] and ep_traffic(shape) == []


def test_cp_passes_kv_chunks_round_the_ring():
    layout = ParallelLayout(dp=1, tp=2, cp=4)
    _, shape = _shape(DENSE, layout)
    chunk = MB * (SEQ // 4) * (4 // 2) * (8 + 8) * E  # tokens on the rank x kv heads per tp rank x (d_k + d_v)
    items = cp_traffic(shape)
    assert _one(items, "send_recv", "forward").count == 3 * 4 * 6  # (cp - 1) x m x attention layers
    assert _one(items, "send_recv", "backward").count == 2 * 3 * 4 * 6
    assert all(i.bytes_per_call == chunk for i in items)


def test_ep_is_four_all_to_alls_per_moe_layer_and_imbalance_scales_the_busiest():
    layout = ParallelLayout(dp=4, ep=4)
    _, shape = _shape(MOE, layout)
    routed_bytes = MB * SEQ * 2 * 64 * E  # tokens x top_k x h
    uniform = ep_traffic(shape)
    assert [i.count for i in uniform] == [2 * 4 * 6, 2 * 4 * 6]
    assert all(i.bytes_per_call == 3 * routed_bytes // 4 for i in uniform)  # (ep - 1) / ep leaves the rank
    skewed = ep_traffic(shape, load_imbalance=2.0)
    assert [i.bytes_sent for i in skewed] == [2 * i.bytes_sent for i in uniform]
    with pytest.raises(ValueError, match="load_imbalance"):
        ep_traffic(shape, load_imbalance=5.0)


def test_dp_is_grad_comm_bytes_of_the_stage_and_parameters_travel_in_their_dtype():
    layout = ParallelLayout(dp=4, pp=2)
    _, shape = _shape(DENSE, layout, stage=1)
    precision = Precision(grad_dtype="fp32")
    items = dp_traffic(shape, "zero1", precision)
    assert len(items) == 2
    grads, params = _one(items, "reduce_scatter", "backward"), _one(items, "all_gather", "step")
    assert params.message_bytes * 2 == grads.message_bytes  # bf16 parameters, fp32 gradients
    assert dp_traffic(_shape(DENSE, ParallelLayout(dp=1, tp=2))[1]) == []


def test_stage_traffic_is_the_dimensions_in_order():
    layout = ParallelLayout(dp=2, tp=2, pp=2, cp=2, ep=2, sequence_parallel=True)
    batch, shape = _shape(MOE, layout, stage=1, recompute="full")
    whole = stage_traffic(MOE, layout, batch, 1, "zero2", recompute="full", load_imbalance=1.5)
    parts = (tp_traffic(shape) + pp_traffic(shape) + cp_traffic(shape) + ep_traffic(shape, 1.5)
             + dp_traffic(shape, "zero2"))
    assert whole == tuple(parts)
    assert [i.dim for i in whole] == sorted((i.dim for i in whole), key=["tp", "pp", "cp", "ep", "dp", "edp"].index)


def test_call_counts_follow_the_fsdp_version():
    k = 4
    assert call_counts("fsdp_shard_grad_op", k, no_sync=True) == {
        "once": 1, "micro_batches": k, "grad_syncs": 1, "forward_gathers": 1, "backward_gathers": 0}
    full = call_counts("fsdp_full_shard", k, no_sync=True)
    assert (full["forward_gathers"], full["backward_gathers"]) == (k, k)  # resharded after every forward
    assert call_counts("fsdp_shard_grad_op", k, no_sync=True, fsdp_api="fsdp2")["forward_gathers"] == k
    kept = call_counts("fsdp_shard_grad_op", k, True, fsdp_api="fsdp2", reshard_after_backward=False)
    assert kept["forward_gathers"] == 1
    assert call_counts("ddp", k, no_sync=False)["grad_syncs"] == k
    with pytest.raises(ValueError, match="FSDP2's flag"):
        call_counts("ddp", k, True, fsdp_api="fsdp2", reshard_after_backward=False)


def test_shard_group_size_by_strategy():
    assert (shard_group_size("ddp", 64), shard_group_size("zero1", 64), shard_group_size("hybrid_shard", 64, 8)) \
        == (1, 64, 8)
    with pytest.raises(ValueError, match="needs gpus_per_node"):
        shard_group_size("hybrid_shard", 64)
    with pytest.raises(ValueError, match="must divide"):
        shard_group_size("hybrid_shard", 64, 6)


@pytest.mark.parametrize("strategy, total", [("ddp", 16 * 7_500_000_000),
                                             ("zero1", 4 * 7_500_000_000 + 12 * 117_187_500),
                                             ("zero2", 2 * 7_500_000_000 + 14 * 117_187_500),
                                             ("fsdp_full_shard", 16 * 117_187_500)])
def test_model_states_are_the_zero_papers_figure_1(strategy, total):
    """ZeRO (Rajbhandari et al. 2020) fig. 1: 7.5e9 parameters on 64 GPUs, 2 + 2 + 12 bytes per parameter."""
    group = shard_group_size(strategy, 64)
    states, _ = model_states(strategy, 7_500_000_000, group, 2, 12, grad_accum_steps=1, no_sync=True)
    assert states.total == total
    assert states == grad_comm_bytes(strategy, 7_500_000_000, 64).memory
