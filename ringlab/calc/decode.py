"""Decode (token generation) step time versus batch size, and the largest batch under a latency SLA.

One decode step produces one token for each of ``batch_size`` sequences. Its HBM traffic is
the weights, read **once per step whatever the batch size** (every sequence's token goes
through the same matrices in one batched matmul), plus each sequence's KV cache at its
context length. Its arithmetic is about 2 FLOPs per weight per sequence. So, per GPU,

    step time = max(bytes / hbm_bandwidth, flops / peak_flops) + tensor-parallel all-reduce time

(the roofline of Williams et al. 2009 applied to the whole step; notebook 07, card 07). While the
bandwidth roof binds, adding a sequence adds only its KV bytes, so step time is nearly flat
and tokens/s = batch / step time grows almost linearly until the compute roof or the memory
capacity stops it.

The circulating wrong model (:func:`naive_linear_decode_time`) makes step time grow linearly
with batch in the bandwidth-bound regime, as if each sequence streamed the weights on its own,
so it predicts flat throughput. It is kept only to be shown next to the right one.

Conventions
-----------
- Every sequence holds ``context_len`` tokens of KV cache (the cache read by this step; the
  one new token's K/V write is ignored). KV bytes per sequence come from
  :func:`ringlab.calc.kvcache.kv_cache_bytes` (GQA/MQA/MLA, sliding windows, TP split).
- Weights streamed per step: every active parameter except the input embedding table (a
  lookup of ``batch`` rows, not a read of the table; with tied embeddings the table is read
  as the LM head). FLOPs per step: 2 x those parameters x batch (one multiply-add per weight
  per token, Kaplan et al. 2020, sec. 2.1) + attention: 4 x num_attention_heads x head_dim
  FLOPs per cached token per layer (q.K^T and the weighted sum of V, softmax ignored); for
  MLA, the absorbed form of DeepSeek-V2 (arXiv:2405.04434, appendix): per head
  2 (kv_lora_rank + qk_rope_head_dim) + 2 kv_lora_rank per cached token. Sliding-window
  layers attend to min(context_len, sliding_window) tokens.
- MoE: at batch B each token picks ``num_experts_per_tok`` (k) of E experts; assuming uniform,
  independent routing, a given expert is untouched with probability (1 - k/E)^B, so the step
  reads E (1 - (1 - k/E)^B) experts per MoE layer: k at B = 1, nearly all E at large B. FLOPs
  use the active parameters (k experts per token) whatever B.
- Tensor parallelism over ``tp`` GPUs (Megatron-LM, Shoeybi et al. 2019): weights, KV heads
  and FLOPs split tp ways (KV heads are replicated when tp > num_key_value_heads, as vLLM
  does); each mixer and each FFN adds one all-reduce (2 per layer of a plain transformer; 1 per
  block of Nemotron-H, none for a no-op block) of batch x hidden_size activations in ``dtype``, each costing 2(tp-1) alpha + 2(tp-1)/tp x bytes /
  bandwidth (ring all-reduce, Patarasuk & Yuan 2009), not overlapped with compute.
- Memory: weights (all parameters, ``dtype``) + KV of all sequences must fit in
  ``memory_fraction`` x the datasheet memory (decimal bytes); the default 0.9 is vLLM's
  ``gpu_memory_utilization``; the rest is left for activations and workspace.
- Peak FLOP/s are dense (``sparse=False``); bandwidth is the datasheet HBM figure. Step
  times are lower bounds: real kernels reach 60-90 % of either roof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from ringlab.calc.hardware import Hardware, get_hardware, peak_flops
from ringlab.calc.kvcache import attention_heads_per_rank, kv_cache_bytes
from ringlab.calc.models import ModelConfig, get_model
from ringlab.calc.roofline import attention_decode_cost
from ringlab.validation import check_number
from ringlab.calc.units import canonical_dtype, dtype_bytes, format_bytes
from ringlab.collectives.cost import Link, bus_factor, latency_terms  # Link: any object with .alpha, .bandwidth works

DEFAULT_MEMORY_FRACTION = 0.9


@dataclass(frozen=True)
class DecodeStep:
    """One decode step, per GPU of a ``tp``-way tensor-parallel group.

    Array fields have the shape of ``batch_size`` (scalars when it was an int). Units:
    seconds, bytes (per GPU), FLOP (per GPU), tokens/s (the whole group: ``batch_size``
    tokens per step). ``bound`` is "memory" when the bandwidth roof is the larger term,
    else "compute"; ``comm_time_s`` is added on top of the roof. ``mbu`` (model bandwidth
    utilisation) = bytes per step / step time / HBM bandwidth; ``mfu`` = FLOPs per step /
    step time / peak FLOP/s; both fall when all-reduce time is added.
    """

    model: str
    hardware: str
    context_len: int
    dtype: str
    kv_dtype: str
    tp: int
    batch_size: int | np.ndarray
    weight_bytes: int  # resident, per GPU
    kv_bytes_per_sequence: int  # per GPU
    kv_bytes: int | np.ndarray  # all sequences, per GPU
    memory_bytes: int | np.ndarray  # weights + KV, per GPU
    memory_capacity: float  # memory_fraction x datasheet memory, bytes
    fits: bool | np.ndarray
    bytes_per_step: float | np.ndarray  # per GPU
    flops_per_step: float | np.ndarray  # per GPU
    memory_time_s: float | np.ndarray
    compute_time_s: float | np.ndarray
    comm_time_s: float | np.ndarray
    step_time_s: float | np.ndarray
    bound: str | np.ndarray
    tokens_per_s: float | np.ndarray
    mbu: float | np.ndarray
    mfu: float | np.ndarray

    def to_dict(self) -> dict:
        """JSON-ready dict (arrays become lists, numpy scalars Python numbers)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    def summary(self) -> str:
        """Text for one batch size (raises ValueError on a sweep: index it first)."""
        if np.ndim(self.batch_size):
            raise ValueError("summary() needs a single batch_size; this result holds a sweep")
        tp = f", tp={self.tp}" if self.tp > 1 else ""
        fit = "fits" if self.fits else "does NOT fit"
        return "\n".join([
            f"{self.model} on {self.hardware}{tp}: batch {self.batch_size}, context {self.context_len} tokens, "
            f"weights {self.dtype}, KV {self.kv_dtype}",
            f"step {self.step_time_s * 1e3:.4g} ms ({self.bound}-bound: memory {self.memory_time_s * 1e3:.4g} ms, "
            f"compute {self.compute_time_s * 1e3:.4g} ms, all-reduce {self.comm_time_s * 1e3:.4g} ms)",
            f"{self.tokens_per_s:,.0f} tokens/s, MBU {self.mbu:.1%}, MFU {self.mfu:.1%}",
            f"memory per GPU {format_bytes(int(self.memory_bytes))}: weights {format_bytes(self.weight_bytes)} "
            f"+ KV {format_bytes(int(self.kv_bytes))}; {fit} in {format_bytes(int(self.memory_capacity))}",
        ])


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value.item() if isinstance(value, np.generic) else value


