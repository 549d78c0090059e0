"""Every real config.json fixture: KV bytes at 4k and 32k tokens against the published architecture,
or a clear refusal. The expected numbers are written here from model cards and papers (layer
counts, KV heads, head sizes, windows), not read through ringlab's parser."""

import json
from pathlib import Path

import pytest

from ringlab.calc import kv_cache_bytes
from ringlab.calc.models import ModelConfig

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "hf_configs"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text())["files"]


def gqa(layers, kv_heads, head_dim, v_dim=None, window=None):
    """A group of attention layers: (count, kv heads, K size, V size, window or None)."""
    return ("kv", layers, kv_heads, head_dim, v_dim or head_dim, window)


def mla(layers, kv_lora_rank, rope_dim, index_key_bytes=0):
    """MLA layers; ``index_key_bytes``: DeepSeek sparse attention's indexer key per token and layer."""
    return ("mla", layers, kv_lora_rank, rope_dim, index_key_bytes)


def expected_bytes(groups, tokens, width=2):
    """Direct sum over the layer groups: K and V per KV head, or MLA's one latent (plus DSA's indexer key,
    stored in FP8 whatever the latent's width); windows cap tokens."""
    total = 0
    for g in groups:
        if g[0] == "kv":
            _, n, kv, dk, dv, window = g
            total += n * kv * (dk + dv) * width * (min(tokens, window) if window else tokens)
        else:
            _, n, rank, rope, index = g
            total += n * ((rank + rope) * width + index) * tokens
    return total


LLAMA3_8B = [gqa(32, 8, 128)]  # Llama 3 paper (Dubey et al. 2024), Table 3: 32 layers, 8 KV heads, d 4096 / 32
DEEPSEEK_V3 = [mla(61, 512, 64)]  # DeepSeek-V3 report, sec. 4.2: 61 layers, d_c = 512, d_h^R = 64

