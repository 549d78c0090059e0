"""FLOPs of the per-layer model against closed forms (Narayanan et al. 2021, eq. 3) and direct sums."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc import MODELS
from ringlab.calc.layers import LayerSpec
from ringlab.calc.training.flops import (
    attention_pairs, layer_flops, lm_head_flops, model_layer_flops, step_flops,
)

from training_models import bare_gpt


def test_gpt_layer_is_24bsh2_plus_4bs2h():
    h, a, s, b = 4096, 32, 2048, 3
    m = bare_gpt(h, 4, a)
    f = layer_flops(m, m.layers[0], s, b)
    norms = 2 * h  # two RMSNorm weight vectors, 2 FLOPs per weight per token like every parameter
    assert f.matmul == 2 * b * s * (12 * h * h + norms)
    assert f.attention == 4 * b * s * s * h
    assert f.backward == 2 * f.forward
    assert f.recompute("full") == f.forward and f.recompute("selective") == f.attention and f.recompute("none") == 0


def test_step_with_full_recompute_is_megatron_eq3(gpt3):
    """Narayanan et al. 2021 eq. 3: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with activation recomputation;
    ringlab also counts biases and LayerNorm weights (2 FLOPs each per token), < 1e-4 of the total."""
    h, l, V, s, B = 12288, 96, 51200, 2048, 1536
    closed = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    full = step_flops(gpt3, s, B, "full")
    assert full.hardware_flops == pytest.approx(closed, rel=1e-4)
    # without recompute the 4 passes are 3: 72 B s l h^2 (1 + s/(6h)) + 6 B s h V
    none = step_flops(gpt3, s, B)
    assert none.hardware_flops == none.model_flops == full.model_flops
    assert none.model_flops == pytest.approx(72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V, rel=1e-4)


def test_six_nd_is_six_times_active_params_times_tokens():
    m = MODELS["mixtral-8x7b"]
    s, gb = 4096, 8
    f = step_flops(m, s, gb)
    embedding_lookup = m.vocab_size * m.hidden_size  # the input table does no matmul; the LM head does
    final_norm = m.hidden_size  # outside every layer and the head: not counted
    assert f.six_nd == 6 * (m.active_param_count() - embedding_lookup - final_norm) * s * gb
    assert f.model_flops == f.six_nd + 3 * f.attention_forward


def test_moe_counts_active_experts_only():
    m = MODELS["mixtral-8x7b"]
    dense = m.replace(num_local_experts=None, num_experts_per_tok=None)
    moe, plain = layer_flops(m, m.layers[0], 128), layer_flops(dense, dense.layers[0], 128)
    h, f = m.hidden_size, m.intermediate_size
    # two experts instead of one, plus the router: 2 FLOPs x (3 h f + h x 8) per token
    assert moe.matmul - plain.matmul == 2 * 128 * (3 * h * f + h * 8)


@settings(max_examples=60, deadline=None)
@given(s=st.integers(1, 300), w=st.integers(1, 300), causal=st.booleans())
def test_attention_pairs_equal_a_direct_count(s, w, causal):
    def direct(visible):
        return sum(visible(q, k) for q in range(s) for k in range(s))

    def ok(q, k):
        return (k <= q) or not causal

    full = LayerSpec(0, "full", None, 1, 8, 8, "dense", 8)
    slide = LayerSpec(0, "sliding", w, 1, 8, 8, "dense", 8)
    chunk = LayerSpec(0, "chunked", w, 1, 8, 8, "dense", 8)
    assert attention_pairs(full, s, causal) == direct(ok)
    if causal:
        assert attention_pairs(slide, s, True) == direct(lambda q, k: q - w < k <= q)
    else:  # the Megatron-style convention: every query at the full window
        assert attention_pairs(slide, s, False) == s * min(s, w)
    assert attention_pairs(chunk, s, causal) == direct(lambda q, k: q // w == k // w and ok(q, k))


def test_model_sum_and_head():
    m = MODELS["gemma-2-9b"]  # alternating sliding and global layers
    layers = model_layer_flops(m, 8192, 2)
    assert len(layers) == m.num_hidden_layers
    assert layers[0].attention != layers[1].attention  # windowed vs full
    f = step_flops(m, 8192, 2)
    assert f.forward == sum(x.forward for x in layers) + lm_head_flops(m, 8192, 2)
    assert lm_head_flops(m, 10, 3) == 2 * m.vocab_size * m.hidden_size * 30


@pytest.mark.parametrize("kwargs, error", [
    (dict(seq_len=0), ValueError), (dict(seq_len=2.5), TypeError), (dict(global_batch=0), ValueError),
    (dict(recompute="partial"), ValueError),
])
def test_bad_inputs(kwargs, error):
    args = dict(model="llama-2-7b", seq_len=128, global_batch=2) | kwargs
    with pytest.raises(error, match=next(iter(kwargs)) if error is ValueError and "recompute" not in kwargs else None):
        step_flops(**args)