# KV bytes are int64: batches whose KV would pass this are rejected rather than wrapped around.
_MAX_KV_BYTES = 2**62


def _check_batch(batch_size) -> np.ndarray:
    b = np.asarray(batch_size)
    if b.dtype == bool or not np.issubdtype(b.dtype, np.integer):
        raise TypeError(f"batch_size must be an int or an integer array, got {b.dtype} ({batch_size!r})")
    if b.size == 0 or (b < 1).any():
        raise ValueError(f"batch_size must be >= 1 (non-empty), got {batch_size!r}")
    return b.astype(np.int64)


def _check_tp(model: ModelConfig, tp) -> int:
    check_number("tp", tp, 1, integer=True)
    attention_heads_per_rank(model, int(tp))  # the one TP rule of calc kv, decode and train
    return int(tp)


def _resolve_link(hw: Hardware, tp: int, link: Link | None) -> Link | None:
    if tp == 1:
        return None
    if link is None:
        if hw.interconnect_bandwidth is None:
            raise ValueError(f"{hw.name} has no interconnect bandwidth preset; pass a link for the TP all-reduces "
                             "(Python: link= any object with .alpha and .bandwidth; CLI: --fabric nvlink4)")
        return Link(f"{hw.name} interconnect", 0.0, hw.interconnect_bandwidth, hw.source)
    for attr in ("alpha", "bandwidth"):
        if not hasattr(link, attr):
            raise TypeError(f"link must have .alpha (s) and .bandwidth (B/s); {type(link).__name__} lacks .{attr}")
    check_number("link.alpha", link.alpha)
    check_number("link.bandwidth", link.bandwidth, strict=True)
    return link