PUBLISHED = {
    "llama-2-70b.json": [gqa(80, 8, 128)],  # Llama 2 paper, sec. 2.2 / Table 1: GQA (8 KV) for 70B, 80 layers
    "llama-3-8b.json": LLAMA3_8B,
    "llama-3.1-8b.json": LLAMA3_8B,
    "llama-3.1-8b-ollama.json": LLAMA3_8B,
    "llama-3.1-70b.json": [gqa(80, 8, 128)],  # Llama 3 paper, Table 3
    "llama-3.1-405b.json": [gqa(126, 8, 128)],  # Llama 3 paper, Table 3: 126 layers, 128 heads, 8 KV
    "llava-1.5-7b.json": [gqa(32, 32, 128)],  # LLaVA-1.5 on Vicuna-7B (Llama-2-7B): 32 layers, MHA 32 x 128
    "mistral-7b.json": [gqa(32, 8, 128, window=4096)],  # Mistral 7B paper, Table 1: window_size 4096
    "mixtral-8x7b.json": [gqa(32, 8, 128)],  # Mixtral paper, Table 1 (v0.1 config: sliding_window null)
    "mixtral-8x7b-verbatim.json": [gqa(32, 8, 128)],
    "mixtral-8x22b.json": [gqa(56, 8, 128)],  # Mixtral-8x22B release: 56 layers, 48 heads, 8 KV heads of 128
    "qwen2-72b.json": [gqa(80, 8, 128)],  # Qwen2 report, Table 1: 80 layers, 64 Q / 8 KV heads
    "qwen3-0.6b.json": [gqa(28, 8, 128)],  # Qwen3 report, Table 1: 28 layers, 16 Q / 8 KV, head 128
    "qwen3-8b.json": [gqa(36, 8, 128)],  # Qwen3 report, Table 1: 36 layers, 32 / 8
    "qwen3-32b.json": [gqa(64, 8, 128)],  # Qwen3 report, Table 1: 64 layers, 64 / 8
    "qwen3-30b-a3b.json": [gqa(48, 4, 128)],  # Qwen3 report, Table 2: 48 layers, 32 / 4
    "qwen3-235b-a22b.json": [gqa(94, 4, 128)],  # Qwen3 report, Table 2: 94 layers, 64 / 4
    "qwen3-coder-480b-a35b.json": [gqa(62, 8, 128)],  # Qwen3-Coder model card: 62 layers, 96 Q / 8 KV
    "qwen3-vl-8b.json": [gqa(36, 8, 128)],  # Qwen3-VL-8B model card: the Qwen3-8B language model
    "qwen3-vl-30b-a3b.json": [gqa(48, 4, 128)],  # Qwen3-VL-30B-A3B model card: the Qwen3-30B-A3B LM
    "mimo-7b.json": [gqa(36, 8, 128)],  # MiMo report, Table 1: 36 layers, 32 heads, 8 KV groups, d 4096
    "phi-3-mini-128k.json": [gqa(32, 32, 96)],  # Phi-3 report, sec. 2: 32 layers, d 3072, 32 heads (MHA)
    "phi-2.json": [gqa(32, 32, 80)],  # Phi-2 model card: 32 layers, d 2560, 32 heads
    "gpt2.json": [gqa(12, 12, 64)],  # GPT-2 paper, Table 2 (smallest): 12 layers, d 768, 12 heads
    "gpt-j-6b-gpt-neo-format.json": [gqa(28, 16, 256)],  # GPT-J-6B card: 28 layers, d 4096, 16 heads of 256
    "chatglm2-6b.json": [gqa(28, 2, 128)],  # ChatGLM2-6B card / GLM report: MQA with 2 groups of 128
    "falcon-7b.json": [gqa(32, 1, 64)],  # Falcon paper, Table 1: 7B, 32 layers, 71 heads of 64, multiquery
    "falcon-40b.json": [gqa(60, 8, 64)],  # Falcon paper: 40B, 60 layers, 128 heads of 64, 8 KV groups
    "deepseek-v3.json": DEEPSEEK_V3,
    "deepseek-v3-verbatim.json": DEEPSEEK_V3,
    "deepseek-r1.json": DEEPSEEK_V3,  # DeepSeek-R1 report: trained from DeepSeek-V3-Base (same architecture)
    "kimi-k2.json": DEEPSEEK_V3,  # Kimi K2 report: 61 layers, MLA as DeepSeek-V3 (64 heads, same latent)
    "kimi-k2.5.json": DEEPSEEK_V3,  # Kimi K2.5: the Kimi K2 language model plus a vision tower (not counted)
    "minicpm3-4b.json": [mla(62, 256, 32)],  # MiniCPM3-4B card: 62 layers, MLA, kv_lora_rank 256, rope 32
    # Interleaved attention.
    "gemma-2-9b-it.json": [gqa(21, 8, 256), gqa(21, 8, 256, window=4096)],  # Gemma 2 report, Table 1:
    # 42 layers, 8 KV heads of 256, local (4096) and global layers alternating
    "gemma-3-27b.json": [gqa(10, 16, 128), gqa(52, 16, 128, window=1024)],  # Gemma 3 report: 62 layers,
    # 5 local : 1 global, local window 1024; 32 Q / 16 KV heads of 128
    "gpt-oss-20b.json": [gqa(12, 8, 64), gqa(12, 8, 64, window=128)],  # gpt-oss model card: 24 layers,
    # 64 heads of 64, 8 KV heads, dense and 128-token banded layers alternating
    "gpt-oss-120b.json": [gqa(18, 8, 64), gqa(18, 8, 64, window=128)],  # gpt-oss model card: 36 layers
    "llama-4-scout.json": [gqa(12, 8, 128), gqa(36, 8, 128, window=8192)],  # Llama 4 card: 48 layers,
    # 8 KV heads of 128; iRoPE: every 4th layer global (NoPE), the rest chunked attention of 8192
    "llama-4-maverick.json": [gqa(12, 8, 128), gqa(36, 8, 128, window=8192)],
    # Hybrids and pruned models.
    "nemotron-h-56b.json": [gqa(10, 8, 128)],  # Nemotron-H paper (arXiv:2504.03624), Table 1: 118 layers of
    # which 10 self-attention (64 Q / 8 KV heads of 128), 54 Mamba-2 and 54 FFN
}

REFUSED: dict[str, str] = {}  # every real config.json here is modelled (refusals: tests/calc/test_hf_families.py)


