"""Config families with per-layer head counts and sizes (DeepSeek-V3.2's sparse attention, Gemma-4's global
layers, MiMo-V2-Flash's sliding layers), and windows read only where transformers reads them.

Expected bytes are written out here from the config fields, layer by layer, not through ringlab's parser."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.calc import kv_cache_by_layer_kind, kv_cache_bytes, kv_cache_bytes_per_token
from ringlab.calc.models import ModelConfig
from ringlab.calc.hf_config import parse_hf_config


def parse(cfg):
    return ModelConfig.from_hf_config(cfg)


DSA = dict(model_type="deepseek_v32", hidden_size=512, intermediate_size=1024, moe_intermediate_size=128,
           num_attention_heads=8, num_key_value_heads=8, num_hidden_layers=5, vocab_size=1000, n_routed_experts=8,
           num_experts_per_tok=2, kv_lora_rank=128, qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64,
           index_head_dim=128, index_n_heads=16, index_topk=64)


@settings(max_examples=40, deadline=None)
@given(index=st.integers(1, 1024), layers=st.integers(1, 70), rank=st.sampled_from([64, 256, 512]),
       dtype=st.sampled_from(["bf16", "fp8", "fp32"]), tp=st.sampled_from([1, 2, 8]), tokens=st.integers(1, 9000))
def test_dsa_caches_the_indexer_key_beside_the_latent(index, layers, rank, dtype, tp, tokens):
    m = parse({**DSA, "index_head_dim": index, "num_hidden_layers": layers, "kv_lora_rank": rank})
    width = {"bf16": 2, "fp8": 1, "fp32": 4}[dtype]
    # The latent and the RoPE key in the cache dtype, the indexer key in FP8 with an fp32 scale per 128
    # elements; neither is split by TP (one latent, one indexer head).
    per_layer = (rank + 32) * width + index + 4 * ((index + 127) // 128)
    assert kv_cache_bytes_per_token(m, dtype, tp) == layers * per_layer
    assert kv_cache_bytes(m, tokens, 3, dtype, tp) == 3 * tokens * layers * per_layer


def test_deepseek_v32_is_132_bytes_per_layer_more_than_v3():
    v32 = parse(DSA)
    v3 = parse({k: v for k, v in DSA.items() if not k.startswith("index_")} | {"model_type": "deepseek_v3"})
    assert kv_cache_bytes_per_token(v32, "bf16") - kv_cache_bytes_per_token(v3, "bf16") == 5 * 132
    assert any("indexer" in note for note in v32.notes)


GEMMA4 = dict(model_type="gemma4_text", hidden_size=1024, intermediate_size=2048, num_attention_heads=16,
              num_key_value_heads=8, head_dim=128, global_head_dim=256, num_global_key_value_heads=2,
              attention_k_eq_v=True, num_hidden_layers=12, vocab_size=1000, sliding_window=512,
              layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 2)


@pytest.mark.parametrize("tokens", [1, 511, 512, 513, 40_000])
@pytest.mark.parametrize("tp", [1, 2])
def test_gemma4_global_layers_have_their_own_heads(tokens, tp):
    m = parse(GEMMA4)
    sliding = 10 * (8 // tp) * (128 + 128) * 2 * min(tokens, 512)
    glob = 2 * (2 // tp) * (256 + 256) * 2 * tokens  # K and V both cached: they differ after k_norm/RoPE, v_norm
    assert kv_cache_bytes(m, tokens, dtype="bf16", tp=tp) == sliding + glob
    rows = {row["mixer"]: row for row in kv_cache_by_layer_kind(m, tokens, "bf16", tp)}
    assert (rows["full"]["layers"], rows["full"]["kv_heads"], rows["full"]["k_head_dim"]) == (2, 2 // tp, 256)
    assert (rows["sliding"]["kv_heads"], rows["sliding"]["v_head_dim"]) == (8 // tp, 128)


def test_gemma4_without_k_eq_v_keeps_the_kv_heads_and_refuses_a_global_count():
    m = parse({k: v for k, v in GEMMA4.items() if k not in ("attention_k_eq_v", "num_global_key_value_heads")})
    assert kv_cache_bytes(m, 1000, dtype="bf16") == 10 * 8 * 256 * 2 * 512 + 2 * 8 * 512 * 2 * 1000
    with pytest.raises(ValueError, match="num_global_key_value_heads without attention_k_eq_v"):
        parse({**GEMMA4, "attention_k_eq_v": False})


def test_gemma4_parameters_are_refused_not_guessed():
    with pytest.raises(ValueError, match="Gemma-4"):
        parse(GEMMA4).param_count()


MIMO = dict(model_type="mimo_v2_flash", hidden_size=1024, intermediate_size=4096, moe_intermediate_size=256,
            num_attention_heads=16, num_key_value_heads=2, head_dim=96, v_head_dim=64, swa_num_attention_heads=16,
            swa_num_key_value_heads=4, swa_head_dim=96, swa_v_head_dim=64, sliding_window=64,
            sliding_window_size=64, num_hidden_layers=8, vocab_size=1000, n_routed_experts=8, num_experts_per_tok=2,
            hybrid_layer_pattern=[0, 1, 1, 1, 0, 1, 1, 1], moe_layer_freq=[0, 1, 1, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("tokens", [1, 64, 65, 10_000])
def test_mimo_v2_sliding_layers_have_their_own_kv_heads(tokens):
    m = parse(MIMO)
    want = 2 * 2 * (96 + 64) * 2 * tokens + 6 * 4 * (96 + 64) * 2 * min(tokens, 64)
    assert kv_cache_bytes(m, tokens, dtype="bf16") == want
    assert [layer.ffn for layer in m.layers] == ["dense"] + ["moe"] * 7
    assert kv_cache_bytes(m, tokens, dtype="bf16", tp=4) == 2 * 1 * 160 * 2 * tokens + 6 * 1 * 160 * 2 * min(tokens, 64)


def test_mimo_v2_sizes_of_its_own_are_cached_and_their_parameters_refused():
    m = parse({**MIMO, "swa_head_dim": 128, "swa_v_head_dim": 128})
    assert kv_cache_bytes(m, 10, dtype="fp8") == 2 * 2 * 160 * 10 + 6 * 4 * 256 * 10
    with pytest.raises(ValueError, match="own head sizes"):
        m.param_count()


def test_mimo_v2_reads_sliding_window_not_sliding_window_size():
    with pytest.raises(ValueError, match="'sliding_window' is missing or null"):
        parse({**MIMO, "sliding_window": None})
    with pytest.raises(ValueError, match="0 \\(full attention\\) or 1"):
        parse({**MIMO, "hybrid_layer_pattern": [0, 2, 1, 1, 0, 1, 1, 1]})
    with pytest.raises(ValueError, match="hybrid_layer_pattern.*one entry per layer"):
        parse({**MIMO, "hybrid_layer_pattern": [0, 1]})


LLAMA = dict(model_type="llama", hidden_size=512, intermediate_size=1024, num_attention_heads=8,
             num_key_value_heads=2, num_hidden_layers=4, vocab_size=1000)


@pytest.mark.parametrize("extra", [dict(sliding_window_size=256), dict(sliding_window=256),
                                   dict(sliding_window=256, sliding_window_size=256)])
def test_a_window_transformers_does_not_read_windows_nothing(extra):
    """LlamaConfig has no sliding_window, and no config class reads MLC-LLM's sliding_window_size."""
    m = parse({**LLAMA, **extra})
    assert kv_cache_bytes(m, 4096, dtype="bf16") == 4 * 2 * 64 * 2 * 2 * 4096
    assert {layer.mixer for layer in m.layers} == {"full"}


