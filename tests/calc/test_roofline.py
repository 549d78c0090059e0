"""Roofline (PROBLEMS.md P3) and the kernel cost helpers."""

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc.roofline import (
    attention_decode_cost, elementwise_cost, layernorm_cost, matmul_cost, roofline,
)

A100_BW = 2.039e12  # A100 SXM 80GB datasheet, HBM2e
A100_PEAK = 312e12  # dense bf16


def test_p3_worked_answer():
    r = roofline(512e9, 8e9, "a100-sxm-80gb")
    assert r.intensity == 64
    assert r.ridge_point == pytest.approx(A100_PEAK / A100_BW)
    assert round(r.ridge_point, 1) == 153.0
    assert r.bound == "memory"
    assert r.time_s == pytest.approx(8e9 / A100_BW)
    assert round(r.time_s * 1e3, 4) == 3.9235
    assert round(r.compute_time_s * 1e3, 2) == 1.64
    assert r.memory_time_s == r.time_s
    assert r.attainable_flops == pytest.approx(64 * A100_BW)
    assert r.fraction_of_peak == pytest.approx(64 / (A100_PEAK / A100_BW))
    text = r.summary()
    assert "memory-bound" in text and "3.923 ms" in text and "dense" in text


def test_dense_is_the_default_and_sparse_is_explicit():
    assert roofline(1e12, 1e9, "h100-sxm").peak_flops == 989e12
    assert roofline(1e12, 1e9, "h100-sxm", sparse=True).peak_flops == 1979e12


def test_a100_40gb_has_slower_memory():
    assert roofline(512e9, 8e9, "a100-sxm-40gb").time_s == pytest.approx(8e9 / 1.555e12)


def test_large_matmul_is_compute_bound():
    flops, nbytes = matmul_cost(4096, 4096, 4096, "bf16")
    assert flops == 2 * 4096**3
    assert nbytes == 3 * 4096**2 * 2
    r = roofline(flops, nbytes, "a100-sxm-80gb")
    assert r.intensity == pytest.approx(4096 / 3)
    assert r.bound == "compute"
    assert r.time_s == pytest.approx(flops / A100_PEAK)
    assert r.fraction_of_peak == 1.0


def test_matrix_vector_is_memory_bound():
    # One decode token through a 4096 x 4096 layer: intensity ~ 1 FLOP/B in bf16.
    flops, nbytes = matmul_cost(1, 4096, 4096, "bf16")
    assert (flops, nbytes) == (2 * 4096 * 4096, (4096 + 4096 * 4096 + 4096) * 2)
    assert roofline(flops, nbytes, "h100-sxm").bound == "memory"


def test_fusion_removes_one_write_and_one_read_of_the_intermediate():
    n = 10**6
    flops_u, bytes_u = elementwise_cost(n, 2, "bf16", fused=False)
    flops_f, bytes_f = elementwise_cost(n, 2, "bf16", fused=True)
    assert flops_u == flops_f == 2 * n
    assert bytes_u == 4 * n * 2  # read x, write t, read t, write y
    assert bytes_f == 2 * n * 2  # read x, write y
    assert bytes_u - bytes_f == 2 * n * 2
    ru, rf = roofline(flops_u, bytes_u, "a100-sxm-80gb"), roofline(flops_f, bytes_f, "a100-sxm-80gb")
    assert rf.intensity == 2 * ru.intensity
    assert ru.bound == rf.bound == "memory"
    assert rf.time_s == pytest.approx(ru.time_s / 2)


def test_elementwise_with_two_inputs_and_three_ops():
    # read a, read b, then 2 intermediates written+read, write out: (2 + 1 + 4) x numel x 4 B.
    assert elementwise_cost(100, 3, "fp32", fused=False, n_inputs=2) == (300, 7 * 100 * 4)
    assert elementwise_cost(100, 3, "fp32", fused=True, n_inputs=2) == (300, 3 * 100 * 4)


def test_layernorm_cost_by_hand():
    # 4 x 3 fp32: 7 FLOPs per element; read x (12), write y (12), gamma and beta (3 + 3).
    assert layernorm_cost(4, 3, "fp32") == (7 * 12, (12 + 12 + 6) * 4)


def test_attention_decode_llama2_7b_layer():
    flops, nbytes = attention_decode_cost(1, 4096, 32, 32, 128, "bf16")
    assert flops == 4 * 32 * 128 * 4096
    assert nbytes == 2 * 4096 * 32 * 128 * 2 + 2 * 32 * 128 * 2
    # MHA decode attention does ~1 FLOP per byte; GQA with 8 KV heads (Llama-2-70B layout) ~8x that.
    gqa_flops, gqa_bytes = attention_decode_cost(1, 4096, 64, 8, 128, "bf16")
    assert flops / nbytes == pytest.approx(1.0, rel=1e-3)
    assert gqa_flops / gqa_bytes == pytest.approx(8.0, rel=1e-2)


