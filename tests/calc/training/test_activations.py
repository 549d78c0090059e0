"""Activation memory against Korthikanti et al. 2022 (eq. 1, eq. 2, Table 2) and the pipeline schedule."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from training_models import gpt

from ringlab.calc import MODELS
from ringlab.calc.training.activations import layer_activation_bytes, stage_activation_bytes
from ringlab.calc.training.layout import ParallelLayout, check_layout


def _korthikanti(s, b, h, a, t, sp, recompute):
    """Table 2 of the paper, per layer, bytes."""
    if recompute == "full":
        return 2 * s * b * h
    scores = 0 if recompute == "selective" else 5 * a * s / (h * t)
    if sp:
        return s * b * h * (34 / t + scores)
    return s * b * h * (10 + 24 / t + scores)


@settings(max_examples=50, deadline=None)
@given(h_per_head=st.sampled_from([64, 128]), a=st.sampled_from([8, 16, 32, 96]), t=st.sampled_from([1, 2, 4, 8]),
       s=st.sampled_from([256, 1024, 2048]), b=st.integers(1, 4), sp=st.booleans(),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_table_2_rows(h_per_head, a, t, s, b, sp, recompute):
    if sp and t == 1:
        return
    h = a * h_per_head
    m = gpt(h, 2, a)
    got = layer_activation_bytes(m, m.layers[0], s, b, ParallelLayout(tp=t, sequence_parallel=sp), recompute)
    expected = _korthikanti(s, b, h, a, t, sp, recompute)
    if recompute == "full" and sp:
        expected /= t  # the checkpointed layer input is stored sequence-sharded
    assert got.total == pytest.approx(expected, rel=0, abs=1)


def test_eq_1_and_2_for_gpt3(gpt3):
    s, b, h, a = 2048, 1, 12288, 96
    layer = gpt3.layers[0]
    assert layer_activation_bytes(gpt3, layer, s, b).total == s * b * h * (34 + 5 * a * s / h)
    assert layer_activation_bytes(gpt3, layer, s, b, ParallelLayout(tp=8)).total == s * b * h * (10 + 24 / 8 + 5 * a * s / (h * 8))


def test_without_dropout_and_with_flash():
    m = gpt(4096, 2, 32)
    s, b, h, a = 1024, 2, 4096, 32
    no_dropout = layer_activation_bytes(m, m.layers[0], s, b, dropout=False).total
    assert no_dropout == s * b * h * 32 + 2 * a * s * s * b  # masks gone: 34 -> 32 and 5as^2b -> 2as^2b
    flash = layer_activation_bytes(m, m.layers[0], s, b, dropout=False, flash_attention=True).total
    assert flash == s * b * h * 32 + 4 * a * s * b  # one fp32 log-sum-exp per query and head


def test_gqa_swiglu_layer_from_its_tensors():
    m = MODELS["llama-3-8b"]  # h 4096, 32 heads, 8 KV heads of 128, SwiGLU 14336, no dropout
    s, b, t = 4096, 1, 4
    got = layer_activation_bytes(m, m.layers[0], s, b, ParallelLayout(tp=t, sequence_parallel=True), "selective",
                                 dropout=False)
    h, kv, f = 4096, 8 * 128, 14336
    per_token = (4 * 2 * h) / t + 2 * (h + kv + kv + h) / t + 2 * 3 * f / t
    assert got.total == pytest.approx(per_token * s * b, abs=1)


def test_context_parallel_splits_tokens_and_keeps_all_keys():
    m = gpt(2048, 2, 16)
    whole = layer_activation_bytes(m, m.layers[0], 4096, 1)
    cp4 = layer_activation_bytes(m, m.layers[0], 4096, 1, ParallelLayout(cp=4, dp=1))
    assert cp4.unsharded * 4 == whole.unsharded and cp4.tp_sharded * 4 == whole.tp_sharded
    assert cp4.scores * 4 == whole.scores  # s/cp queries, each against all s keys


def test_sliding_window_caps_the_scores():
    m = MODELS["mistral-7b"]  # every layer slides over 4096 tokens
    short = layer_activation_bytes(m, m.layers[0], 4096, 1)
    long = layer_activation_bytes(m, m.layers[0], 8192, 1)
    assert long.scores == 2 * short.scores  # twice the queries, the same window


def test_moe_layer_scales_with_top_k_and_imbalance():
    m = MODELS["mixtral-8x7b"]
    base = layer_activation_bytes(m, m.layers[0], 1024, 1, dropout=False, flash_attention=True)
    skewed = layer_activation_bytes(m, m.layers[0], 1024, 1, dropout=False, flash_attention=True, load_imbalance=1.5)
    per_copy = 2 * 4096 + 2 * 3 * 14336  # expert input + gate, up and FC2 input of one routed copy
    assert skewed.total - base.total == pytest.approx(0.5 * 2 * per_copy * 1024, abs=2)


def test_first_stage_holds_p_microbatches_of_its_layers(gpt3):
    """Korthikanti et al. sec. 4.2.3: 1F1B's first stage stores p micro-batches of L/p layers = L layers."""
    lay = ParallelLayout(dp=1, tp=8, pp=8, sequence_parallel=True)
    batch = check_layout(gpt3, lay, 2048, 1, 64)
    stages = stage_activation_bytes(gpt3, lay, batch, "selective")
    one_layer = layer_activation_bytes(gpt3, gpt3.layers[0], 2048, 1, lay, "selective").total
    assert stages[0].layers == 96 * one_layer
    assert [s.in_flight for s in stages] == list(range(8, 0, -1))
    s, b, h, t = 2048, 1, 12288, 8
    assert stages[0].embedding == s * b * h * 8 // t  # dropout mask of the embedding, p in flight
    assert stages[-1].output == 4 * s * b * h // t + 4 * s * b * 51200 // t  # 4sbh/t (1 + V/h)


