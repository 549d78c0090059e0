"""Grader for topic 05, KV-cache memory (card 05).

* 05a ``kv_cache_bytes(config, tokens, batch_size, bytes_per_element) -> int``: from a Hugging Face
  config dict, with GQA, MQA, explicit ``head_dim`` and sliding-window models.

Expected values are written out here from the attention layout of the HF configs, not taken from
``ringlab.calc``; tests/check/graders/test_calc_graders.py checks that both agree. Wrong answers that match a known
mistake get a message naming it: num_attention_heads used as KV heads, no factor 2, an ignored window.
"""

from __future__ import annotations

from ..engine import CaseFailure, as_bytes, run_grader, within_a_byte
from ..exercise import Exercise

# Fields copied from each model's config.json on the Hugging Face Hub (only those the cache depends on).
LLAMA_2_70B = {"_name_or_path": "meta-llama/Llama-2-70b-hf", "num_hidden_layers": 80, "num_attention_heads": 64,
               "num_key_value_heads": 8, "hidden_size": 8192}


LLAMA_3_8B = {"_name_or_path": "meta-llama/Meta-Llama-3-8B", "num_hidden_layers": 32, "num_attention_heads": 32,
              "num_key_value_heads": 8, "hidden_size": 4096}


# tiiuae/falcon-7b says multi_query: true (one KV head); written here with the standard field name.
FALCON_7B_MQA = {"_name_or_path": "tiiuae/falcon-7b", "num_hidden_layers": 32, "num_attention_heads": 71,
                 "num_key_value_heads": 1, "hidden_size": 4544}


MISTRAL_7B_V01 = {"_name_or_path": "mistralai/Mistral-7B-v0.1", "num_hidden_layers": 32, "num_attention_heads": 32,
                  "num_key_value_heads": 8, "hidden_size": 4096, "sliding_window": 4096}


MISTRAL_7B_V02 = {**MISTRAL_7B_V01, "_name_or_path": "mistralai/Mistral-7B-Instruct-v0.2", "sliding_window": None}


# Qwen/Qwen2-72B sets sliding_window 131072 but use_sliding_window false: the window is off.
QWEN2_72B = {"_name_or_path": "Qwen/Qwen2-72B", "num_hidden_layers": 80, "num_attention_heads": 64,
             "num_key_value_heads": 8, "hidden_size": 8192, "sliding_window": 131072, "use_sliding_window": False}


GEMMA_7B = {"_name_or_path": "google/gemma-7b", "num_hidden_layers": 28, "num_attention_heads": 16,
            "num_key_value_heads": 16, "hidden_size": 3072, "head_dim": 256}


KV_CONFIGS = (LLAMA_2_70B, LLAMA_3_8B, FALCON_7B_MQA, MISTRAL_7B_V01, MISTRAL_7B_V02, GEMMA_7B, QWEN2_72B)


def _layout(config: dict) -> tuple[int, int, int, int | None]:
    """(layers, kv_heads, head_dim, window) read from a config dict; ``use_sliding_window: false`` turns the window off."""
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
    return config["num_hidden_layers"], config["num_key_value_heads"], head_dim, window


def expected_kv_bytes(config: dict, tokens: int, batch_size: int, bytes_per_element: int) -> int:
    """2 (K and V) x layers x KV heads x head_dim x bytes x min(tokens, window) x sequences."""
    layers, kv, head_dim, window = _layout(config)
    held = tokens if window is None else min(tokens, window)
    return 2 * layers * kv * head_dim * bytes_per_element * held * batch_size


def _kv_diagnosis(config: dict, tokens: int, batch_size: int, bytes_per_element: int, got: float, want: int,
                  fn=None) -> str:
    layers, kv, head_dim, window = _layout(config)
    heads = config["num_attention_heads"]
    held = tokens if window is None else min(tokens, window)
    off = config.get("sliding_window")
    if window is None and off and tokens > off and within_a_byte(got, want * off / tokens):
        return (f"this config sets use_sliding_window = false, so sliding_window = {off} is switched off: every layer "
                f"keeps all {tokens:,} tokens (expected {want:,} B)")
    if heads != kv and within_a_byte(got, want * heads / kv) and "head_dim" not in config and fn is not None:
        # head_dim = hidden // num_key_value_heads gives the same ratio: ask again with head_dim spelled out
        probe = as_bytes(fn({**config, "head_dim": head_dim}, tokens, batch_size, bytes_per_element), "kv_cache_bytes")
        if within_a_byte(probe, want):
            return (f"head_dim is hidden_size // num_attention_heads = {config['hidden_size']} // {heads} = {head_dim} "
                    f"when the config has none; dividing by num_key_value_heads ({kv}) makes it {heads // kv}x too "
                    f"large (expected {want:,} B)")
    if heads != kv and within_a_byte(got, want * heads / kv):
        return (f"you used num_attention_heads ({heads}) where num_key_value_heads ({kv}) belongs: the cache holds "
                f"K and V per KV head, and each KV head serves {heads // kv} query heads, so your answer is "
                f"{heads // kv}x too large (expected {want:,} B)")
    if within_a_byte(got * 2, want):
        return (f"{got:,.0f} B is half of the answer: the factor 2 is missing, the cache stores a K and a V "
                f"vector per KV head, layer and token (expected {want:,} B)")
    if window is not None and tokens > window and within_a_byte(got, want * tokens / held):
        return (f"this model has sliding_window = {window}: every layer keeps only the last {window} tokens, so "
                f"the cache holds min(tokens, sliding_window) = {held:,} tokens per sequence, not {tokens:,} "
                f"(expected {want:,} B)")
    fallback = config["hidden_size"] // heads
    if "head_dim" in config and head_dim != fallback and within_a_byte(got, want * fallback / head_dim):
        return (f"this config sets head_dim = {head_dim}; hidden_size // num_attention_heads = {fallback} is only the "
                f"fallback when head_dim is absent (expected {want:,} B)")
    if batch_size > 1 and within_a_byte(got * batch_size, want):
        return f"that is one sequence: multiply by batch_size = {batch_size} (expected {want:,} B)"
    if bytes_per_element > 1 and within_a_byte(got * bytes_per_element, want):
        return f"that counts elements: multiply by bytes_per_element = {bytes_per_element} (expected {want:,} B)"
    return f"expected {want:,} B, got {got:,.0f} B ({got / want:.4g}x)"


