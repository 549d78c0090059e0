"""Graders for the calculator exercises of issue 6 (P2 and P5).

* ex07 ``fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param) -> {(phase,
  collective): bytes}``: DDP, FSDP SHARD_GRAD_OP and FULL_SHARD, per rank, ring collectives.
* ex08 ``kv_cache_bytes(config, tokens, batch_size, bytes_per_element) -> int``: from a Hugging Face
  config dict, with GQA, MQA, explicit ``head_dim`` and sliding-window models.

Expected values are written out here from the formulas (ZeRO paper sec. 7 for the traffic, the
attention layout of the HF configs for the cache), not taken from ``ringlab.calc``;
tests/test_calc_graders.py checks that both agree. Wrong answers that match a known mistake get a
message naming it: FULL_SHARD counted like SHARD_GRAD_OP (2x instead of 3x (N-1)/N M), an all-reduce
counted as M, a missing (N-1)/N, num_attention_heads used as KV heads, no factor 2, an ignored window.
"""

from __future__ import annotations


from .engine import CaseFailure, as_number, run_grader
from .exercise import Exercise

# ---------------------------------------------------------------- ex07: DDP / FSDP traffic per collective

FWD_AG, BWD_AG, BWD_RS, BWD_AR = (("forward", "all_gather"), ("backward", "all_gather"),
                                  ("backward", "reduce_scatter"), ("backward", "all_reduce"))
# collective -> multiples of (N-1)/N x M each rank sends (a ring all-reduce = reduce-scatter + all-gather)
PLAN = {
    "ddp": {BWD_AR: 2},
    "fsdp_shard_grad_op": {FWD_AG: 1, BWD_RS: 1},
    "fsdp_full_shard": {FWD_AG: 1, BWD_AG: 1, BWD_RS: 1},
}
_KEY_ORDER = (FWD_AG, BWD_AG, BWD_RS, BWD_AR)
P2_CASE = {"n_params": 7_000_000_000, "world_size": 64, "bytes_per_param": 2}


