"""Decode step time vs batch size and the SLA batch (PROBLEMS.md P8), derived by hand here."""

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc.decode import decode_step, max_batch_for_sla, naive_linear_decode_time

# Llama-2-7B (HF config.json): 32 layers, 32 heads = 32 KV heads, head_dim 128, hidden 4096,
# intermediate 11008, vocab 32000, untied embeddings.
N_7B = 32000 * 4096 * 2 + 32 * (4 * 4096**2 + 3 * 4096 * 11008 + 2 * 4096) + 4096  # 6,738,415,616
STREAMED_7B = N_7B - 32000 * 4096  # the input embedding is a lookup, not a streamed matrix
KV_SEQ_4096 = 2 * 32 * 32 * 128 * 2 * 4096  # bf16, 2 GiB per sequence
ATTN_FLOPS_SEQ = lambda ctx: 4 * 32 * 128 * 32 * ctx  # 4 x heads x head_dim x layers x context
A100_BW, A100_PEAK, A100_MEM = 2.039e12, 312e12, 80e9
H200_BW, H200_PEAK, H200_MEM = 4.8e12, 989e12, 141e9


def test_llama2_7b_batch_1_by_hand():
    r = decode_step("llama-2-7b", "a100-sxm-80gb", 1, 4096)
    assert N_7B == 6_738_415_616
    assert r.weight_bytes == 2 * N_7B
    assert r.kv_bytes_per_sequence == KV_SEQ_4096 == 2**31
    assert r.bytes_per_step == 2 * STREAMED_7B + KV_SEQ_4096
    assert r.flops_per_step == 2 * STREAMED_7B + ATTN_FLOPS_SEQ(4096)
    assert r.bound == "memory"
    assert r.step_time_s == pytest.approx((2 * STREAMED_7B + KV_SEQ_4096) / A100_BW)
    assert r.mbu == pytest.approx(1.0)
    assert r.mfu == pytest.approx(r.flops_per_step / r.step_time_s / A100_PEAK)
    assert r.tokens_per_s == pytest.approx(1 / r.step_time_s)
    assert r.comm_time_s == 0


def test_batch_8_costs_only_the_extra_kv_bytes():
    one = decode_step("llama-2-7b", "a100-sxm-80gb", 1, 4096)
    eight = decode_step("llama-2-7b", "a100-sxm-80gb", 8, 4096)
    assert one.bound == eight.bound == "memory"
    assert eight.step_time_s - one.step_time_s == pytest.approx(7 * KV_SEQ_4096 / A100_BW, rel=1e-12)
    assert eight.bytes_per_step - one.bytes_per_step == 7 * KV_SEQ_4096  # weights read once per step
    assert eight.tokens_per_s > 3.5 * one.tokens_per_s


def test_the_wrong_model_side_by_side():
    batches = np.array([1, 2, 4, 8, 16])
    right = decode_step("llama-2-7b", "a100-sxm-80gb", batches, 4096)
    wrong_step, wrong_tps = naive_linear_decode_time("llama-2-7b", "a100-sxm-80gb", batches, 4096)
    single = (2 * STREAMED_7B + KV_SEQ_4096) / A100_BW
    np.testing.assert_allclose(wrong_step, batches * single)  # linear in batch
    np.testing.assert_allclose(wrong_tps, 1 / single)  # flat throughput: the wrong claim
    assert (right.bound == "memory").all()
    assert (right.step_time_s[1:] < wrong_step[1:]).all()
    assert (np.diff(right.tokens_per_s) > 0).all()
    assert naive_linear_decode_time("llama-2-7b", "a100-sxm-80gb", 8, 4096)[0] == pytest.approx(8 * single)


def test_tokens_per_s_grow_until_the_compute_roof():
    # Short context on an H200: bandwidth-bound at small batch, compute-bound past ~B=236.
    batches = np.arange(1, 1025)
    r = decode_step("llama-2-7b", "h200", batches, 16)
    flops_per_seq = 2 * STREAMED_7B + ATTN_FLOPS_SEQ(16)
    memory_bound = r.bound == "memory"
    assert memory_bound[0] and not memory_bound[-1]
    crossing = int(np.argmin(memory_bound))  # first compute-bound index
    assert memory_bound[:crossing].all() and not memory_bound[crossing:].any()
    # Closed form of the crossing: (W + B kv) / BW = B flops / peak.
    kv = 2 * 32 * 32 * 128 * 2 * 16
    b_star = 2 * STREAMED_7B / H200_BW / (flops_per_seq / H200_PEAK - kv / H200_BW)
    assert batches[crossing] == math.floor(b_star) + 1
    assert (np.diff(r.tokens_per_s[:crossing]) > 0).all()
    np.testing.assert_allclose(r.tokens_per_s[crossing:], H200_PEAK / flops_per_seq)  # the roof