def test_interleaving_adds_one_plus_p_minus_1_over_pv(gpt3):
    p, v, m = 8, 3, 24
    lay = ParallelLayout(dp=1, tp=8, pp=p, virtual_stages=v, sequence_parallel=True)
    batch = check_layout(gpt3, lay, 2048, 1, m)
    first = stage_activation_bytes(gpt3, lay, batch, "selective")[0]
    one_layer = layer_activation_bytes(gpt3, gpt3.layers[0], 2048, 1, lay, "selective").total
    assert first.layers == pytest.approx(96 * one_layer * (1 + (p - 1) / (p * v)), rel=1e-12)


def test_state_space_layers_are_refused():
    m = MODELS["nemotron-h-56b"]
    mamba = next(layer for layer in m.layers if layer.mixer == "mamba")
    with pytest.raises(ValueError, match="mamba"):
        layer_activation_bytes(m, mamba, 128, 1)
    with pytest.raises(ValueError, match="recompute"):
        layer_activation_bytes(m, m.layers[0], 128, 1, recompute="most")


# The four models of Korthikanti et al. 2022 (Table 3; the 1T row is also Narayanan et al. 2021's largest)
PAPER_MODELS = {"22B": (6144, 64, 48), "175B": (12288, 96, 96), "530B": (20480, 128, 105), "1T": (25600, 160, 128)}


@pytest.mark.parametrize("name", PAPER_MODELS)
@pytest.mark.parametrize("sp, recompute", [(False, "none"), (True, "none"), (False, "selective"), (True, "selective")])
def test_table_2_for_the_papers_models(name, sp, recompute):
    h, a, layers = PAPER_MODELS[name]
    m = gpt(h, 1, a)
    s, b, t = 2048, 1, 8
    got = layer_activation_bytes(m, m.layers[0], s, b, ParallelLayout(tp=t, sequence_parallel=sp), recompute).total
    assert got == pytest.approx(_korthikanti(s, b, h, a, t, sp, recompute), abs=1)


def _megatron_chunk0_at_peak(p: int, v: int, m: int) -> int:
    """Micro-batches in flight through model chunk 0 on the first stage at its peak, counted by walking Megatron-LM's
    interleaved order (forward_backward_pipelining_with_interleaving): the first stage runs 2 (p - 1) + (v - 1) p
    warm-up forwards, then one more before its first backward; forwards take micro-batches in groups of p through
    chunk 0, then chunk 1, ... (micro-batches 0..p-1 through chunks 0..v-1, then p..2p-1, ...)."""
    peak = min(2 * (p - 1) + (v - 1) * p + 1, m * v)
    return sum(1 for k in range(peak) if (k // p) % v == 0)


@pytest.mark.parametrize("p, v, m", [(8, 3, 24), (2, 2, 4), (4, 2, 8), (4, 2, 4), (8, 1, 64)])
def test_the_embedding_mask_counts_the_micro_batches_in_chunk_0(gpt3, p, v, m):
    lay = ParallelLayout(dp=1, tp=8, pp=p, virtual_stages=v, sequence_parallel=True)
    first = stage_activation_bytes(gpt3, lay, check_layout(gpt3, lay, 2048, 1, m), "selective")[0]
    # 1F1B without interleaving: p micro-batches in flight on the first stage, each through its only chunk
    in_chunk_0 = min(p, m) if v == 1 else _megatron_chunk0_at_peak(p, v, m)
    assert v == 1 or in_chunk_0 == min(2 * p - 1, m)
    assert first.embedding == 2048 * 12288 * in_chunk_0 // 8  # 1-byte mask of s b h, sequence-sharded over t