def test_attention_fp8_cache_halves_kv_bytes():
    _, bf16 = attention_decode_cost(2, 1000, 8, 8, 64, "bf16")
    _, fp8 = attention_decode_cost(2, 1000, 8, 8, 64, "bf16", kv_dtype="fp8")
    q_and_out = 2 * 2 * 8 * 64 * 2
    assert fp8 - q_and_out == (bf16 - q_and_out) // 2


def test_int4_bytes_round_up_to_whole_bytes():
    assert matmul_cost(1, 1, 1, "int4") == (2, 2)  # 3 elements x 0.5 B = 1.5 -> 2


def test_zero_flops_copy_is_memory_bound():
    r = roofline(0, 1e9, "h100-sxm")
    assert r.intensity == 0 and r.bound == "memory" and r.attainable_flops == 0


@settings(max_examples=200, deadline=None)
@given(flops=st.floats(1, 1e18), nbytes=st.floats(1, 1e15),
       hw=st.sampled_from(["a100-sxm-80gb", "h100-sxm", "mi300x", "l4", "tpu-v5e"]))
def test_roofline_time_is_the_larger_partial_time(flops, nbytes, hw):
    r = roofline(flops, nbytes, hw)
    assert r.time_s == max(r.memory_time_s, r.compute_time_s)
    assert r.time_s >= r.memory_time_s and r.time_s >= r.compute_time_s
    assert r.fraction_of_peak <= 1 + 1e-12
    assert r.fraction_of_peak == pytest.approx(min(1.0, r.intensity / r.ridge_point))
    # the documented rule, decided exactly: memory-bound iff flops / bytes < peak / bandwidth (ties: compute)
    below = Fraction(flops) * Fraction(r.bandwidth) < Fraction(r.peak_flops) * Fraction(nbytes)
    assert r.bound == ("memory" if below else "compute")


@pytest.mark.parametrize("hw", ["a100-sxm-80gb", "h100-sxm", "mi300x", "l4"])
@pytest.mark.parametrize("sparse", [False, True])
def test_a_kernel_exactly_at_the_ridge_is_compute_bound(hw, sparse):
    from ringlab.calc.hardware import HARDWARE, peak_flops

    peak, bw = peak_flops(HARDWARE[hw], "bf16", sparse=sparse), HARDWARE[hw].hbm_bandwidth
    at = roofline(peak, bw, hw, sparse=sparse)  # intensity = peak / bw exactly: the ridge
    assert at.bound == "compute" and at.ridge_point == peak / bw
    below = roofline(peak, bw * (1 + 2**-40), hw, sparse=sparse)
    assert below.bound == "memory"


def test_sparse_ridge_point_uses_the_sparse_peak():
    dense, sparse = roofline(1e12, 1e9, "h100-sxm"), roofline(1e12, 1e9, "h100-sxm", sparse=True)
    assert dense.ridge_point == 989e12 / dense.bandwidth and sparse.ridge_point == 1979e12 / sparse.bandwidth


@settings(max_examples=50, deadline=None)
@given(numel=st.integers(1, 10**9), n_ops=st.integers(1, 8), n_inputs=st.integers(1, 4))
def test_fusion_never_adds_bytes(numel, n_ops, n_inputs):
    fused = elementwise_cost(numel, n_ops, "bf16", True, n_inputs)
    unfused = elementwise_cost(numel, n_ops, "bf16", False, n_inputs)
    assert fused[0] == unfused[0]
    assert unfused[1] - fused[1] == 2 * (n_ops - 1) * numel * 2


@pytest.mark.parametrize("call, error, match", [
    (lambda: roofline(-1, 1, "a100-sxm-80gb"), ValueError, "flops"),
    (lambda: roofline(1, float("inf"), "a100-sxm-80gb"), ValueError, "bytes_moved"),
    (lambda: roofline(0, 0, "a100-sxm-80gb"), ValueError, "both be zero"),
    (lambda: roofline("1e9", 1, "a100-sxm-80gb"), TypeError, "flops"),
    (lambda: roofline(1, 1, "a100-sxm-80g"), ValueError, "a100-sxm-80gb"),
    (lambda: roofline(1, 1, "t4", dtype="bf16"), ValueError, "bf16"),
    (lambda: roofline(1, 1, "a100-sxm-80gb", dtype="bf17"), ValueError, "bf16"),
    (lambda: roofline(1, 1, "a100-sxm-80gb", sparse="yes"), TypeError, "sparse"),
    (lambda: matmul_cost(0, 1, 1), ValueError, "m must"),
    (lambda: matmul_cost(1, 2.0, 1), TypeError, "n must"),
    (lambda: elementwise_cost(10, 0), ValueError, "n_ops"),
    (lambda: elementwise_cost(10, 2, fused=1), TypeError, "fused"),
    (lambda: layernorm_cost(1, -3), ValueError, "cols"),
    (lambda: attention_decode_cost(1, 10, 32, 5, 128), ValueError, "num_key_value_heads"),
])
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()