def _attention_flops_per_sequence(model: ModelConfig, context_len: int) -> int:
    """Attention FLOPs of one new token, summed over the layers that attend (each over the tokens it holds)."""
    heads, flops = model.num_attention_heads, 0
    for layer in model.layers:
        tokens = layer.held_tokens(context_len)
        if layer.mixer == "mla":
            flops += heads * (2 * (model.kv_lora_rank + model.qk_rope_head_dim) + 2 * model.kv_lora_rank) * tokens
        elif layer.caches_kv and layer.k_head_dim == layer.v_head_dim:
            flops += attention_decode_cost(1, tokens, heads, layer.kv_heads, layer.k_head_dim)[0]
        elif layer.caches_kv:  # q.K^T over K's head size, the weighted sum over V's
            flops += 2 * heads * (layer.k_head_dim + layer.v_head_dim) * tokens
    return flops


def _tp_all_reduces(model: ModelConfig) -> int:
    """All-reduces per step under Megatron TP: one after each mixer and one after each FFN that is split."""
    return sum((layer.mixer != "none") + (layer.ffn != "none") for layer in model.layers)


def _matmul_params(model: ModelConfig) -> int:
    """Active parameters that multiply activations: all but the (untied) input embedding table."""
    lookup = 0 if model.tie_word_embeddings else model.vocab_size * model.hidden_size
    return model.active_param_count() - lookup


def _streamed_params(model: ModelConfig, batch: np.ndarray) -> np.ndarray:
    """Expected parameters read per step at each batch size (MoE: experts touched by the batch)."""
    base = _matmul_params(model)
    if not model.is_moe:
        return np.full(batch.shape, float(base))
    e, k = model.num_experts, model.num_experts_per_tok
    per_expert = (model.param_count() - model.active_param_count()) / (model.num_moe_layers * (e - k))
    touched = e * (1.0 - (1.0 - k / e) ** batch)
    return base + model.num_moe_layers * (touched - k) * per_expert