def _per_layer_expected(file, text_config=False):
    """Layer kinds counted straight from the file's own per-layer lists (no parser involved)."""
    config = json.loads((FIXTURES / file).read_text())
    return config["text_config"] if text_config else config


def _deepseek_v32_expected():
    """DeepSeek-V3.2: DeepSeek-V3's 61 MLA layers (d_c 512, d_h^R 64), and in each the lightning indexer's key:
    index_head_dim = 128 FP8 bytes plus one fp32 scale per 128 (the Indexer's k_cache and k_scale_cache in
    DeepSeek-V3.2-Exp's inference/model.py): 132 B per token and layer."""
    c = _per_layer_expected("deepseek-v3.2.json")
    assert (c["num_hidden_layers"], c["kv_lora_rank"], c["qk_rope_head_dim"], c["index_head_dim"]) == (61, 512, 64, 128)
    return [mla(61, 512, 64, index_key_bytes=128 + 4)]


def _gemma4_expected():
    """Gemma-4 26B-A4B: 30 layers, 5 of them global (every 6th in layer_types). Sliding layers: 8 KV heads of
    head_dim 256 in a 1,024-token window; global ones: K=V projection with 2 KV heads of global_head_dim 512,
    K (normed, rotated) and V (normed) both cached."""
    c = _per_layer_expected("gemma-4-26b-a4b.json", text_config=True)
    kinds = c["layer_types"]
    assert (kinds.count("full_attention"), kinds.count("sliding_attention")) == (5, 25)
    assert (c["num_key_value_heads"], c["head_dim"], c["sliding_window"]) == (8, 256, 1024)
    assert (c["num_global_key_value_heads"], c["global_head_dim"], c["attention_k_eq_v"]) == (2, 512, True)
    return [gqa(25, 8, 256, window=1024), gqa(5, 2, 512)]


def _mimo_v2_expected():
    """MiMo-V2-Flash: 48 layers, hybrid_layer_pattern 1 = sliding window (128 tokens, 8 KV heads), 0 = full
    attention (4 KV heads); K heads of 192 and V heads of 128 in both kinds."""
    c = _per_layer_expected("mimo-v2-flash.json")
    pattern = c["hybrid_layer_pattern"]
    assert (pattern.count(0), pattern.count(1)) == (9, 39)
    assert (c["num_key_value_heads"], c["swa_num_key_value_heads"], c["sliding_window"]) == (4, 8, 128)
    assert (c["head_dim"], c["v_head_dim"], c["swa_head_dim"], c["swa_v_head_dim"]) == (192, 128, 192, 128)
    return [gqa(9, 4, 192, 128), gqa(39, 8, 192, 128, window=128)]


PUBLISHED["deepseek-v3.2.json"] = _deepseek_v32_expected()
PUBLISHED["gemma-4-26b-a4b.json"] = _gemma4_expected()
PUBLISHED["mimo-v2-flash.json"] = _mimo_v2_expected()