def test_max_batch_memory_bound_by_hand():
    weights = 2 * N_7B
    memory_limit = math.floor((0.9 * A100_MEM - weights) / KV_SEQ_4096)  # 27
    latency_limit = math.floor((0.050 * A100_BW - 2 * STREAMED_7B) / KV_SEQ_4096)  # 41
    # The closed form assumed the bandwidth roof binds at that batch: check it does.
    assert latency_limit * (2 * STREAMED_7B + ATTN_FLOPS_SEQ(4096)) / A100_PEAK < 0.050
    res = max_batch_for_sla("llama-2-7b", "a100-sxm-80gb", 4096, 0.050)
    assert (res.memory_limit, res.latency_limit) == (memory_limit, latency_limit) == (27, 41)
    assert res.batch_size == 27 and res.bound_by == "memory"
    assert res.step.fits and not decode_step("llama-2-7b", "a100-sxm-80gb", 28, 4096).fits


def test_max_batch_latency_bound_by_hand():
    latency_limit = math.floor((0.020 * A100_BW - 2 * STREAMED_7B) / KV_SEQ_4096)
    res = max_batch_for_sla("llama-2-7b", "a100-sxm-80gb", 4096, 0.020)
    assert res.batch_size == res.latency_limit == latency_limit == 12
    assert res.bound_by == "latency"
    assert res.step.step_time_s <= 0.020 < decode_step("llama-2-7b", "a100-sxm-80gb", 13, 4096).step_time_s


def test_max_batch_in_the_compute_bound_regime():
    flops_per_seq = 2 * STREAMED_7B + ATTN_FLOPS_SEQ(16)
    expected = math.floor(0.010 * H200_PEAK / flops_per_seq)
    res = max_batch_for_sla("llama-2-7b", "h200", 16, 0.010)
    assert res.batch_size == res.latency_limit == expected
    assert res.step.bound == "compute" and res.bound_by == "latency"


def test_max_batch_zero_when_nothing_fits_or_meets():
    too_big = max_batch_for_sla("llama-3.1-405b", "a100-sxm-80gb", 4096, 1.0)
    assert (too_big.batch_size, too_big.memory_limit, too_big.bound_by, too_big.step) == (0, 0, "memory", None)
    too_fast = max_batch_for_sla("llama-2-7b", "a100-sxm-80gb", 4096, 1e-3)
    assert (too_fast.batch_size, too_fast.latency_limit, too_fast.bound_by) == (0, 0, "latency")
    assert "bound by latency" in too_fast.summary()
    hours = max_batch_for_sla("llama-2-7b", "a100-sxm-80gb", 4096, 3600.0)
    assert hours.bound_by == "memory" and hours.latency_limit > 1000 * hours.memory_limit


def test_tensor_parallel_splits_and_adds_all_reduce_time():
    link = SimpleNamespace(alpha=2e-6, bandwidth=100e9)
    one = decode_step("llama-2-7b", "a100-sxm-80gb", 4, 4096)
    two = decode_step("llama-2-7b", "a100-sxm-80gb", 4, 4096, tp=2, link=link)
    assert two.weight_bytes == one.weight_bytes // 2
    assert two.kv_bytes == one.kv_bytes // 2  # 32 KV heads split 16 + 16
    assert two.flops_per_step == pytest.approx(one.flops_per_step / 2)
    message = 4 * 4096 * 2  # batch x hidden x bf16
    per_all_reduce = 2 * (2 - 1) * 2e-6 + 2 * (2 - 1) / 2 * message / 100e9
    assert two.comm_time_s == pytest.approx(2 * 32 * per_all_reduce)
    assert two.step_time_s == pytest.approx(one.memory_time_s / 2 + two.comm_time_s)
    assert two.mbu < 1
    # Without a link: the preset's NVLink bandwidth per direction (300 GB/s on A100), alpha 0.
    default = decode_step("llama-2-7b", "a100-sxm-80gb", 4, 4096, tp=2)
    assert default.comm_time_s == pytest.approx(2 * 32 * message / 2 / 300e9 * 2)


def test_moe_reads_more_experts_as_the_batch_grows():
    from ringlab.calc.models import MODELS

    m = MODELS["mixtral-8x7b"]
    total, active = m.param_count(), m.active_param_count()
    embed = m.vocab_size * m.hidden_size
    expert = (total - active) / (32 * (8 - 2))  # 32 MoE layers, 6 experts not routed per token
    assert expert == 3 * 4096 * 14336
    r = decode_step(m, "h100-sxm", np.array([1, 2, 100_000]), 128, dtype="fp8", kv_dtype="fp8")
    kv = r.kv_bytes
    streamed = r.bytes_per_step - kv  # fp8: 1 byte per parameter
    assert streamed[0] == pytest.approx(active - embed)
    touched_2 = 8 * (1 - (6 / 8) ** 2)  # 3.5 experts expected for two tokens
    assert streamed[1] == pytest.approx(active - embed + 32 * (touched_2 - 2) * expert)
    assert streamed[2] == pytest.approx(total - embed)
    # FLOPs use the active parameters whatever the batch.
    assert r.flops_per_step[2] / r.flops_per_step[0] == pytest.approx(100_000)


