"""Traffic per step against ringlab's own collectives (simulated on arrays) and hand counts per layer."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc import MODELS, ModelConfig, grad_comm_bytes
from ringlab.calc.training.layout import ParallelLayout, check_layout
from ringlab.calc.training.memory import Precision, stage_params
from ringlab.calc.training.traffic import bytes_by_dimension, stage_traffic
from ringlab.collectives import pairwise_all_to_all
from ringlab.sim import all_gather, reduce_scatter, ring_allreduce, run_schedule

# A small MoE model so that messages are small enough to simulate: h 64, 4 layers, 8 experts, top-2.
TINY_MOE = ModelConfig.from_hf_config(dict(
    model_type="mixtral", hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4,
    num_hidden_layers=4, vocab_size=1000, num_local_experts=8, num_experts_per_tok=2), name="tiny-moe")
TINY = TINY_MOE.replace(num_local_experts=None, num_experts_per_tok=None, name="tiny")


def _items(model, layout, seq=32, mb=1, gb=None, stage=0, **kw):
    batch = check_layout(model, layout, seq, mb, gb or mb * layout.dp * 2)
    return batch, stage_traffic(model, layout, batch, stage, **kw)


def _pick(items, dim, collective, phase):
    (item,) = [i for i in items if (i.dim, i.collective, i.phase) == (dim, collective, phase)
               and "embedding" not in i.what and "LM head" not in i.what]
    return item


def _halves(numel, n):
    return np.ones((n, numel), dtype=np.float16)


@pytest.mark.parametrize("tp", [2, 3, 4])
def test_tp_all_reduce_bytes_are_what_the_ring_moves(tp):
    m = TINY.replace(num_attention_heads=12, num_key_value_heads=12, hidden_size=60, head_dim=5)
    batch, items = _items(m, ParallelLayout(tp=tp), seq=30)
    fwd = _pick(items, "tp", "all_reduce", "forward")
    numel = 30 * 60  # b x s x h of one micro-batch
    assert fwd.message_bytes == 2 * numel
    simulated = ring_allreduce(_halves(numel, tp)).traffic.bytes_sent.max()
    assert fwd.bytes_per_call == simulated
    # two blocks per layer, forward and backward, for every micro-batch: 4 all-reduces per layer, not 2
    assert fwd.count == _pick(items, "tp", "all_reduce", "backward").count == 2 * 4 * batch.num_microbatches


def test_sequence_parallel_collectives_are_what_the_ring_moves():
    tp = 4
    batch, items = _items(TINY, ParallelLayout(tp=tp, sequence_parallel=True), seq=32)
    numel = 32 * 64
    rs = _pick(items, "tp", "reduce_scatter", "forward")
    ag = _pick(items, "tp", "all_gather", "forward")
    assert rs.bytes_per_call == reduce_scatter(_halves(numel, tp)).traffic.bytes_sent.max()
    assert ag.bytes_per_call == all_gather(_halves(numel // tp, tp)).traffic.bytes_sent.max()
    # RS + AG per block move what one all-reduce moves: SP costs no extra bandwidth in forward
    assert rs.bytes_per_call + ag.bytes_per_call == ring_allreduce(_halves(numel, tp)).traffic.bytes_sent.max()
    # backward: RS + AG, and the input gathered again for the weight gradient
    assert _pick(items, "tp", "all_gather", "backward").count == 2 * rs.count


def test_full_recompute_repeats_forward_collectives():
    lay = ParallelLayout(tp=2, dp=4, ep=4)
    _, plain = _items(TINY_MOE, lay)
    _, again = _items(TINY_MOE, lay, recompute="full")
    assert _pick(again, "tp", "all_reduce", "recompute").count == _pick(plain, "tp", "all_reduce", "forward").count
    assert _pick(again, "ep", "all_to_all", "recompute").count == _pick(plain, "ep", "all_to_all", "forward").count
    _, selective = _items(TINY_MOE, lay, recompute="selective")
    assert bytes_by_dimension(selective) == bytes_by_dimension(plain)


@pytest.mark.parametrize("ep", [2, 4, 8])
def test_ep_all_to_all_is_four_per_moe_layer_and_matches_the_schedule(ep):
    batch, items = _items(TINY_MOE, ParallelLayout(dp=ep, ep=ep), seq=48)
    fwd, bwd = _pick(items, "ep", "all_to_all", "forward"), _pick(items, "ep", "all_to_all", "backward")
    assert fwd.count == bwd.count == 2 * 4 * batch.num_microbatches  # dispatch + combine, x 4 MoE layers
    numel = 48 * 2 * 64  # tokens x top-k x h
    simulated = run_schedule(pairwise_all_to_all(ep), _halves(numel, ep)).traffic.bytes_sent.max()
    assert fwd.bytes_per_call == simulated


@pytest.mark.parametrize("tp", [2, 4])
def test_ep_under_sequence_parallelism_dispatches_the_tp_ranks_sequence_shard(tp):
    """With SP each TP rank holds seq / tp tokens after the attention block, and routes only those."""
    _, items = _items(TINY_MOE, ParallelLayout(dp=4, ep=4, tp=tp, sequence_parallel=True), seq=48)
    numel = 48 // tp * 2 * 64  # local tokens x top-k x h
    simulated = run_schedule(pairwise_all_to_all(4), _halves(numel, 4)).traffic.bytes_sent.max()
    assert _pick(items, "ep", "all_to_all", "forward").bytes_per_call == simulated
    _, plain = _items(TINY_MOE, ParallelLayout(dp=4, ep=4, tp=tp), seq=48)  # no SP: every TP rank routes all
    assert _pick(plain, "ep", "all_to_all", "forward").bytes_per_call == tp * simulated


def test_load_imbalance_scales_the_busiest_rank():
    _, even = _items(TINY_MOE, ParallelLayout(dp=4, ep=4), seq=64)
    _, hot = _items(TINY_MOE, ParallelLayout(dp=4, ep=4), seq=64, load_imbalance=2.0)
    assert bytes_by_dimension(hot)["ep"] == 2 * bytes_by_dimension(even)["ep"]
    with pytest.raises(ValueError, match="load_imbalance"):
        _items(TINY_MOE, ParallelLayout(dp=4, ep=4), load_imbalance=5.0)


@pytest.mark.parametrize("cp", [2, 3, 4])
def test_cp_forward_ring_is_an_all_gather_of_kv(cp):
    m = TINY.replace(num_hidden_layers=2)
    seq = 24 * cp
    batch, items = _items(m, ParallelLayout(cp=cp), seq=seq)
    fwd = _pick(items, "cp", "send_recv", "forward")
    kv_numel = (seq // cp) * 4 * (8 + 8)  # local tokens x KV heads x (d_k + d_v)
    assert fwd.message_bytes == 2 * kv_numel
    per_layer = fwd.bytes_sent // (2 * batch.num_microbatches)
    assert per_layer == all_gather(_halves(kv_numel, cp)).traffic.bytes_sent.max()
    assert _pick(items, "cp", "send_recv", "backward").bytes_sent == 2 * fwd.bytes_sent


@settings(max_examples=30, deadline=None)
@given(p=st.sampled_from([2, 4]), v=st.sampled_from([1, 2]), m=st.sampled_from([4, 8]), sp=st.booleans())
def test_pp_messages_per_stage(p, v, m, sp):
    model = TINY.replace(num_hidden_layers=8)
    lay = ParallelLayout(pp=p, virtual_stages=v, tp=2 if sp else 1, sequence_parallel=sp)
    batch = check_layout(model, lay, 32, 1, m)
    # Interleaved placement (Narayanan et al. 2021, sec. 2.2): model chunk c of p x v lives on stage c % p. Every
    # micro-batch crosses each boundary c -> c + 1 forward (sent by chunk c's stage) and back (sent by c + 1's).
    chunks = p * v
    for stage in range(p):
        items = [i for i in stage_traffic(model, lay, batch, stage) if i.dim == "pp"]
        counts = {i.phase: i.count for i in items}
        forward = sum(1 for c in range(chunks - 1) if c % p == stage)
        backward = sum(1 for c in range(1, chunks) if c % p == stage)
        assert counts.get("forward", 0) == m * forward
        assert counts.get("backward", 0) == m * backward
        for i in items:
            assert i.message_bytes == 2 * 32 * 64 // (2 if sp else 1)


@pytest.mark.parametrize("strategy", ["ddp", "zero1", "zero2", "zero3"])
def test_dp_traffic_is_grad_comm_bytes_of_the_stage(strategy):
    m = MODELS["mixtral-8x7b"]
    lay = ParallelLayout(dp=4, tp=2, pp=2, ep=2)
    batch = check_layout(m, lay, 1024, 1, 16)
    items = stage_traffic(m, lay, batch, 1, strategy)
    params = stage_params(m, lay)[1]
    # ddp and zero1 reduce once per step; zero2 and zero3 in every micro-batch (their gradients stay sharded)
    sync_once = strategy in ("ddp", "zero1")
    dense = grad_comm_bytes(strategy, params.dense, 4, "bf16", grad_accum_steps=batch.num_microbatches,
                            no_sync=sync_once)
    expert = grad_comm_bytes(strategy, params.expert, 2, "bf16", grad_accum_steps=batch.num_microbatches,
                             no_sync=sync_once)
    totals = bytes_by_dimension(items)
    assert totals["dp"] == dense.bytes_sent_per_rank and totals["edp"] == expert.bytes_sent_per_rank


def test_fp32_gradients_and_bf16_parameters_on_the_wire():
    m = MODELS["llama-2-7b"]
    lay = ParallelLayout(dp=8)
    batch = check_layout(m, lay, 1024, 1, 8)
    items = stage_traffic(m, lay, batch, 0, "zero1", Precision(grad_dtype="fp32"))
    rs, ag = (next(i for i in items if i.collective == c) for c in ("reduce_scatter", "all_gather"))
    assert rs.message_bytes == 4 * m.param_count() and ag.message_bytes == 2 * m.param_count()


def test_bad_stage():
    with pytest.raises(ValueError, match="stage"):
        _items(TINY, ParallelLayout(pp=2), stage=2)