def _nemotron_nas_expected():
    """Llama-3.3-Nemotron-Super-49B: the model card says NAS skips attention in some blocks; which ones
    and the group size are only in block_configs, so they are counted here directly from the file."""
    blocks = json.loads((FIXTURES / "nemotron-super-49b.json").read_text())["block_configs"]
    groups = [b["attention"]["n_heads_in_group"] for b in blocks if not b["attention"]["no_op"]]
    assert len(groups) == 49 and set(groups) == {8}  # 49 of 80 blocks attend, 64 / 8 = 8 KV heads each
    return [gqa(49, 64 // 8, 128)]


PUBLISHED["nemotron-super-49b.json"] = _nemotron_nas_expected()


def test_manifest_lists_every_fixture_with_its_source():
    files = {p.name for p in FIXTURES.glob("*.json")} - {"manifest.json"}
    listed = [row["file"] for row in MANIFEST]
    assert sorted(listed) == sorted(files) and len(listed) == len(set(listed))
    for row in MANIFEST:
        assert row["model"]
        if row["verbatim"]:
            assert row["repository"] and row["path"] and len(row["commit"]) == 40
    assert sum(row["verbatim"] for row in MANIFEST) >= 37 and len(MANIFEST) >= 40


def test_every_fixture_is_checked():
    assert set(PUBLISHED) | set(REFUSED) == {row["file"] for row in MANIFEST}
    assert not set(PUBLISHED) & set(REFUSED)


@pytest.mark.parametrize("file", sorted(PUBLISHED))
@pytest.mark.parametrize("tokens", [4096, 32768])
def test_fixture_matches_published_architecture(file, tokens):
    model = ModelConfig.from_hf_config(FIXTURES / file)
    assert kv_cache_bytes(model, tokens, dtype="bf16") == expected_bytes(PUBLISHED[file], tokens)


def test_interleaved_and_hybrid_ratios():
    """The two facts of notebook 05: Gemma-2's cache grows at half the rate past its window, and a
    hybrid caches a small fraction of what the same width as a dense transformer would."""
    gemma = ModelConfig.from_hf_config(FIXTURES / "gemma-2-9b-it.json")
    slope = (kv_cache_bytes(gemma, 8192 + 1024) - kv_cache_bytes(gemma, 8192)) / 1024
    early = (kv_cache_bytes(gemma, 2048) - kv_cache_bytes(gemma, 1024)) / 1024
    assert slope * 2 == early
    hybrid = ModelConfig.from_hf_config(FIXTURES / "nemotron-h-56b.json")
    dense = hybrid.replace(layer_types=None, mlp_types=None)
    assert kv_cache_bytes(hybrid, 32768) * 118 == kv_cache_bytes(dense, 32768) * 10


PUBLISHED_PARAMS = {  # total and activated parameters, from the model cards; rel tolerance 1.5 %
    "gpt2.json": (124_439_808, None),  # exact: the 124M checkpoint
    "phi-2.json": (2.78e9, None),
    "qwen3-0.6b.json": (0.6e9, None), "qwen3-8b.json": (8.2e9, None), "qwen3-32b.json": (32.8e9, None),
    "qwen3-30b-a3b.json": (30.5e9, 3.3e9), "qwen3-235b-a22b.json": (235e9, 22e9),
    "qwen3-coder-480b-a35b.json": (480e9, 35e9), "mixtral-8x22b.json": (141e9, 39e9),
    "kimi-k2.json": (1.04e12, 32.6e9), "llama-4-maverick.json": (400e9, 17.2e9),
    "gemma-2-9b-it.json": (9.24e9, None), "gemma-3-27b.json": (27e9, None),
    "nemotron-h-56b.json": (56e9, None), "nemotron-super-49b.json": (49.9e9, None),
    "chatglm2-6b.json": (6.24e9, None), "llava-1.5-7b.json": (6.74e9, None),
    "minicpm3-4b.json": (4.07e9, None), "llama-3.1-405b.json": (405.8e9, None),
    "mimo-v2-flash.json": (309e9, None),  # MiMo-V2-Flash card: 309B total (its "15B active" is rounded)
}


@pytest.mark.parametrize("file", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_model_cards(file):
    model = ModelConfig.from_hf_config(FIXTURES / file)
    total, active = PUBLISHED_PARAMS[file]
    assert model.param_count() == pytest.approx(total, rel=0.015, abs=0)
    if active:
        assert model.active_param_count() == pytest.approx(active, rel=0.03)


def test_gpt_oss_counts_as_its_card_does():
    # The gpt-oss card's active counts leave out the input embedding (201,088 x 2,880).
    for file, total, active in (("gpt-oss-20b.json", 20.91e9, 3.61e9), ("gpt-oss-120b.json", 116.83e9, 5.13e9)):
        m = ModelConfig.from_hf_config(FIXTURES / file)
        assert m.param_count() == pytest.approx(total, rel=1e-3)
        assert m.active_param_count() - 201_088 * 2_880 == pytest.approx(active, rel=2e-3)


def test_gpt2_count_by_hand():
    # wte + wpe + 12 x (ln_1, c_attn, c_proj, ln_2, c_fc, c_proj) + ln_f, all with biases; tied head.
    h, v, n = 768, 50257, 1024
    layer = 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + 2 * h + (h * 4 * h + 4 * h) + (4 * h * h + h)
    assert ModelConfig.from_hf_config(FIXTURES / "gpt2.json").param_count() == v * h + n * h + 12 * layer + 2 * h