def test_sliding_window_caps_what_is_read():
    at_window = decode_step("mistral-7b", "h100-sxm", 4, 4096)
    beyond = decode_step("mistral-7b", "h100-sxm", 4, 16384)
    assert beyond.bytes_per_step == at_window.bytes_per_step
    assert beyond.flops_per_step == at_window.flops_per_step


def test_sweep_equals_scalar_calls_and_serialises():
    batches = np.array([1, 3, 30, 300])
    sweep = decode_step("llama-3-8b", "h100-sxm", batches, 2048, kv_dtype="fp8")
    for i, b in enumerate(batches):
        one = decode_step("llama-3-8b", "h100-sxm", int(b), 2048, kv_dtype="fp8")
        assert one.step_time_s == pytest.approx(sweep.step_time_s[i])
        assert one.bound == sweep.bound[i] and one.fits == sweep.fits[i]
        assert one.memory_bytes == sweep.memory_bytes[i]
    json.dumps(sweep.to_dict())
    json.dumps(max_batch_for_sla("llama-3-8b", "h100-sxm", 2048, 0.03).to_dict())
    assert "tokens/s" in decode_step("llama-3-8b", "h100-sxm", 3, 2048).summary()
    with pytest.raises(ValueError, match="single batch_size"):
        sweep.summary()


_MODELS = ["llama-2-7b", "llama-3-8b", "mistral-7b", "mixtral-8x7b", "falcon-7b", "deepseek-v3", "qwen2-72b"]


@settings(max_examples=40, deadline=None)
@given(model=st.sampled_from(_MODELS), hw=st.sampled_from(["a100-sxm-80gb", "h100-sxm", "h200", "mi300x"]),
       context=st.integers(1, 32768), batches=st.lists(st.integers(1, 4096), min_size=2, max_size=8))
def test_step_time_never_falls_and_throughput_rises_while_memory_bound(model, hw, context, batches):
    b = np.array(sorted(set(batches)))
    r = decode_step(model, hw, b, context)
    assert (np.diff(r.step_time_s) >= 0).all()
    assert (r.step_time_s >= np.maximum(r.memory_time_s, r.compute_time_s)).all()
    both_memory = (r.bound[:-1] == "memory") & (r.bound[1:] == "memory")
    assert (np.diff(r.tokens_per_s)[both_memory] > 0).all()
    assert (np.diff(r.tokens_per_s) >= -1e-9 * r.tokens_per_s[1:]).all()  # never falls


@settings(max_examples=25, deadline=None)
@given(context=st.integers(1, 16384), tpot_ms=st.floats(1, 500))
def test_sla_result_is_the_largest_feasible_batch(context, tpot_ms):
    res = max_batch_for_sla("llama-3-8b", "h100-sxm", context, tpot_ms / 1e3)
    nxt = decode_step("llama-3-8b", "h100-sxm", res.batch_size + 1, context)
    assert nxt.step_time_s > tpot_ms / 1e3 or not nxt.fits
    if res.batch_size:
        assert res.step.step_time_s <= tpot_ms / 1e3 and res.step.fits


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=1.5), TypeError, "batch_size"),
    (dict(batch_size=np.array([1, 0])), ValueError, "batch_size"),
    (dict(batch_size=True), TypeError, "batch_size"),
    (dict(context_len=0), ValueError, "context_len"),
    (dict(model="llama-2-7"), ValueError, "llama-2-7b"),
    (dict(hardware="a100"), ValueError, "a100"),
    (dict(tp=3), ValueError, "tp=3"),
    (dict(memory_fraction=1.5), ValueError, "memory_fraction"),
    (dict(dtype="fp9"), ValueError, "fp8"),
    (dict(tp=2, link=SimpleNamespace(alpha=0.0)), TypeError, "bandwidth"),
    (dict(tp=2, link=SimpleNamespace(alpha=-1.0, bandwidth=1e9)), ValueError, "link.alpha"),
    (dict(hardware="tpu-v5e", tp=2), ValueError, "link"),
    (dict(batch_size=2**40), ValueError, "overflow"),
])
def test_decode_step_rejects(kwargs, error, match):
    args = dict(model="llama-2-7b", hardware="a100-sxm-80gb", batch_size=1, context_len=128) | kwargs
    with pytest.raises(error, match=match):
        decode_step(**args)


def test_max_batch_rejects_non_positive_sla():
    with pytest.raises(ValueError, match="tpot_s"):
        max_batch_for_sla("llama-2-7b", "a100-sxm-80gb", 4096, 0)


def test_no_batch_fits_says_why():
    from ringlab.calc import max_batch_for_sla

    res = max_batch_for_sla("llama-2-70b", "a100-sxm-80gb", 4096, 0.05)
    assert res.batch_size == 0 and "weights alone" in res.note and "larger tp" in res.summary()
    res = max_batch_for_sla("llama-2-7b", "a100-sxm-80gb", 4096, 0.001)
    assert res.batch_size == 0 and res.memory_limit > 0 and "above the 1 ms SLA" in res.note
