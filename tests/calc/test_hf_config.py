"""The config.json reader: layouts written from the model cards' published architectures (for the
families without a stored fixture), HF's per-model-type defaults, and validation errors."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from ringlab.calc import kv_cache_bytes, kv_cache_bytes_per_token
from ringlab.calc.hf_defaults import tie_default
from ringlab.calc.models import ModelConfig


def parse(cfg):
    return ModelConfig.from_hf_config(cfg, name="case")


def test_old_refinedweb_falcon_40b_has_8_kv_heads():
    # Falcon-40B's original config (model_type RefinedWeb, no new_decoder_architecture, multi_query
    # default): the remote code is the new decoder with n_head_kv = 8 groups (Falcon paper: 40B, 60 layers).
    rw = parse(dict(model_type="RefinedWeb", hidden_size=8192, n_head=128, n_head_kv=8, n_layer=60,
                    vocab_size=65024, parallel_attn=True, bias=False))
    assert rw.num_key_value_heads == 8 and kv_cache_bytes_per_token(rw, "bf16") == 60 * 8 * 2 * 64 * 2
    old_7b = parse(dict(model_type="RefinedWebModel", hidden_size=4544, n_head=71, n_layer=32, vocab_size=65024))
    assert old_7b.num_key_value_heads == 1  # multi_query defaults to True: MQA
    rw_1b = parse(dict(model_type="falcon", hidden_size=2048, num_attention_heads=32, num_hidden_layers=24,
                       vocab_size=50304, multi_query=False, parallel_attn=False, bias=True, alibi=True))
    assert rw_1b.num_key_value_heads == 32 and rw_1b.norms_per_layer == 2 and rw_1b.mlp_bias


def test_starcoder2_two_matrix_mlp_biases_and_window():
    # StarCoder2-15B card: 40 layers, d 6144, 48 heads / 4 KV heads, window 4096, 24,576-wide GELU MLP.
    cfg = dict(model_type="starcoder2", hidden_size=6144, intermediate_size=24576, num_attention_heads=48,
               num_key_value_heads=4, num_hidden_layers=40, vocab_size=49152, sliding_window=4096, use_bias=True)
    m = parse(cfg)
    assert not m.mlp_gated and m.mlp_bias and m.attention_bias and m.tie_word_embeddings  # HF default: tied
    assert kv_cache_bytes(m, 32768, dtype="bf16") == 40 * 4 * 256 * 2 * 4096
    h, i = 6144, 24576
    layer = (h * h + 2 * h * 4 * 128 + h * h) + (h + 2 * 4 * 128 + h) + (2 * h * i + i + h) + 2 * 2 * h
    assert m.param_count() == 49152 * h + 40 * layer + 2 * h


def test_gpt_bigcode_multi_query():
    # StarCoder (GPTBigCode): 40 layers, d 6144, 48 heads, multi-query attention (1 KV head).
    m = parse(dict(model_type="gpt_bigcode", n_embd=6144, n_head=48, n_layer=40, n_positions=8192,
                   vocab_size=49152, multi_query=True))
    assert m.num_key_value_heads == 1 and m.intermediate_size == 4 * 6144 and m.position_embeddings == 8192
    assert kv_cache_bytes_per_token(m, "bf16") == 40 * 1 * 128 * 2 * 2


def test_real_gptj_keys():
    m = parse(dict(model_type="gptj", n_embd=4096, n_head=16, n_layer=28, n_positions=2048, vocab_size=50400,
                   rotary_dim=64))
    # GPT-J-6B: 6,053,381,344 parameters (EleutherAI's model card).
    assert m.param_count() == pytest.approx(6_053_381_344, rel=1e-3) and kv_cache_bytes_per_token(m, "fp16") == 28 * 16 * 256 * 2 * 2


def test_gpt_neo_local_layers_are_sliding():
    # GPT-Neo 1.3B: 24 layers alternating global and local (window 256), 16 heads, d 2048.
    cfg = dict(model_type="gpt_neo", hidden_size=2048, num_heads=16, num_layers=24, vocab_size=50257,
               max_position_embeddings=2048, window_size=256, attention_types=[[["global", "local"], 12]])
    m = parse(cfg)
    per_layer = 16 * 128 * 2 * 2
    assert kv_cache_bytes(m, 2048) == 12 * per_layer * 2048 + 12 * per_layer * 256


def test_old_phi_msft_keys():
    m = parse(dict(model_type="phi-msft", n_embd=2560, n_head=32, n_layer=32, n_inner=None, n_positions=2048,
                   vocab_size=51200))
    assert m.param_count() == 2_779_683_840  # phi-2, same weights in either config format


def test_qwen15_moe_shared_expert():
    # Qwen1.5-MoE-A2.7B card: 14.3B total, 2.7B activated; 24 layers, 16 heads, 60 experts (top 4) of
    # 1408 plus a shared expert of 5632.
    cfg = dict(model_type="qwen2_moe", hidden_size=2048, intermediate_size=5632, moe_intermediate_size=1408,
               shared_expert_intermediate_size=5632, num_experts=60, num_experts_per_tok=4,
               num_attention_heads=16, num_key_value_heads=16, num_hidden_layers=24, vocab_size=151936,
               decoder_sparse_step=1, mlp_only_layers=[], use_sliding_window=False, sliding_window=32768)
    m = parse(cfg)
    assert m.param_count() == pytest.approx(14.3e9, rel=0.01)
    assert m.active_param_count() == pytest.approx(2.7e9, rel=0.01)
    assert kv_cache_bytes(m, 32768, dtype="bf16") == 24 * 16 * 128 * 2 * 2 * 32768  # no window, no experts


def test_qwen3_moe_sparse_step_and_dense_layers():
    cfg = dict(model_type="qwen3_moe", hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
               num_experts=8, num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2,
               num_hidden_layers=6, vocab_size=100, decoder_sparse_step=2, mlp_only_layers=[5])
    assert [layer.ffn for layer in parse(cfg).layers] == ["dense", "moe", "dense", "moe", "dense", "dense"]


def test_minicpm_moe_is_read():
    # MiniCPM-MoE-8x2B card: 13.6B total, 4B activated, both without the (tied) embedding; 40 layers,
    # d 2304, 36 heads, 8 experts of 5760 (top 2).
    m = parse(dict(model_type="minicpm", hidden_size=2304, intermediate_size=5760, num_attention_heads=36,
                   num_key_value_heads=36, num_hidden_layers=40, vocab_size=122753, num_experts=8,
                   num_experts_per_tok=2, tie_word_embeddings=True))
    embedding = 122753 * 2304
    assert m.param_count() - embedding == pytest.approx(13.6e9, rel=0.01)
    assert m.active_param_count() - embedding == pytest.approx(4.0e9, rel=0.01)
    assert kv_cache_bytes_per_token(m, "bf16") == 40 * 36 * 64 * 2 * 2


def test_jamba_attention_every_eighth_layer():
    # Jamba-v0.1 card: 52B total, 12B active; 32 layers, 1 attention : 7 Mamba, MoE every other layer
    # (16 experts, top 2), 32 heads / 8 KV heads, d 4096.
    cfg = dict(model_type="jamba", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
               num_key_value_heads=8, num_hidden_layers=32, vocab_size=65536, num_experts=16,
               num_experts_per_tok=2, attn_layer_period=8, attn_layer_offset=4, expert_layer_period=2,
               expert_layer_offset=1, mamba_d_state=16, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=256,
               mamba_conv_bias=True, mamba_proj_bias=False)
    m = parse(cfg)
    assert [i for i, layer in enumerate(m.layers) if layer.caches_kv] == [4, 12, 20, 28]
    assert kv_cache_bytes_per_token(m, "bf16") == 4 * 8 * 128 * 2 * 2
    assert m.param_count() == pytest.approx(52e9, rel=0.01)
    assert m.active_param_count() == pytest.approx(12e9, rel=0.05)


def test_mistral3_nested_text_config_and_tie_default():
    # Mistral-Small-3.1-24B: text_config of a Mistral LM (40 layers, 32 heads / 8 KV of 128, no window).
    cfg = dict(model_type="mistral3", vision_config=dict(model_type="pixtral"),
               text_config=dict(model_type="mistral", hidden_size=5120, intermediate_size=32768, head_dim=128,
                                num_attention_heads=32, num_key_value_heads=8, num_hidden_layers=40,
                                vocab_size=131072, sliding_window=None))
    m = parse(cfg)
    assert kv_cache_bytes(m, 32768, dtype="bf16") == 40 * 8 * 256 * 2 * 32768
    assert not m.tie_word_embeddings  # MistralConfig's default (the outer Mistral3Config's is True)
    assert any("vision_config not counted" in n for n in m.notes)


def test_absent_keys_take_hf_defaults():
    assert tie_default("gemma") and tie_default("gpt2") and not tie_default("llama")
    assert tie_default("some_remote_code_type")  # PretrainedConfig's default
    gemma = parse(dict(model_type="gemma", hidden_size=3072, intermediate_size=24576, num_attention_heads=16,
                       num_key_value_heads=16, head_dim=256, num_hidden_layers=28, vocab_size=256000))
    assert gemma.tie_word_embeddings and gemma.param_count() == pytest.approx(8.54e9, rel=0.01)  # Gemma-7B
    # A flat Mistral config without the key gets MistralConfig's 4096-token window.
    mistral = parse(dict(model_type="mistral", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                         num_key_value_heads=8, num_hidden_layers=32, vocab_size=32000))
    assert mistral.sliding_window == 4096
    # No model_type: nothing is assumed.
    with pytest.raises(ValueError, match="missing required field 'intermediate_size'"):
        parse(dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, vocab_size=10))


def test_gemma3_text_default_pattern():
    cfg = dict(model_type="gemma3_text", hidden_size=1152, intermediate_size=6912, num_attention_heads=4,
               num_key_value_heads=1, head_dim=256, num_hidden_layers=26, vocab_size=262144, sliding_window=512)
    kinds = [layer.mixer for layer in parse(cfg).layers]
    assert [i for i, k in enumerate(kinds) if k == "full"] == [5, 11, 17, 23]


def test_v_head_dim_differs_from_k():
    m = parse(dict(model_type="llama", hidden_size=1024, intermediate_size=2048, num_attention_heads=8,
                   num_key_value_heads=2, head_dim=192, v_head_dim=128, num_hidden_layers=4, vocab_size=100))
    assert kv_cache_bytes_per_token(m, "bf16") == 4 * 2 * (192 + 128) * 2


@settings(max_examples=60, deadline=None)
@given(kinds=st.lists(st.sampled_from(["full_attention", "sliding_attention", "linear_attention"]), min_size=1,
                      max_size=24),
       window=st.integers(1, 5000), tokens=st.integers(1, 20000), kv=st.sampled_from([1, 2, 4]))
def test_layer_types_sum_layer_by_layer(kinds, window, tokens, kv):
    cfg = dict(model_type="gemma3_text", hidden_size=256, intermediate_size=512, num_attention_heads=4,
               num_key_value_heads=kv, head_dim=64, num_hidden_layers=len(kinds), vocab_size=100,
               sliding_window=window, layer_types=kinds)  # a config class with sliding_window (LlamaConfig has none)
    m = parse(cfg)
    per_layer = kv * 64 * 2 * 2
    want = sum(per_layer * {"full_attention": tokens, "sliding_attention": min(tokens, window),
                            "linear_attention": 0}[k] for k in kinds)
    assert kv_cache_bytes(m, tokens) == want
    with pytest.raises(ValueError, match="linear-attention"):  # its mixers' weights are not modelled
        m.param_count() if "linear_attention" in kinds else m.replace(params_unsupported="linear-attention").param_count()


BASE = dict(model_type="deepseek_v3", hidden_size=256, intermediate_size=512, moe_intermediate_size=64,
            num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=4, vocab_size=100, n_routed_experts=4,
            num_experts_per_tok=2, kv_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32)


@pytest.mark.parametrize("changes, match", [
    (dict(kv_lora_rank=-1), "'kv_lora_rank' must be >= 1, got -1"),
    (dict(first_k_dense_replace=9), "'first_k_dense_replace' must be between 0 and num_hidden_layers"),
    (dict(sliding_window=True), "'sliding_window' must be a positive integer number of tokens or null, got True"),
    (dict(sliding_window=1.5), "'sliding_window' must be a positive integer .* got 1.5"),
    (dict(tie_word_embeddings="false"), "'tie_word_embeddings' must be a JSON boolean"),
    (dict(num_attention_heads=0), "'num_attention_heads' must be >= 1, got 0"),
    (dict(num_hidden_layers="61"), "'num_hidden_layers' must be an integer, got '61'"),
    (dict(layer_types=["full_attention"]), "'layer_types' must be a list of 4 layer kinds"),
    (dict(layer_types=["full_attention"] * 3 + ["cross_attention"]), "kinds not modelled: \\['cross_attention'\\]"),
    (dict(moe_layer_freq=2), "moe_layer_freq != 1"),
])
def test_invalid_fields_are_named(changes, match):
    with pytest.raises(ValueError, match=match):
        parse({**BASE, **changes})
    assert parse(BASE).uses_mla


def test_file_errors_name_the_file(tmp_path):
    latin = tmp_path / "config.json"
    latin.write_bytes('{"_name_or_path": "Mod\u00e8le"}'.encode("latin-1"))
    with pytest.raises(ValueError, match=rf"{latin}: not UTF-8 text \(byte 0xe8 at offset 22\)"):
        ModelConfig.from_hf_config(latin)
    array = tmp_path / "array.json"
    array.write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="array.json: expected a JSON object, got list"):
        ModelConfig.from_hf_config(array)
    bad = tmp_path / "pattern.json"
    bad.write_text(json.dumps(dict(model_type="nemotron_h", hidden_size=64, num_attention_heads=4,
                                   num_hidden_layers=3, vocab_size=10, intermediate_size=8,
                                   hybrid_override_pattern="M*X")))
    with pytest.raises(ValueError, match="pattern.json: field 'hybrid_override_pattern' must be a string of 3"):
        ModelConfig.from_hf_config(bad)
