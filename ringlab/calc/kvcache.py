"""KV-cache memory: per token, per batch, per tensor-parallel rank, paged; and how many tokens fit.

API
---
``kv_heads_per_rank(model, tp)``                          KV heads each TP rank stores (vLLM's rule)
``attention_heads_per_rank(model, tp)``                   query heads per TP rank; the one tensor-parallel
                                                          rule of calc kv, decode and train
``kv_cache_bytes_per_token(model, dtype="fp16", tp=1)``   bytes per cached token on one GPU, all layers
``kv_cache_bytes(model, tokens, batch_size=1, dtype="fp16", tp=1, block_size=None)``
                                                          bytes on one GPU for ``batch_size`` sequences
                                                          of ``tokens`` tokens each
``kv_cache_by_layer_kind(model, tokens, dtype="fp16", tp=1)``
                                                          the same for one sequence, per kind of layer
``state_bytes_per_sequence(model, dtype="fp16", tp=1)``  bytes of the fixed Mamba state one sequence holds
``max_cached_tokens(model, hardware, dtype="bf16", kv_dtype=None, tp=1, gpu_memory_utilization=0.9,
                    reserve_bytes=0, block_size=None)``   tokens whose KV fits after the weights

Formulas (all results are ints, bytes)
--------------------------------------
All sums run over the layers of ``ModelConfig.layers`` (one :class:`~ringlab.calc.layers.LayerSpec`
each), so models whose layers differ are counted layer by layer:

- Attention layer (full / sliding / chunked): ``kv_heads x (k_head_dim + v_head_dim) x
  bytes_per_element`` per cached token, with ``kv_heads = num_key_value_heads`` of that layer
  (not ``num_attention_heads``: for Llama-2-70B that mistake gives 8x too much). Llama-2-70B fp16:
  80 layers x 8 x (128 + 128) x 2 = 327,680 B per token.
- MLA layer (DeepSeek-V2/V3, ``kv_lora_rank`` set): one compressed latent plus the shared RoPE key,
  ``(kv_lora_rank + qk_rope_head_dim) x bytes``; there is no separate K and V, hence no factor 2
  (DeepSeek-V2 paper, sec. 2.1.2; vLLM's MLA backend). DeepSeek sparse attention (V3.2) adds its
  indexer's key: ``index_head_dim`` B in FP8 + a 4 B scale per 128, 132 B per token and layer.
- Sliding-window layers hold ``min(tokens, sliding_window)`` tokens, chunked ones (Llama-4) at most
  one ``attention_chunk_size`` chunk; Mamba, linear-attention, linear and no-op layers hold no KV
  (a Mamba layer keeps a fixed-size state per sequence instead: :func:`state_bytes_per_sequence`). So past the
  window Gemma-2's cache grows with only its global half of the layers, and Nemotron-H-56B, whose
  10 attention layers are 8 % of 118, caches about a tenth of what a dense model of its size does.
- Tensor parallelism (vLLM's rule, per layer): each rank holds ``kv_heads // tp`` KV heads when
  ``tp <= kv_heads``, else 1 head, replicated ``tp // kv_heads`` times; ``tp`` must divide or be a
  multiple of ``kv_heads``. MLA's latent is not split by heads, so every rank holds all of it.
  Every rank also computes whole query heads, so ``tp`` must divide ``num_attention_heads``
  (:func:`attention_heads_per_rank`, which ``calc decode`` and ``calc train`` check too).
- Paged attention (vLLM): each sequence takes whole blocks of ``block_size`` tokens in every layer,
  so the tokens a layer holds per sequence are rounded up to a multiple of ``block_size``.
- Cache dtype: fp32/fp16/bf16 (2 B), fp8/int8 (1 B); quantisation scales are not counted.
"""

from __future__ import annotations

import math

from ringlab.calc.hardware import Hardware, get_hardware
from ringlab.calc.layers import LayerSpec
from ringlab.calc.models import ModelConfig, get_model
from ringlab.calc.units import dtype_bytes
from ringlab.validation import positive_int


