"""Card 05 (KV-cache memory): the values its text uses, and fresh models and batch shapes."""

from __future__ import annotations

from ringlab.calc import GB, GiB, get_model, kv_cache_bytes, kv_cache_bytes_per_token, kv_heads_per_rank
from ringlab.check.cards import Ask, Slip

PARAMS = {"model": "llama-2-70b", "tokens": 4096, "seqs": 32}  # the fixed card's numbers
# real grouped-query configs with 8 KV heads and no sliding window (the text's GQA and TP claims hold for each)
MODELS = ("llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3.1-405b", "qwen2-72b", "mixtral-8x7b", "falcon-40b")
TOKENS = (1024, 2048, 4096, 8192, 16384, 32768)
SEQS = (4, 8, 16, 32, 64, 128)

ASKS = (
    Ask("per_token", "KV-cache bytes per token", unit="B", show="B", rel_tol=0.001),
    Ask("total", "KV cache of the whole batch", unit="B", show="B", world_size="seqs", per="sequence"),
)
SLIPS = tuple(Slip(key, wrong, "the {heads} query heads used instead of the {kv_heads} KV heads: only "
                   "num_key_value_heads are cached") for key, wrong in (("per_token", "wrong_per_token"),
                                                                        ("total", "wrong")))


def values(model: str = "llama-2-70b", tokens: int = 4096, seqs: int = 32) -> dict:
    """KV cache of ``seqs`` sequences of ``tokens`` tokens of preset ``model`` in fp16, with the follow-ups."""
    m = get_model(model)
    total = kv_cache_bytes(m, tokens, seqs, dtype="fp16")
    wrong = kv_cache_bytes(m.replace(num_key_value_heads=m.num_attention_heads), tokens, seqs, dtype="fp16")
    mqa = m.replace(num_key_value_heads=1)
    ds = get_model("deepseek-v3")
    mistral = get_model("mistral-7b")
    long_ctx = 32768
    return {
        "model": model, "layers": m.num_hidden_layers, "heads": m.num_attention_heads, "kv_heads": m.num_key_value_heads,
        "head_dim": m.head_dim, "tokens": tokens, "seqs": seqs,
        "per_token": kv_cache_bytes_per_token(m, "fp16"),
        "per_token_kib": kv_cache_bytes_per_token(m, "fp16") / 2**10, "total": total, "total_gb": total / GB,
        "total_gib": total / GiB, "per_seq_gib": total / seqs / GiB,
        "wrong": wrong, "wrong_gb": wrong / GB, "wrong_per_token": wrong // (tokens * seqs), "wrong_ratio": wrong / total,
        "mqa_per_token": kv_cache_bytes_per_token(mqa, "fp16"),
        "mqa_gib": kv_cache_bytes(mqa, tokens, seqs, dtype="fp16") / GiB,
        "ds_layers": ds.num_hidden_layers, "ds_rank": ds.kv_lora_rank, "ds_rope": ds.qk_rope_head_dim,
        "ds_heads": ds.num_attention_heads, "ds_per_token": kv_cache_bytes_per_token(ds, "bf16"),
        "window": mistral.sliding_window, "long_ctx": long_ctx,
        "mistral_long_gib": kv_cache_bytes(mistral, long_ctx, dtype="fp16") / GiB,
        "mistral_unwindowed_gib": kv_cache_bytes_per_token(mistral, "fp16") * long_ctx / GiB,
        "tp8_heads": kv_heads_per_rank(m, 8), "tp8_gib": kv_cache_bytes(m, tokens, seqs, "fp16", tp=8) / GiB,
        "tp16_heads": kv_heads_per_rank(m, 16), "tp16_gib": kv_cache_bytes(m, tokens, seqs, "fp16", tp=16) / GiB,
        "odd_tokens": tokens + 1, "block": 16, "paged_tokens": -(-(tokens + 1) // 16) * 16,
        "paged": kv_cache_bytes(m, tokens + 1, seqs, "fp16", block_size=16),
        "unpaged": kv_cache_bytes(m, tokens + 1, seqs, "fp16"),
        **_per_layer(long_ctx),
    }


def _per_layer(long_ctx: int) -> dict:
    """Interleaved (Gemma-2-9B) and hybrid (Nemotron-H-56B) attention, from the per-layer model."""
    g, h = get_model("gemma-2-9b"), get_model("nemotron-h-56b")
    window = g.sliding_window
    per_token = kv_cache_bytes_per_token(g, "fp16")
    dense = h.replace(layer_types=None, mlp_types=None)
    return {
        "g_layers": g.num_hidden_layers, "g_window": window, "g_kv": g.num_key_value_heads, "g_head_dim": g.head_dim,
        "g_per_token": per_token, "g_global": g.count_layers("full"),
        "g_slope": kv_cache_bytes(g, window + 2, dtype="fp16") - kv_cache_bytes(g, window + 1, dtype="fp16"),
        "g_long_gib": kv_cache_bytes(g, long_ctx, dtype="fp16") / GiB,
        "g_uniform_gib": per_token * long_ctx / GiB, "g_capped_gib": per_token * window / GiB,
        "h_attn": h.count_layers("full"), "h_layers": h.num_hidden_layers,
        "h_per_token": kv_cache_bytes_per_token(h, "fp16"), "h_dense_per_token": kv_cache_bytes_per_token(dense, "fp16"),
        "h_frac": kv_cache_bytes_per_token(h, "fp16") / kv_cache_bytes_per_token(dense, "fp16"),
    }


def draw(rng) -> dict:
    """A model of :data:`MODELS`, a context of :data:`TOKENS` and a batch of :data:`SEQS` sequences."""
    return {"model": str(rng.choice(MODELS)), "tokens": int(rng.choice(TOKENS)), "seqs": int(rng.choice(SEQS))}