def expected_breakdown(strategy: str, n_params: int, world_size: int, bytes_per_param: int) -> dict:
    """``{(phase, collective): bytes}`` one rank sends; exact since world_size divides n_params."""
    message = n_params * bytes_per_param
    return {key: factor * message * (world_size - 1) // world_size for key, factor in PLAN[strategy].items()}


def _close(a: float, b: float) -> bool:
    return abs(a - b) < 1  # within one byte: float arithmetic such as 2 * 63/64 * M is accepted


def _number(value, what: str) -> float:
    return as_number(value, f"{what} (bytes)")


def _missing_message(strategy: str, key: tuple, want: int, factor: int) -> str:
    if key == BWD_AG:
        return ("no ('backward', 'all_gather'): FULL_SHARD frees each unit's gathered parameters after its "
                "forward (reshard_after_forward=True), so backward must all-gather them again. That makes "
                f"3 x (N-1)/N x M = 1.5x DDP; counting only 2 x (N-1)/N x M is the SHARD_GRAD_OP / ZeRO-2 answer "
                f"(expected {want:,} B here)")
    return f"no {key}: {strategy} runs this collective, {factor} x (N-1)/N x M = {want:,} B per rank"


def _unexpected_message(strategy: str, key: tuple, got: float) -> str:
    if strategy == "fsdp_shard_grad_op" and key == BWD_AG:
        return ("SHARD_GRAD_OP keeps the parameters it gathered in forward until backward is done, so it does "
                "not all-gather them again: only ('forward', 'all_gather') and ('backward', 'reduce_scatter'), "
                f"2 x (N-1)/N x M in total; you report {got:,.0f} B for {key}")
    if strategy == "ddp":
        return (f"DDP runs a single collective, the all_reduce of the gradients in backward: report it as "
                f"('backward', 'all_reduce'), not {key}")
    return f"{strategy} runs no {key[1]} in {key[0]}, but you report {got:,.0f} B for it"


def _value_message(key: tuple, got: float, want: int, factor: int, message: int, case: dict) -> str:
    n, bpp = case["world_size"], case["bytes_per_param"]
    if n > 1 and _close(got, factor * message):
        return (f"{key}: {got:,.0f} B is {factor} x M: you forgot the (N-1)/N factor. In a ring each rank "
                f"already holds its own 1/N chunk and sends only the other N-1 chunks, so expect "
                f"{factor} x (N-1)/N x M = {want:,} B")
    if key == BWD_AR and _close(got, message):
        return (f"{key}: you counted the all_reduce as M = {message:,} B. A ring all_reduce is a reduce-scatter "
                f"plus an all-gather, each (N-1)/N x M, so a rank sends 2(N-1)/N x M = {want:,} B")
    if bpp > 1 and _close(got * bpp, want):
        return f"{key}: {got:,.0f} looks like elements: multiply by bytes_per_param ({bpp}) to get {want:,} B"
    return f"{key}: expected {want:,} B, got {got:,.0f} B ({got / want:.4g}x)" if want else \
        f"{key}: expected 0 B (one rank has nobody to send to), got {got:,.0f} B"


def check_fsdp_breakdown(fn, strategy: str, n_params: int, world_size: int, bytes_per_param: int) -> None:
    """ex07: the learner's dict against :func:`expected_breakdown`; a missing key counts as 0 bytes."""
    case = {"world_size": world_size, "bytes_per_param": bytes_per_param}
    result = fn(strategy, n_params, world_size, bytes_per_param)
    if not isinstance(result, dict):
        raise CaseFailure(f"return a dict {{(phase, collective): bytes}}, got {type(result).__name__}")
    for key in result:
        if not (isinstance(key, tuple) and len(key) == 2 and key[0] in ("forward", "backward")
                and key[1] in ("all_reduce", "all_gather", "reduce_scatter")):
            raise CaseFailure(f"keys should be (phase, collective) tuples such as ('forward', 'all_gather'), "
                              f"got {key!r}")
    want = expected_breakdown(strategy, n_params, world_size, bytes_per_param)
    got = {key: _number(v, f"the value for {key}") for key, v in result.items()}
    message = n_params * bytes_per_param
    for key in sorted(set(want) | set(got), key=_KEY_ORDER.index):
        w, g = want.get(key, 0), got.get(key, 0.0)
        if _close(g, w):
            continue
        if key not in want:
            raise CaseFailure(_unexpected_message(strategy, key, g))
        factor = PLAN[strategy][key]
        if key not in got or (g == 0 and w > 0):
            raise CaseFailure(_missing_message(strategy, key, w, factor))
        raise CaseFailure(_value_message(key, g, w, factor, message, case))


def fsdp_cases() -> list[dict]:
    """The P2 numbers first for each strategy, then N = 1, 2, odd, and large N, other element sizes."""
    shapes = [dict(P2_CASE), {"n_params": 1_000, "world_size": 1, "bytes_per_param": 2},
              {"n_params": 10, "world_size": 2, "bytes_per_param": 4},
              {"n_params": 3 * 1_000_003, "world_size": 3, "bytes_per_param": 2},
              {"n_params": 8 * 125_000_000, "world_size": 8, "bytes_per_param": 1},
              {"n_params": 70_000_001_024, "world_size": 1024, "bytes_per_param": 2}]
    return [{"strategy": s, **shape} for shape in shapes for s in PLAN]


def fsdp_strategy():
    """Hypothesis strategy of ex07 cases: n_params drawn as world_size x shard size."""
    from hypothesis import strategies as st

    return st.fixed_dictionaries({
        "strategy": st.sampled_from(sorted(PLAN)), "world_size": st.integers(1, 4096),
        "shard": st.integers(1, 10**9), "bytes_per_param": st.sampled_from((1, 2, 4)),
    }).map(lambda d: {"strategy": d["strategy"], "n_params": d["world_size"] * d["shard"],
                      "world_size": d["world_size"], "bytes_per_param": d["bytes_per_param"]})


# ---------------------------------------------------------------- ex08: KV-cache bytes from a config

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
    if window is None and off and tokens > off and _close(got, want * off / tokens):
        return (f"this config sets use_sliding_window = false, so sliding_window = {off} is switched off: every layer "
                f"keeps all {tokens:,} tokens (expected {want:,} B)")
    if heads != kv and _close(got, want * heads / kv) and "head_dim" not in config and fn is not None:
        # head_dim = hidden // num_key_value_heads gives the same ratio: ask again with head_dim spelled out
        probe = _number(fn({**config, "head_dim": head_dim}, tokens, batch_size, bytes_per_element), "kv_cache_bytes")
        if _close(probe, want):
            return (f"head_dim is hidden_size // num_attention_heads = {config['hidden_size']} // {heads} = {head_dim} "
                    f"when the config has none; dividing by num_key_value_heads ({kv}) makes it {heads // kv}x too "
                    f"large (expected {want:,} B)")
    if heads != kv and _close(got, want * heads / kv):
        return (f"you used num_attention_heads ({heads}) where num_key_value_heads ({kv}) belongs: the cache holds "
                f"K and V per KV head, and each KV head serves {heads // kv} query heads, so your answer is "
                f"{heads // kv}x too large (expected {want:,} B)")
    if _close(got * 2, want):
        return (f"{got:,.0f} B is half of the answer: the factor 2 is missing, the cache stores a K and a V "
                f"vector per KV head, layer and token (expected {want:,} B)")
    if window is not None and tokens > window and _close(got, want * tokens / held):
        return (f"this model has sliding_window = {window}: every layer keeps only the last {window} tokens, so "
                f"the cache holds min(tokens, sliding_window) = {held:,} tokens per sequence, not {tokens:,} "
                f"(expected {want:,} B)")
    fallback = config["hidden_size"] // heads
    if "head_dim" in config and head_dim != fallback and _close(got, want * fallback / head_dim):
        return (f"this config sets head_dim = {head_dim}; hidden_size // num_attention_heads = {fallback} is only the "
                f"fallback when head_dim is absent (expected {want:,} B)")
    if batch_size > 1 and _close(got * batch_size, want):
        return f"that is one sequence: multiply by batch_size = {batch_size} (expected {want:,} B)"
    if bytes_per_element > 1 and _close(got * bytes_per_element, want):
        return f"that counts elements: multiply by bytes_per_element = {bytes_per_element} (expected {want:,} B)"
    return f"expected {want:,} B, got {got:,.0f} B ({got / want:.4g}x)"


def check_kv_cache(fn, config: dict, tokens: int, batch_size: int, bytes_per_element: int) -> None:
    """ex08: the learner's bytes against :func:`expected_kv_bytes` (the config is passed as a copy)."""
    got = _number(fn(dict(config), tokens, batch_size, bytes_per_element), "kv_cache_bytes")
    want = expected_kv_bytes(config, tokens, batch_size, bytes_per_element)
    if not _close(got, want):
        raise CaseFailure(_kv_diagnosis(config, tokens, batch_size, bytes_per_element, got, want, fn))


def kv_cases() -> list[dict]:
    """P5 first, then GQA, MQA, windows below/at/above the window, a null window, an explicit head_dim."""
    def case(config, tokens, batch, width=2):
        return {"config": config, "tokens": tokens, "batch_size": batch, "bytes_per_element": width}

    return [case(LLAMA_2_70B, 4096, 32), case(LLAMA_3_8B, 8192, 4), case(FALCON_7B_MQA, 2048, 16),
            case(MISTRAL_7B_V01, 10_000, 2), case(MISTRAL_7B_V01, 1000, 3, 1), case(MISTRAL_7B_V01, 4096, 1),
            case(MISTRAL_7B_V01, 4097, 1), case(MISTRAL_7B_V02, 16384, 1), case(GEMMA_7B, 8192, 1),
            case(QWEN2_72B, 150_000, 1),
            case(LLAMA_2_70B, 1, 1, 4), case(FALCON_7B_MQA, 1, 1, 1)]


def kv_strategy():
    """Hypothesis strategy of ex08 cases: random GQA/MQA/MHA layouts, with or without head_dim and window."""
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


def _fsdp(fn):
    return run_grader("ex07", "fsdp_traffic_breakdown", fn, check_fsdp_breakdown, fsdp_cases(), fsdp_strategy(),
                      "every collective's bytes per rank match: DDP 2(N-1)/N M, SHARD_GRAD_OP 2 x (N-1)/N M, "
                      "FULL_SHARD 3 x (N-1)/N M")


def _kv(fn):
    return run_grader("ex08", "kv_cache_bytes", fn, check_kv_cache, kv_cases(), kv_strategy(),
                      "your cache sizes match for GQA, MQA, MHA with explicit head_dim and sliding-window models")


EXERCISES = (
    Exercise("ex07", "ex07_fsdp_breakdown", "fsdp_traffic_breakdown", "DDP vs FSDP traffic per collective", "P2",
             _fsdp, (
                 "Message M = n_params x bytes_per_param. In a ring, reduce_scatter and all_gather each make a rank "
                 "send (N-1)/N x M (every chunk but its own); all_reduce is one of each.",
                 "DDP all-reduces gradients in backward. FSDP all-gathers parameters before forward and "
                 "reduce-scatters gradients in backward. Which one gathers again in backward?",
                 "FULL_SHARD frees the gathered parameters after forward, so backward all-gathers them again: "
                 "three collectives, 1.5x DDP. SHARD_GRAD_OP keeps them until backward ends: two, the same as DDP.",
             )),
    Exercise("ex08", "ex08_kv_cache", "kv_cache_bytes", "KV-cache bytes from a config.json", "P5", _kv, (
        "Per token and per layer the cache stores a K and a V vector for each KV head, head_dim values each.",
        "Count num_key_value_heads, not num_attention_heads (GQA and MQA share KV heads). head_dim is "
        "hidden_size // num_attention_heads only when the config has no head_dim.",
        "With sliding_window = W (not None) each layer keeps only the last W tokens: use min(tokens, W); "
        "sliding_window may be absent or None, and use_sliding_window = false switches it off.",
    )),
)