def decode_step(model: str | ModelConfig, hardware: str | Hardware, batch_size, context_len: int,
                dtype: str = "bf16", kv_dtype: str | None = None, tp: int = 1, link: Link | None = None,
                memory_fraction: float = DEFAULT_MEMORY_FRACTION) -> DecodeStep:
    """Time, bound, throughput, memory, MBU and MFU of one decode step (see the module docstring).

    ``model``: preset name, ``ModelConfig`` or config.json path; ``hardware``: preset name or
    ``Hardware``; ``batch_size``: int >= 1 or an integer array (a sweep: every output field
    gets its shape); ``context_len``: cached tokens per sequence; ``dtype``: weights and
    activations; ``kv_dtype``: KV cache (default ``dtype``); ``tp``: tensor-parallel degree,
    must divide num_attention_heads; ``link``: any object with ``.alpha`` (s) and
    ``.bandwidth`` (B/s per direction) for the TP all-reduces (default: the preset's
    interconnect bandwidth with alpha = 0); ``memory_fraction``: share of the datasheet memory
    usable for weights + KV. Raises TypeError/ValueError naming the bad argument.
    """
    model = get_model(model)
    hw = get_hardware(hardware)
    batch = _check_batch(batch_size)
    check_number("context_len", context_len, 1, integer=True)
    check_number("memory_fraction", memory_fraction, strict=True)
    if memory_fraction > 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    dtype = canonical_dtype(dtype)
    kv_dtype = canonical_dtype(kv_dtype or dtype)
    tp = _check_tp(model, tp)
    link = _resolve_link(hw, tp, link)
    peak = peak_flops(hw, dtype)
    width = dtype_bytes(dtype)

    weight_bytes = math.ceil(model.weight_bytes(dtype) / tp)
    kv_per_seq = kv_cache_bytes(model, context_len, batch_size=1, dtype=kv_dtype, tp=tp)
    if batch.max() > _MAX_KV_BYTES // kv_per_seq:
        raise ValueError(f"batch_size up to {batch.max()} makes KV bytes overflow int64; that is not a real batch")
    kv = batch * kv_per_seq
    bytes_per_step = _streamed_params(model, batch) * float(width) / tp + kv
    flops = batch * (2.0 * _matmul_params(model) + _attention_flops_per_sequence(model, context_len)) / tp
    memory_time = bytes_per_step / hw.hbm_bandwidth
    compute_time = flops / peak
    if link is None:
        comm_time = np.zeros(batch.shape)
    else:
        message = batch * model.hidden_size * float(width)
        # ring all-reduce over the TP group: 2(tp-1) steps, bus_factor = 2(tp-1)/tp of the message per rank
        one = (latency_terms("all_reduce", "ring", tp) * link.alpha
               + bus_factor("all_reduce", tp) * message / link.bandwidth)
        comm_time = _tp_all_reduces(model) * one
    step = np.maximum(memory_time, compute_time) + comm_time
    capacity = memory_fraction * hw.memory
    out = dict(
        kv_bytes=kv, memory_bytes=weight_bytes + kv, fits=weight_bytes + kv <= capacity,
        bytes_per_step=bytes_per_step, flops_per_step=flops, memory_time_s=memory_time,
        compute_time_s=compute_time, comm_time_s=comm_time, step_time_s=step,
        bound=np.where(memory_time > compute_time, "memory", "compute"), tokens_per_s=batch / step,
        mbu=bytes_per_step / step / hw.hbm_bandwidth, mfu=flops / step / peak,
    )
    scalar = np.ndim(batch_size) == 0
    if scalar:
        out = {k: _plain(v[()]) for k, v in out.items()}
    return DecodeStep(
        model=model.name, hardware=hw.name, context_len=int(context_len), dtype=dtype, kv_dtype=kv_dtype,
        tp=tp, batch_size=int(batch) if scalar else batch, weight_bytes=weight_bytes,
        kv_bytes_per_sequence=int(kv_per_seq), memory_capacity=capacity, **out,
    )


def naive_linear_decode_time(model: str | ModelConfig, hardware: str | Hardware, batch_size, context_len: int,
                             dtype: str = "bf16", kv_dtype: str | None = None, tp: int = 1,
                             link: Link | None = None) -> tuple:
    """THE WRONG, CIRCULATING MODEL, for side-by-side display only: ``(step_time_s, tokens_per_s)``.

    It takes the batch-1 step time and multiplies it by the batch size, i.e. it assumes every
    sequence streams all the weights on its own: step time grows linearly with batch and
    tokens/s stays flat at the batch-1 value in the bandwidth-bound regime. Wrong because a
    batched decode step multiplies the whole batch through each weight matrix in one pass, so
    weights cross HBM once per step; only the KV bytes grow with batch (see
    :func:`decode_step`). Arguments as :func:`decode_step`; shapes follow ``batch_size``.
    """
    batch = _check_batch(batch_size)
    single = decode_step(model, hardware, 1, context_len, dtype, kv_dtype, tp, link).step_time_s
    step = batch * single
    tokens = batch / step
    if np.ndim(batch_size) == 0:
        return float(step), float(tokens)
    return step, tokens


@dataclass(frozen=True)
class SlaResult:
    """Largest decode batch meeting a time-per-output-token SLA and fitting in memory.

    ``batch_size`` = min(``latency_limit``, ``memory_limit``) (0 when even one sequence fails);
    ``bound_by`` is "latency", "memory" or "both" (the two limits are equal); ``step`` is the
    :class:`DecodeStep` at ``batch_size`` (None when it is 0).
    """

    batch_size: int
    bound_by: str
    latency_limit: int
    memory_limit: int
    tpot_s: float
    step: DecodeStep | None
    note: str = ""  # why no batch fits, when batch_size is 0

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "step"}
        d["step"] = None if self.step is None else self.step.to_dict()
        return d

    def summary(self) -> str:
        line = (f"largest batch for {self.tpot_s * 1e3:.4g} ms/token: {self.batch_size} "
                f"(bound by {self.bound_by}; latency allows {self.latency_limit}, memory allows {self.memory_limit})")
        if self.note:
            line += "\n" + self.note
        return line if self.step is None else line + "\n" + self.step.summary()


