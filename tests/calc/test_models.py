import json
from pathlib import Path

import pytest

from ringlab.calc.models import MODELS, ModelConfig, get_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"

# Published parameter counts (model cards / papers); all within 1% of the count from the config.
PUBLISHED = {
    "llama-2-7b": 6.74e9, "llama-2-13b": 13.0e9, "llama-2-70b": 68.98e9,  # Llama 2 paper / HF safetensors
    "llama-3-8b": 8.03e9, "llama-3-70b": 70.55e9, "llama-3.1-405b": 405.8e9,
    "mistral-7b": 7.24e9, "mixtral-8x7b": 46.7e9, "qwen2-72b": 72.71e9, "deepseek-v3": 671e9,
}


def _dense_llama_by_hand(L, h, heads, kv, hd, inter, vocab, tied=False):
    """An independent closed form: embeddings, GQA attention, SwiGLU MLP, 2 RMSNorms/layer + final."""
    attn = h * heads * hd * 2 + 2 * h * kv * hd
    return vocab * h * (1 if tied else 2) + L * (attn + 3 * h * inter + 2 * h) + h


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_param_counts_match_published_within_1_percent(name):
    assert MODELS[name].param_count() == pytest.approx(PUBLISHED[name], rel=0.01)


def test_exact_counts_from_independent_formula():
    assert MODELS["llama-2-7b"].param_count() == _dense_llama_by_hand(32, 4096, 32, 32, 128, 11008, 32000) \
        == 6_738_415_616
    assert MODELS["llama-2-70b"].param_count() == _dense_llama_by_hand(80, 8192, 64, 8, 128, 28672, 32000) \
        == 68_976_648_192
    assert MODELS["llama-3-8b"].param_count() == 8_030_261_248
    assert MODELS["mistral-7b"].param_count() == 7_241_732_096


def test_qwen2_counts_qkv_bias():
    m = MODELS["qwen2-72b"]
    no_bias = _dense_llama_by_hand(80, 8192, 64, 8, 128, 29568, 152064)
    assert m.attention_bias and m.param_count() == no_bias + 80 * (64 + 2 * 8) * 128


def test_mixtral_total_and_active():
    m = MODELS["mixtral-8x7b"]
    assert m.param_count() == pytest.approx(46.7e9, rel=0.01)
    assert m.active_param_count() == pytest.approx(12.9e9, rel=0.01)
    # total - active = the 6 unused experts of every layer
    assert m.param_count() - m.active_param_count() == 32 * 6 * 3 * 4096 * 14336


def test_deepseek_v3_total_active_and_mtp():
    m = MODELS["deepseek-v3"]
    assert m.uses_mla and m.is_moe and m.num_experts == 256
    assert m.param_count() == pytest.approx(671e9, rel=0.01)
    # The report says "37B activated" (two significant figures): our count, which includes the
    # input embedding and LM head (0.93e9 each), is 37.55e9; without the input embedding 36.6e9.
    assert m.active_param_count() == pytest.approx(37e9, rel=0.02)
    assert 36.5e9 <= m.active_param_count() - m.vocab_size * m.hidden_size < 37.5e9
    # HF checkpoint: 685B = 671B main model + 14B MTP module
    assert m.param_count(include_mtp=True) == pytest.approx(685e9, rel=0.01)
    # total - active = the 248 unrouted experts of each of the 58 MoE layers
    assert m.param_count() - m.active_param_count() == 58 * (256 - 8) * 3 * 7168 * 2048


def test_falcon_counts_tied_embeddings_once():
    f7, f40 = MODELS["falcon-7b"], MODELS["falcon-40b"]
    assert f7.kv_heads == 1 and f7.head_dim == 64 and not f7.mlp_gated and f7.tie_word_embeddings
    assert f40.kv_heads == 8 and f40.norms_per_layer == 2 and f7.norms_per_layer == 1
    # by hand: fused QKV (MQA: hidden + 2 x 64), dense, 4x GELU MLP, LayerNorm(s) with bias, tied embeddings
    by_hand_7b = 65024 * 4544 + 32 * (4544 * (4544 + 128) + 4544**2 + 2 * 4544 * 18176 + 2 * 4544) + 2 * 4544
    assert f7.param_count() == by_hand_7b == 6_921_720_704
    # Model cards say "7B" / "40B"; the Hub lists 7.22B / 41.8B because the checkpoint also stores the
    # tied lm_head: unique parameters + vocab x hidden.
    assert f7.param_count() + 65024 * 4544 == pytest.approx(7.22e9, rel=0.01)
    assert f40.param_count() + 65024 * 8192 == pytest.approx(41.8e9, rel=0.01)


