"""KV-cache memory: per token, per batch, per tensor-parallel rank, paged; and how many tokens fit.

API
---
``kv_heads_per_rank(model, tp)``                          KV heads each TP rank stores (vLLM's rule)
``kv_cache_bytes_per_token(model, dtype="fp16", tp=1)``   bytes per cached token on one GPU, all layers
``kv_cache_bytes(model, tokens, batch_size=1, dtype="fp16", tp=1, block_size=None)``
                                                          bytes on one GPU for ``batch_size`` sequences
                                                          of ``tokens`` tokens each
``max_cached_tokens(model, hardware, dtype="bf16", kv_dtype=None, tp=1, gpu_memory_utilization=0.9,
                    reserve_bytes=0, block_size=None)``   tokens whose KV fits after the weights

Formulas (all results are ints, bytes)
--------------------------------------
- MHA / GQA / MQA: ``2 (K and V) x layers x kv_heads x head_dim x bytes_per_element`` per token,
  with ``kv_heads = num_key_value_heads`` (not ``num_attention_heads``: for Llama-2-70B that
  mistake gives 8x too much). Llama-2-70B fp16: 2 x 80 x 8 x 128 x 2 = 327,680 B per token.
- MLA (DeepSeek-V2/V3, ``kv_lora_rank`` set): the cache holds one compressed latent plus the
  shared RoPE key per token and layer, ``layers x (kv_lora_rank + qk_rope_head_dim) x bytes``;
  there is no separate K and V, hence no factor 2 (DeepSeek-V2 paper, sec. 2.1.2; vLLM's MLA backend).
- Sliding window: a windowed layer holds ``min(tokens, sliding_window)`` tokens (Mistral); with
  Qwen2's ``max_window_layers`` only layers >= that index are windowed.
- Tensor parallelism (vLLM's rule): each rank holds ``num_key_value_heads // tp`` KV heads when
  ``tp <= kv_heads``, else 1 head, replicated ``tp // kv_heads`` times; ``tp`` must divide or be a
  multiple of ``kv_heads``. MLA's latent is not split by heads, so every rank holds all of it.
- Paged attention (vLLM): each sequence takes whole blocks of ``block_size`` tokens, so the
  tokens held per sequence (per layer group) are rounded up to a multiple of ``block_size``.
- Cache dtype: fp32/fp16/bf16 (2 B), fp8/int8 (1 B); quantisation scales are not counted.
"""

from __future__ import annotations

import math

from ringlab.calc.hardware import Hardware, get_hardware
from ringlab.calc.models import ModelConfig, get_model
from ringlab.calc.units import dtype_bytes, positive_int