def _no_batch_note(probe: DecodeStep, tpot_s: float, memory_limit: int, latency_limit: int) -> str:
    """Say why not even one sequence fits (memory) or meets the SLA (latency)."""
    notes = []
    if memory_limit == 0:
        if probe.weight_bytes > probe.memory_capacity:
            notes.append(f"the weights alone ({probe.weight_bytes / 1e9:.1f} GB per GPU) exceed the "
                         f"{probe.memory_capacity / 1e9:.1f} GB usable: shard them with a larger tp")
        else:
            notes.append(f"one sequence's KV cache ({probe.kv_bytes_per_sequence / 1e9:.2f} GB) does not fit next "
                         "to the weights: shorten the context, use a smaller KV dtype or a larger tp")
    if latency_limit == 0:
        notes.append(f"even batch 1 takes {probe.step_time_s * 1e3:.4g} ms per token, above the "
                     f"{tpot_s * 1e3:.4g} ms SLA")
    return "; ".join(notes)


def max_batch_for_sla(model: str | ModelConfig, hardware: str | Hardware, context_len: int, tpot_s: float,
                      dtype: str = "bf16", kv_dtype: str | None = None, tp: int = 1, link: Link | None = None,
                      memory_fraction: float = DEFAULT_MEMORY_FRACTION) -> SlaResult:
    """Largest batch whose decode step time is <= ``tpot_s`` (seconds per output token) and whose
    weights + KV fit in ``memory_fraction`` x memory, with the constraint that binds.

    memory_limit = floor((memory_fraction x memory - weight_bytes) / kv_bytes_per_sequence)
    (per GPU). latency_limit: the largest B with step_time(B) <= tpot_s; step time never
    decreases with B, so it is found by bisection on :func:`decode_step` below
    tpot_s / compute_time(1) (capped where KV bytes would overflow int64).
    Arguments and errors as :func:`decode_step`; ``tpot_s`` must be > 0.
    """
    check_number("tpot_s", tpot_s, strict=True)
    probe = decode_step(model, hardware, 1, context_len, dtype, kv_dtype, tp, link, memory_fraction)
    free = probe.memory_capacity - probe.weight_bytes
    memory_limit = max(0, math.floor(free / probe.kv_bytes_per_sequence))

    def meets(b: int) -> bool:
        return decode_step(model, hardware, b, context_len, dtype, kv_dtype, tp, link,
                           memory_fraction).step_time_s <= tpot_s

    latency_limit = 0
    if probe.step_time_s <= tpot_s:
        # step_time(B) >= B x compute_time(1), so no batch beyond tpot / compute_time(1) can meet the SLA;
        # the int64 cap on KV bytes only matters for SLAs of hours.
        cap = _MAX_KV_BYTES // probe.kv_bytes_per_sequence
        low, high = 1, min(math.floor(tpot_s / probe.compute_time_s) + 1, cap)
        if meets(high):
            low = high
        while high - low > 1:  # invariant: meets(low), not meets(high)
            mid = (low + high) // 2
            low, high = (mid, high) if meets(mid) else (low, mid)
        latency_limit = low
    batch = min(latency_limit, memory_limit)
    bound = "both" if latency_limit == memory_limit else ("latency" if latency_limit < memory_limit else "memory")
    step = decode_step(model, hardware, batch, context_len, dtype, kv_dtype, tp, link, memory_fraction) if batch else None
    note = "" if batch else _no_batch_note(probe, tpot_s, memory_limit, latency_limit)
    return SlaResult(batch_size=batch, bound_by=bound, latency_limit=latency_limit, memory_limit=memory_limit,
                     tpot_s=float(tpot_s), step=step, note=note)