PRESET_TWINS = {row["file"]: row["preset"] for row in json.loads((FIXTURES / "manifest.json").read_text())["files"]
                if row.get("preset")}


@pytest.mark.parametrize("file", sorted(PRESET_TWINS))
def test_fixture_config_json_parses_like_the_preset(file):
    path = FIXTURES / file
    parsed = ModelConfig.from_hf_config(path)
    preset = MODELS[PRESET_TWINS[file]]
    assert parsed.param_count() == preset.param_count()
    assert parsed.active_param_count() == preset.active_param_count()
    ignore = {"name", "source"}
    for field in ModelConfig.__dataclass_fields__:
        if field not in ignore:
            assert getattr(parsed, field) == getattr(preset, field), field
    assert get_model(str(path)).param_count() == preset.param_count()


def test_every_family_has_a_fixture():
    types = {ModelConfig.from_hf_config(FIXTURES / file).model_type for file in PRESET_TWINS}
    assert {"llama", "mistral", "mixtral", "qwen2", "deepseek_v3", "falcon", "gemma2", "gpt_oss", "nemotron_h"} <= types


def test_special_cases_in_from_hf_config():
    base = dict(hidden_size=1024, num_attention_heads=16, num_hidden_layers=2, intermediate_size=4096,
                vocab_size=1000)
    m = ModelConfig.from_hf_config(base)
    assert m.head_dim == 64 and m.num_key_value_heads == 16  # defaults: hidden // heads, MHA
    assert ModelConfig.from_hf_config(dict(base, head_dim=128)).head_dim == 128
    off = ModelConfig.from_hf_config(dict(base, model_type="qwen2", sliding_window=4096, use_sliding_window=False))
    assert off.sliding_window is None
    on = ModelConfig.from_hf_config(dict(base, model_type="qwen2", sliding_window=512, use_sliding_window=True,
                                         max_window_layers=1))
    assert on.sliding_window == 512 and on.max_window_layers == 1
    # Falcon: multi_query without new_decoder_architecture -> 1 KV head; old RW key names
    rw = ModelConfig.from_hf_config(dict(model_type="RefinedWebModel", n_embed=1024, n_head=16, n_layer=2,
                                         vocab_size=1000, multi_query=True))
    assert rw.num_key_value_heads == 1 and rw.intermediate_size == 4096
    nd = ModelConfig.from_hf_config(dict(model_type="falcon", hidden_size=1024, num_attention_heads=16,
                                         num_hidden_layers=2, vocab_size=1000, multi_query=True,
                                         new_decoder_architecture=True, num_kv_heads=4))
    assert nd.num_key_value_heads == 4
    mha = ModelConfig.from_hf_config(dict(model_type="falcon", hidden_size=1024, num_attention_heads=16,
                                          num_hidden_layers=2, vocab_size=1000, multi_query=False))
    assert mha.num_key_value_heads == 16


def test_bad_configs_and_names(tmp_path):
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelConfig.from_hf_config(dict(hidden_size=64, num_attention_heads=4, num_hidden_layers=1, vocab_size=10))
    with pytest.raises(ValueError, match="multiple of num_key_value_heads"):
        ModelConfig.from_hf_config(dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=3,
                                        num_hidden_layers=1, vocab_size=10, intermediate_size=8))
    with pytest.raises(ValueError, match="not divisible"):
        ModelConfig.from_hf_config(dict(hidden_size=65, num_attention_heads=4, num_hidden_layers=1,
                                        vocab_size=10, intermediate_size=8))
    with pytest.raises(ValueError, match="positive"):
        MODELS["llama-2-7b"].replace(num_hidden_layers=0)
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        get_model(bad)
    with pytest.raises(ValueError, match="not found"):
        get_model("missing/config.json")
    with pytest.raises(ValueError, match="Close matches: llama-2-70b"):
        get_model("llama2-70b")
    with pytest.raises(TypeError):
        get_model(7)


def test_get_model_accepts_directory_and_objects(tmp_path):
    (tmp_path / "config.json").write_text((FIXTURES / "llama-2-70b.json").read_text())
    m = get_model(tmp_path)
    assert m.name == tmp_path.name and m.param_count() == MODELS["llama-2-70b"].param_count()
    assert get_model(m) is m and get_model("Llama-2-70B") is MODELS["llama-2-70b"]


def test_weight_bytes():
    assert MODELS["llama-2-7b"].weight_bytes("fp16") == 2 * 6_738_415_616
    assert MODELS["llama-2-7b"].weight_bytes("int4") == 6_738_415_616 // 2