def check_kv_cache(fn, config: dict, tokens: int, batch_size: int, bytes_per_element: int) -> None:
    """05a: the learner's bytes against :func:`expected_kv_bytes` (the config is passed as a copy)."""
    got = as_bytes(fn(dict(config), tokens, batch_size, bytes_per_element), "kv_cache_bytes")
    want = expected_kv_bytes(config, tokens, batch_size, bytes_per_element)
    if not within_a_byte(got, want):
        raise CaseFailure(_kv_diagnosis(config, tokens, batch_size, bytes_per_element, got, want, fn))


def kv_cases() -> list[dict]:
    """Card 05's case first, then GQA, MQA, windows below/at/above the window, a null window, an explicit head_dim."""
    def case(config, tokens, batch, width=2):
        return {"config": config, "tokens": tokens, "batch_size": batch, "bytes_per_element": width}

    return [case(LLAMA_2_70B, 4096, 32), case(LLAMA_3_8B, 8192, 4), case(FALCON_7B_MQA, 2048, 16),
            case(MISTRAL_7B_V01, 10_000, 2), case(MISTRAL_7B_V01, 1000, 3, 1), case(MISTRAL_7B_V01, 4096, 1),
            case(MISTRAL_7B_V01, 4097, 1), case(MISTRAL_7B_V02, 16384, 1), case(GEMMA_7B, 8192, 1),
            case(QWEN2_72B, 150_000, 1),
            case(LLAMA_2_70B, 1, 1, 4), case(FALCON_7B_MQA, 1, 1, 1)]


def kv_strategy():
    """Hypothesis strategy of 05a cases: random GQA/MQA/MHA layouts, with or without head_dim and window."""
    from hypothesis import strategies as st

    @st.composite
    def draw(draw_):
        kv = draw_(st.sampled_from((1, 2, 4, 8, 16)))
        heads = kv * draw_(st.sampled_from((1, 2, 4, 8)))
        head_dim = draw_(st.sampled_from((64, 80, 96, 128, 256)))
        config = {"num_hidden_layers": draw_(st.integers(1, 128)), "num_attention_heads": heads,
                  "num_key_value_heads": kv}
        if draw_(st.booleans()):
            config["head_dim"] = head_dim
            config["hidden_size"] = heads * draw_(st.sampled_from((64, 128, 192)))
        else:
            config["hidden_size"] = heads * head_dim
        config["sliding_window"] = draw_(st.one_of(st.none(), st.integers(1, 32768)))
        if draw_(st.booleans()):
            config["use_sliding_window"] = draw_(st.booleans())
        return {"config": config, "tokens": draw_(st.integers(1, 200_000)), "batch_size": draw_(st.integers(1, 64)),
                "bytes_per_element": draw_(st.sampled_from((1, 2, 4)))}

    return draw()


def _kv(fn):
    return run_grader("05a", "kv_cache_bytes", fn, check_kv_cache, kv_cases(), kv_strategy(),
                      "your cache sizes match for GQA, MQA, MHA with explicit head_dim and sliding-window models")


EXERCISES = (
    Exercise("05a", "kv_cache_bytes", "KV-cache bytes from a config.json", _kv, (
        "Per token and per layer the cache stores a K and a V vector for each KV head, head_dim values each.",
        "Count num_key_value_heads, not num_attention_heads (GQA and MQA share KV heads). head_dim is "
        "hidden_size // num_attention_heads only when the config has no head_dim.",
        "With sliding_window = W (not None) each layer keeps only the last W tokens: use min(tokens, W); "
        "sliding_window may be absent or None, and use_sliding_window = false switches it off.",
    )),
)