def kv_heads_per_rank(model: str | ModelConfig, tp: int = 1) -> int:
    """KV heads stored by each of ``tp`` tensor-parallel ranks: ``kv // tp`` if ``tp <= kv`` else 1
    (replicated), as vLLM does. Raises ValueError if neither of ``tp`` and ``kv`` divides the other."""
    model = get_model(model)
    tp = positive_int(tp, "tp")
    kv = model.num_key_value_heads
    if (tp <= kv and kv % tp) or (tp > kv and tp % kv):
        raise ValueError(f"tp={tp} must divide num_key_value_heads={kv} or be a multiple of it ({model.name})")
    return max(1, kv // tp)


def _per_token_per_layer(model: ModelConfig, dtype: str, tp: int) -> int | float:
    """Bytes one token occupies in one layer on one GPU (may be a Fraction for int4)."""
    width = dtype_bytes(dtype)
    if model.uses_mla:
        positive_int(tp, "tp")
        return (model.kv_lora_rank + model.qk_rope_head_dim) * width
    return 2 * kv_heads_per_rank(model, tp) * model.head_dim * width


def _layer_groups(model: ModelConfig) -> tuple[int, int]:
    """(full-attention layers, sliding-window layers)."""
    if model.sliding_window is None:
        return model.num_hidden_layers, 0
    full = min(model.max_window_layers or 0, model.num_hidden_layers)
    return full, model.num_hidden_layers - full


def kv_cache_bytes_per_token(model: str | ModelConfig, dtype: str = "fp16", tp: int = 1) -> int:
    """Bytes one more cached token costs on one GPU, summed over all layers (int).

    ``model``: preset name, ``ModelConfig`` or config.json path. ``dtype``: cache element type.
    ``tp``: tensor-parallel degree (per-rank KV heads as in ``kv_heads_per_rank``). Counts every
    layer, i.e. a token inside the sliding window; see ``kv_cache_bytes`` for long contexts.
    Raises ValueError for an unknown model or dtype, or an incompatible ``tp``.
    """
    model = get_model(model)
    return math.ceil(model.num_hidden_layers * _per_token_per_layer(model, dtype, tp))


def kv_cache_bytes(model: str | ModelConfig, tokens: int, batch_size: int = 1, dtype: str = "fp16",
                   tp: int = 1, block_size: int | None = None) -> int:
    """KV-cache bytes on one GPU for ``batch_size`` sequences holding ``tokens`` tokens each (int).

    Windowed layers hold ``min(tokens, sliding_window)`` tokens; with ``block_size`` each sequence's
    tokens per layer group round up to whole blocks (paged attention). Llama-2-70B, fp16, 4096
    tokens x 32 sequences: 42,949,672,960 B (42.95 GB / 40.00 GiB).
    Raises ValueError for non-positive sizes, unknown dtype/model, or an incompatible ``tp``.
    """
    model = get_model(model)
    tokens = positive_int(tokens, "tokens")
    batch_size = positive_int(batch_size, "batch_size")
    if block_size is not None:
        block_size = positive_int(block_size, "block_size")

    def held(n: int) -> int:
        return n if block_size is None else -(-n // block_size) * block_size

    full, windowed = _layer_groups(model)
    per_layer = _per_token_per_layer(model, dtype, tp)
    window_tokens = held(min(tokens, model.sliding_window)) if windowed else 0
    per_seq = per_layer * (full * held(tokens) + windowed * window_tokens)
    return math.ceil(per_seq * batch_size)


def max_cached_tokens(model: str | ModelConfig, hardware: str | Hardware, dtype: str = "bf16",
                      kv_dtype: str | None = None, tp: int = 1, gpu_memory_utilization: float = 0.9,
                      reserve_bytes: int = 0, block_size: int | None = None) -> int:
    """Tokens of KV cache that fit on each GPU of a ``tp``-way group after the weights (int, >= 0).

    Budget per GPU = ``memory x gpu_memory_utilization - weight_bytes(dtype) / tp - reserve_bytes``
    (vLLM's ``gpu_memory_utilization`` convention; weights assumed evenly sharded; ``reserve_bytes``
    stands for activations, CUDA graphs and the runtime, which this model does not estimate).
    Tokens = budget // ``kv_cache_bytes_per_token(model, kv_dtype, tp)``, floored to whole blocks
    when ``block_size`` is given; 0 when the weights alone do not fit. ``memory`` is the datasheet
    figure in decimal GB (see ``ringlab.calc.hardware``). Raises ValueError for a utilization outside
    (0, 1], a negative reserve, or unknown names.
    """
    model, hw = get_model(model), get_hardware(hardware)
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    if reserve_bytes < 0:
        raise ValueError(f"reserve_bytes must be >= 0, got {reserve_bytes}")
    tp = positive_int(tp, "tp")
    per_token = kv_cache_bytes_per_token(model, kv_dtype or dtype, tp)
    budget = math.floor(hw.memory * gpu_memory_utilization) - math.ceil(model.weight_bytes(dtype) / tp) - reserve_bytes
    tokens = max(0, budget) // per_token
    if block_size is not None:
        block_size = positive_int(block_size, "block_size")
        tokens -= tokens % block_size
    return tokens