def test_sliding_window_size_is_not_read_where_sliding_window_is():
    mistral = dict(LLAMA, model_type="mistral", sliding_window=None, sliding_window_size=256)
    assert kv_cache_bytes(parse(mistral), 4096, dtype="bf16") == 4 * 2 * 128 * 2 * 4096  # null: no window
    assert kv_cache_bytes(parse(dict(mistral, sliding_window=256)), 4096, dtype="bf16") == 4 * 2 * 128 * 2 * 256


@pytest.mark.parametrize("extra, match", [
    (dict(global_head_dim=256), "read for Gemma-4 .* only"),
    (dict(hybrid_layer_pattern=[0, 1, 0, 1]), "read for MiMo-V2-Flash"),
    (dict(swa_num_key_value_heads=4), "read for MiMo-V2-Flash"),
    (dict(index_head_dim=128), "without MLA"),
    (dict(moe_layer_freq=[0, 1, 1, 1]), "moe_layer_freq != 1"),
])
def test_family_fields_elsewhere_are_refused_with_the_reason(extra, match):
    with pytest.raises(ValueError, match=f"not supported: .*{match}"):
        parse({**LLAMA, **extra})


def test_a_window_is_dropped_only_for_a_named_model_type_without_one():
    # transformers' LlamaConfig has no sliding_window field, so a stray key windows nothing there; a config that
    # names no model type (the exercises' dicts) is read as it says
    base = {"num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64,
            "intermediate_size": 1, "vocab_size": 1, "sliding_window": 16}
    assert parse_hf_config(base)["sliding_window"] == 16
    assert parse_hf_config({**base, "model_type": "mistral"})["sliding_window"] == 16
    assert parse_hf_config({**base, "model_type": "llama"})["sliding_window"] is None
