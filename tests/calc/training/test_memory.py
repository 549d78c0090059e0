"""Model-state memory per GPU: the per-GPU parameter split and the ZeRO / FSDP sharding."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc import MODELS
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.memory import Precision, model_state_memory, sharded_state_bytes, stage_params


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_gpu_holds_the_whole_model(name):
    m = MODELS[name]
    (only,) = stage_params(m, ParallelLayout())
    assert only.total == m.param_count()


@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16, 32])
def test_llama2_7b_per_gpu_closed_form(tp):
    """Per GPU: embeddings and head split by rows, 4h^2 + 3hf of each layer split, norms replicated."""
    m = MODELS["llama-2-7b"]
    h, f, V, L = 4096, 11008, 32000, 32
    (only,) = stage_params(m, ParallelLayout(tp=tp))
    expected = L * (4 * h * h // tp + 3 * h * math.ceil(f / tp) + 2 * h) + 2 * math.ceil(V / tp) * h + h
    assert only.total == expected


def test_gqa_heads_are_replicated_when_tp_exceeds_them():
    m = MODELS["llama-3-70b"]  # 64 query heads, 8 KV heads, head_dim 128
    h, d = 8192, 128
    per16 = stage_params(m, ParallelLayout(tp=16))[0].total
    per8 = stage_params(m, ParallelLayout(tp=8))[0].total
    # going from 8 to 16 ranks halves Q, O, FFN and embeddings but keeps one KV head (2 h d) per rank
    q_o = 2 * h * 64 * d
    kv_one_head = 2 * h * d
    ffn = 3 * h * 28672
    vocab = 2 * 128256 * h
    layer_norms = 2 * h
    layer16 = q_o // 16 + kv_one_head + ffn // 16 + layer_norms
    layer8 = q_o // 8 + kv_one_head + ffn // 8 + layer_norms
    assert per8 - per16 == 80 * (layer8 - layer16) + vocab // 8 - vocab // 16


def test_tp_ranks_together_hold_every_weight_once_plus_replicas():
    """Summed over the tp ranks, the sharded weights add up to the model; only norms (and the O bias) repeat."""
    m = MODELS["falcon-40b"]
    tp = 8
    whole = m.param_count()
    per_rank = stage_params(m, ParallelLayout(tp=tp))[0].total
    h = m.hidden_size
    norms = m.num_hidden_layers * m.norms_per_layer * 2 * h + 2 * h  # LayerNorm weight + bias, final norm
    assert tp * per_rank - whole == (tp - 1) * norms


def test_moe_experts_split_over_ep_and_tp():
    m = MODELS["mixtral-8x7b"]
    base = stage_params(m, ParallelLayout())[0]
    sp = stage_params(m, ParallelLayout(dp=4, ep=4, tp=2))[0]
    one_expert = 3 * 4096 * 14336
    assert base.expert == 32 * 8 * one_expert
    assert sp.expert == 32 * (8 // 4) * one_expert // 2


def test_pipeline_stages_partition_the_layers():
    m = MODELS["llama-2-13b"]
    stages = stage_params(m, ParallelLayout(pp=4))
    assert sum(s.total for s in stages) == m.param_count()
    untied = MODELS["gemma-2-9b"]  # tied embeddings: the last stage keeps its own copy when pp > 1
    (one,) = stage_params(untied, ParallelLayout())
    split = stage_params(untied, ParallelLayout(pp=2))
    assert sum(s.total for s in split) - one.total == untied.vocab_size * untied.hidden_size


def test_zero_paper_figure_1():
    """Rajbhandari et al. 2020, fig. 1: Psi = 7.5B, K = 12, N_d = 64: 120, 31.4, 16.6, 1.9 GB."""
    psi, n = 7_500_000_000, 64
    p = Precision()
    expected = {"ddp": 16 * psi, "zero1": 4 * psi + 12 * psi / n, "zero2": 2 * psi + 14 * psi / n,
                "zero3": 16 * psi / n}
    for strategy, closed in expected.items():
        assert sum(sharded_state_bytes(psi, n, strategy, p)) == pytest.approx(closed, abs=16)


def test_zero1_does_not_shard_gradients():
    psi, n = 1_000_000_000, 8
    params, grads, opt = sharded_state_bytes(psi, n, "zero1", Precision())
    assert grads == 2 * psi and params == 2 * psi and opt == 12 * psi // n
    assert sharded_state_bytes(psi, n, "zero2", Precision())[1] == 2 * psi // n


def test_precision_options():
    psi = 10**9
    assert sum(sharded_state_bytes(psi, 1, "ddp", Precision(fp32_grad_accum=True))) == 20 * psi
    assert sum(sharded_state_bytes(psi, 1, "ddp", Precision(master_weights=False))) == 12 * psi
    assert sum(sharded_state_bytes(psi, 1, "ddp", Precision("fp32", "fp32", master_weights=False))) == 16 * psi
    assert Precision(param_dtype="fp8").optimizer_bytes_per_param == 12
    with pytest.raises(ValueError, match="sub-byte"):
        Precision(param_dtype="int4")
    with pytest.raises(TypeError, match="master_weights"):
        Precision(master_weights="no")


@settings(max_examples=40, deadline=None)
@given(dp=st.sampled_from([1, 2, 4, 8]), cp=st.sampled_from([1, 2]), ep=st.sampled_from([1, 2, 4, 8]),
       strategy=st.sampled_from(["ddp", "zero1", "zero2", "zero3"]))
def test_dense_and_expert_states_shard_over_their_groups(dp, cp, ep, strategy):
    if (dp * cp) % ep:
        return
    m = MODELS["mixtral-8x7b"]
    lay = ParallelLayout(dp=dp, cp=cp, ep=ep)
    (st_,) = model_state_memory(m, lay, strategy)
    (params,) = stage_params(m, lay)
    dense = sharded_state_bytes(params.dense, dp * cp, strategy, Precision())
    expert = sharded_state_bytes(params.expert, dp * cp // ep, strategy, Precision())
    assert st_.total == sum(dense) + sum(expert)
    if strategy == "zero3":  # everything sharded: about 16 B x params / group
        expected = 16 * (params.dense / (dp * cp) + params.expert / (dp * cp // ep))
        assert st_.total == pytest.approx(expected, rel=1e-6)


def test_hybrid_shard_refused():
    with pytest.raises(ValueError, match="hybrid_shard"):
        model_state_memory(MODELS["llama-2-7b"], ParallelLayout(dp=2), "hybrid_shard")