def _heads_per_rank(kv: int, tp: int, name: str) -> int:
    if (tp <= kv and kv % tp) or (tp > kv and tp % kv):
        raise ValueError(f"tp={tp} must divide num_key_value_heads={kv} or be a multiple of it ({name})")
    return max(1, kv // tp)


def kv_heads_per_rank(model: str | ModelConfig, tp: int = 1) -> int:
    """KV heads stored by each of ``tp`` tensor-parallel ranks in a typical layer
    (``num_key_value_heads``): ``kv // tp`` if ``tp <= kv`` else 1 (replicated), as vLLM does.
    Raises ValueError if neither of ``tp`` and ``kv`` divides the other."""
    model = get_model(model)
    return _heads_per_rank(model.num_key_value_heads, positive_int(tp, "tp"), model.name)


def attention_heads_per_rank(model: str | ModelConfig, tp: int = 1) -> int:
    """Query heads each of ``tp`` tensor-parallel ranks computes (int): the tensor-parallel rule for
    attention, one home for ``calc kv``, ``calc decode`` and ``calc train``.

    ``tp`` must divide ``num_attention_heads``: Megatron-LM splits Q and O by whole heads, and vLLM asserts
    the same. Layers with their own K and V heads (full, sliding, chunked) also need ``tp`` and their KV
    heads to divide one another (:func:`kv_heads_per_rank`). MLA layers (DeepSeek-V2/V3) have no KV heads
    to split: the up-projections and O split by query heads, the latent and the down-projections are
    replicated, so ``num_key_value_heads`` sets no condition (DeepSeek-V3: 128 heads, 16 per rank at tp=8).
    Raises ValueError naming ``tp`` and the heads.
    """
    model = get_model(model)
    tp = positive_int(tp, "tp")
    if model.num_attention_heads % tp:
        raise ValueError(f"tp={tp} must divide num_attention_heads={model.num_attention_heads} of {model.name} "
                         "(each tensor-parallel rank computes whole attention heads)")
    for kv in {layer.kv_heads for layer in model.layers if layer.mixer in ("full", "sliding", "chunked")}:
        _heads_per_rank(kv, tp, model.name)
    return model.num_attention_heads // tp


def _layer_bytes(model: ModelConfig, layer: LayerSpec, width, tp: int):
    """Bytes one token occupies in ``layer`` on one GPU (a Fraction for int4; 0 without KV)."""
    if not layer.caches_kv:
        return 0
    if layer.mixer == "mla":  # plus DSA's indexer key (V3.2), stored in FP8 whatever the latent's dtype
        return layer.k_head_dim * width + layer.index_bytes
    return _heads_per_rank(layer.kv_heads, tp, model.name) * (layer.k_head_dim + layer.v_head_dim) * width


def kv_cache_bytes_per_token(model: str | ModelConfig, dtype: str = "fp16", tp: int = 1) -> int:
    """Bytes one more cached token costs on one GPU, summed over the layers that cache KV (int).

    ``model``: preset name, ``ModelConfig`` or config.json path. ``dtype``: cache element type.
    ``tp``: tensor-parallel degree (per-rank KV heads as in ``kv_heads_per_rank``). Counts every
    KV layer, i.e. a token inside every window; see ``kv_cache_bytes`` for long contexts.
    Raises ValueError for an unknown model or dtype, or an incompatible ``tp``.
    """
    model = get_model(model)
    tp, width = positive_int(tp, "tp"), dtype_bytes(dtype)
    attention_heads_per_rank(model, tp)
    return math.ceil(sum(_layer_bytes(model, layer, width, tp) for layer in model.layers))


def kv_cache_bytes(model: str | ModelConfig, tokens: int, batch_size: int = 1, dtype: str = "fp16",
                   tp: int = 1, block_size: int | None = None) -> int:
    """KV-cache bytes on one GPU for ``batch_size`` sequences holding ``tokens`` tokens each (int).

    The sum over layers of bytes per token x tokens that layer holds (windows and chunks cap it;
    with ``block_size`` each layer's tokens round up to whole blocks, as paged attention does).
    Llama-2-70B, fp16, 4096 tokens x 32 sequences: 42,949,672,960 B (42.95 GB / 40.00 GiB).
    Raises ValueError for non-positive sizes, unknown dtype/model, or an incompatible ``tp``.
    """
    model = get_model(model)
    tokens = positive_int(tokens, "tokens")
    batch_size = positive_int(batch_size, "batch_size")
    tp, width = positive_int(tp, "tp"), dtype_bytes(dtype)
    attention_heads_per_rank(model, tp)
    if block_size is not None:
        block_size = positive_int(block_size, "block_size")

    def held(layer: LayerSpec) -> int:
        n = layer.held_tokens(tokens)
        return n if block_size is None else -(-n // block_size) * block_size

    per_seq = sum(_layer_bytes(model, layer, width, tp) * held(layer) for layer in model.layers)
    return math.ceil(per_seq * batch_size)


def kv_cache_by_layer_kind(model: str | ModelConfig, tokens: int, dtype: str = "fp16", tp: int = 1) -> list[dict]:
    """Where one sequence's cache lives, one row per kind of layer (list of dicts, in layer order).

    Keys: ``mixer``, ``window`` (tokens or None), ``layers`` (how many), ``kv_heads`` (per GPU),
    ``k_head_dim``, ``v_head_dim``, ``held_tokens`` (per layer at ``tokens``), ``bytes_per_token``
    (per layer, per GPU) and ``bytes`` (all such layers, one sequence, one GPU). Layers without KV
    are listed with zeros. Raises like :func:`kv_cache_bytes`.
    """
    model = get_model(model)
    tokens, tp, width = positive_int(tokens, "tokens"), positive_int(tp, "tp"), dtype_bytes(dtype)
    attention_heads_per_rank(model, tp)
    rows: dict[tuple, dict] = {}
    for layer in model.layers:
        key = (layer.mixer, layer.window, layer.kv_heads, layer.k_head_dim, layer.v_head_dim)
        per_token = _layer_bytes(model, layer, width, tp)
        row = rows.setdefault(key, dict(
            mixer=layer.mixer, window=layer.window, layers=0,
            kv_heads=0 if not layer.caches_kv else 1 if layer.mixer == "mla" else _heads_per_rank(
                layer.kv_heads, tp, model.name),
            k_head_dim=layer.k_head_dim, v_head_dim=layer.v_head_dim, held_tokens=layer.held_tokens(tokens),
            bytes_per_token=per_token, bytes=0))
        row["layers"] += 1
        row["bytes"] += per_token * row["held_tokens"]
    for row in rows.values():
        row["bytes"] = math.ceil(row["bytes"])
        row["bytes_per_token"] = math.ceil(row["bytes_per_token"])
    return list(rows.values())


def max_cached_tokens(model: str | ModelConfig, hardware: str | Hardware, dtype: str = "bf16",
                      kv_dtype: str | None = None, tp: int = 1, gpu_memory_utilization: float = 0.9,
                      reserve_bytes: int = 0, block_size: int | None = None) -> int:
    """Tokens of KV cache that fit on each GPU of a ``tp``-way group after the weights (int, >= 0).

    Budget per GPU = ``memory x gpu_memory_utilization - weight_bytes(dtype) / tp - reserve_bytes``
    (vLLM's ``gpu_memory_utilization`` convention; weights assumed evenly sharded; ``reserve_bytes``
    stands for activations, CUDA graphs and the runtime, which this model does not estimate).
    Tokens = budget // ``kv_cache_bytes_per_token(model, kv_dtype, tp)``, floored to whole blocks
    when ``block_size`` is given; 0 when the weights alone do not fit. These are token slots at
    the cost of a token in every KV layer (what vLLM reports as its KV cache size in tokens for a
    model whose layers are alike); windowed layers free their slots past the window, so one long
    sequence of such a model needs fewer (:func:`kv_cache_bytes`). ``memory`` is the datasheet
    figure in decimal GB (see ``ringlab.calc.hardware``). Raises ValueError for a utilization outside
    (0, 1], a negative reserve, unknown names, or a model without KV layers.
    """
    model, hw = get_model(model), get_hardware(hardware)
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    if reserve_bytes < 0:
        raise ValueError(f"reserve_bytes must be >= 0, got {reserve_bytes}")
    tp = positive_int(tp, "tp")
    per_token = kv_cache_bytes_per_token(model, kv_dtype or dtype, tp)
    if per_token == 0:
        raise ValueError(f"{model.name} has no layer that caches KV: the KV cache holds no tokens")
    budget = math.floor(hw.memory * gpu_memory_utilization) - math.ceil(model.weight_bytes(dtype) / tp) - reserve_bytes
    tokens = max(0, budget) // per_token
    if block_size is not None:
        block_size = positive_int(block_size, "block_size")
        tokens -= tokens % block_size
    return tokens


def state_bytes_per_sequence(model: str | ModelConfig, dtype: str = "fp16", tp: int = 1) -> int:
    """Bytes of recurrent state one sequence holds on one GPU, whatever its length (int; 0 without such layers).

    Per Mamba layer, vLLM's shapes (``MambaStateShapeCalculator``): Mamba-1 (Jamba) keeps a conv state of
    ``d_inner / tp x (d_conv - 1)`` and an SSM state of ``d_inner / tp x d_state`` elements; Mamba-2
    (Nemotron-H) a conv state of ``(d_conv - 1) x (d_inner + 2 n_groups d_state) / tp`` (``n_groups`` raised
    to ``tp`` when ``tp`` does not divide it, as vLLM replicates the groups) and an SSM state of
    ``num_heads / tp x head_dim x d_state``. Both in ``dtype`` (vLLM's ``mamba_cache_dtype="auto"``).
    Nemotron-H-56B in bf16: 54 Mamba layers x (3 x 20,480 + 256 x 64 x 256) x 2 B = 459,620,352 B per sequence.
    Raises ValueError for linear-attention layers (their state sizes are not in ``ModelConfig``) or a ``tp``
    that does not divide the Mamba heads or channels.
    """
    model = get_model(model)
    tp, width = positive_int(tp, "tp"), dtype_bytes(dtype)
    layers = sum(layer.mixer == "mamba" for layer in model.layers)
    if any(layer.mixer == "linear_attention" for layer in model.layers):
        raise ValueError(f"{model.name}: the state of linear-attention layers is not modelled (their sizes are "
                         "not read from the config)")
    if not layers:
        return 0
    m = model.mamba
    if m.version == 1:
        channels, heads = m.d_inner, None
        conv, ssm = m.d_inner * (m.d_conv - 1), m.d_inner * m.d_state
    else:
        groups = m.n_groups if m.n_groups % tp == 0 else tp
        channels, heads = m.d_inner + 2 * groups * m.d_state, m.num_heads
        conv, ssm = (m.d_conv - 1) * channels, m.d_inner * m.d_state
    if channels % tp or (heads is not None and heads % tp) or (heads is None and m.d_inner % tp):
        raise ValueError(f"tp={tp} must divide the Mamba channels ({channels}) and heads ({heads or m.d_inner}) "
                         f"of {model.name}")
    return math.ceil(layers * (conv + ssm) // tp * width)
