"""Time of one engine step (a batch of prefill chunks and decode tokens) from the calc roofline.

A continuous-batching step runs ``T`` tokens through the model at once: one for each decoding
sequence plus every prefill chunk's tokens. Its cost is the decode roofline of
:func:`ringlab.calc.decode.decode_step` (card 07) generalised to sequences of different
lengths, without re-deriving it:

- ``decode_step(model, hardware, T, context_len=1)`` gives the bytes (weights once, plus ``T`` one-token
  caches), FLOPs (``T`` tokens through every weight, plus attention over one cached token) and
  tensor-parallel all-reduce time of ``T`` tokens; it is evaluated once for every ``T`` up to the
  token budget (an array sweep), so MoE models keep their batch-dependent expert reads.
- The caches actually read replace the one-token ones: each sequence of the batch reads its cache once
  (its context, including the chunk being written), :meth:`StepCost.kv_bytes_read`: ``calc kv``'s count
  (:func:`ringlab.calc.kvcache.kv_cache_bytes`), so a sliding-window layer reads at most its window, as
  in ``decode_step``; ``kv_bytes_per_token`` x context for a model whose layers are alike.
- Attention FLOPs grow with the tokens each new token attends to: the step adds
  ``attention_flops_per_token`` (``decode_step``'s FLOPs at context 2 minus context 1) per attended
  token beyond the first. A decode token attends its whole context; a prefill chunk of ``c`` tokens after
  ``p`` computed ones attends ``c p + c (c + 1) / 2`` (causal).

step time = max(bytes / HBM bandwidth, FLOPs / peak FLOP/s) + all-reduce time, a lower bound as in
``decode_step``. A prefill chunk of ``c`` tokens reads the cache of ``p + c`` tokens (a windowed layer's
queries of one chunk reach up to ``window + c - 1`` tokens back: a lower bound there). Attention FLOPs are
counted as full attention (an upper bound for windowed layers), and Mamba state reads are not counted
(``decode_step`` counts neither).

Swap or recompute (:func:`swap_or_recompute`): a preempted sequence either crosses the host link twice,
out now and back in later, each way at the link's per-direction rate (:func:`host_link`: the hardware
preset's PCIe or NVLink-C2C link unless overridden), or is prefilled again (:meth:`StepCost.prefill_time`).
Which is cheaper depends on the chip: the prefill scales with its FLOP/s, the swap with its host link.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ringlab.calc.decode import decode_step
from ringlab.calc.hardware import Hardware, get_hardware, peak_flops
from ringlab.calc.kvcache import kv_cache_bytes, kv_cache_bytes_per_token
from ringlab.calc.models import ModelConfig, get_model
from ringlab.validation import check_number
from ringlab.validation import positive_int
from ringlab.serving.blocks import sequence_kv_bytes


class StepCost:
    """Step times for ``model`` on ``hardware`` for batches of up to ``max_tokens`` tokens.

    Args: ``model`` / ``hardware`` preset names or objects; ``max_tokens`` the token budget (int >= 1);
    ``dtype`` weights and activations, ``kv_dtype`` the cache (default ``dtype``); ``tp`` tensor-parallel
    degree. Attributes: ``kv_bytes_per_token`` (per GPU, a token in every KV layer), ``attention_flops_per_token``.
    Raises ValueError/TypeError like :func:`~ringlab.calc.decode.decode_step`.
    """

    def __init__(self, model: str | ModelConfig, hardware: str | Hardware, max_tokens: int,
                 dtype: str = "bf16", kv_dtype: str | None = None, tp: int = 1):
        self.model, self.hardware = get_model(model), get_hardware(hardware)
        self.max_tokens = positive_int(max_tokens, "max_tokens")
        kv_dtype = kv_dtype or dtype
        sweep = decode_step(self.model, self.hardware, np.arange(1, self.max_tokens + 1), 1, dtype, kv_dtype, tp)
        two = decode_step(self.model, self.hardware, 1, 2, dtype, kv_dtype, tp)
        self.kv_bytes_per_token = kv_cache_bytes_per_token(self.model, kv_dtype, tp)
        self.attention_flops_per_token = two.flops_per_step - sweep.flops_per_step[0]
        tokens = np.arange(1, self.max_tokens + 1)
        # bytes and FLOPs of T tokens with nothing cached: strip the one-token caches decode_step added
        self._bytes = sweep.bytes_per_step - tokens * self.kv_bytes_per_token
        self._flops = sweep.flops_per_step - tokens * self.attention_flops_per_token
        self._comm = sweep.comm_time_s
        self._bandwidth = self.hardware.hbm_bandwidth
        self._peak = peak_flops(self.hardware, dtype)
        self.weight_bytes = sweep.weight_bytes
        self._kv = (self.model, kv_dtype, tp)
        # past the widest window only the layers that keep every token grow: read(L) = grow x L + windowed(min(L, W))
        windows = [layer.window for layer in self.model.layers if layer.caches_kv and layer.window is not None]
        self._window = max(windows, default=0)
        self._grow = (self._kv_bytes(self._window + 1) - self._kv_bytes(self._window) if self._window
                      else self.kv_bytes_per_token)
        self._windowed: dict[int, int] = {}

    def _kv_bytes(self, tokens: int) -> int:
        model, kv_dtype, tp = self._kv
        return kv_cache_bytes(model, tokens, 1, kv_dtype, tp)

    def kv_bytes_read(self, tokens: int) -> int:
        """Bytes of cache one sequence of ``tokens`` tokens (int >= 1) reads in a step, on one GPU (int):
        ``kv_cache_bytes(model, tokens)`` (each layer the tokens it keeps: a sliding layer at most its window).
        Mistral v0.1 at 8,192 tokens in bf16: 4,096 x 131,072 B."""
        if not self._window:
            return self._grow * tokens
        held = min(tokens, self._window)
        windowed = self._windowed.get(held)
        if windowed is None:
            windowed = self._windowed[held] = self._kv_bytes(held) - self._grow * held
        return self._grow * tokens + windowed

    def step_time(self, tokens: int, kv_tokens_read: int, attended_tokens: int,
                  kv_bytes_read: int | None = None) -> float:
        """Seconds for a step of ``tokens`` tokens (1..max_tokens) whose sequences read ``kv_tokens_read``
        cached tokens in all (each in every KV layer) and whose tokens attend ``attended_tokens`` tokens in all.
        ``kv_bytes_read``, when given, replaces ``kv_tokens_read x kv_bytes_per_token``: the sum of
        :meth:`kv_bytes_read` over the sequences, which caps windowed layers."""
        if kv_bytes_read is None:
            kv_bytes_read = kv_tokens_read * self.kv_bytes_per_token
        return self.step_times(tokens, [attended_tokens], [kv_bytes_read])[0]

    def step_times(self, tokens: int, attended_tokens: Sequence[int], kv_bytes_read: Sequence[int]) -> list[float]:
        """Seconds of many steps of ``tokens`` tokens each (1..max_tokens), as a list: step ``k`` attends
        ``attended_tokens[k]`` tokens and reads ``kv_bytes_read[k]`` bytes of cache (ints, as :meth:`step_time`
        takes them). The one home of the roofline, so a bulk path and a step-by-step one agree bit for bit."""
        if not 1 <= tokens <= self.max_tokens:
            raise ValueError(f"tokens must be in 1..{self.max_tokens}, got {tokens}")
        i = tokens - 1
        weights, flops, comm = float(self._bytes[i]), float(self._flops[i]), float(self._comm[i])
        per_token, bandwidth, peak = float(self.attention_flops_per_token), self._bandwidth, self._peak
        return [max((weights + read) / bandwidth, (flops + attended * per_token) / peak) + comm
                for attended, read in zip(attended_tokens, kv_bytes_read)]

    def kv_bytes_read_steps(self, lengths: list[int], steps: int) -> list[int]:
        """Bytes read in each of ``steps`` decode steps (ints) by sequences of ``lengths`` tokens at the first
        step, each one token longer per step: ``sum(kv_bytes_read(L + k) for L in lengths)`` at step ``k``,
        ``kv_bytes_per_token x (sum(lengths) + k len(lengths))`` for a model without sliding windows."""
        if not self._window:
            total, width = sum(lengths), len(lengths)
            return [self._grow * (total + k * width) for k in range(steps)]
        read = self.kv_bytes_read
        return [sum(read(n + k) for n in lengths) for k in range(steps)]

    def prefill_time(self, tokens: int) -> float:
        """Seconds to prefill ``tokens`` tokens (int >= 1) of one sequence alone, in chunks of the token budget
        (as the scheduler recomputes a preempted sequence): each chunk of ``c`` tokens after ``p`` computed
        ones reads the cache of ``p + c`` tokens (:meth:`kv_bytes_read`) and attends ``c p + c (c + 1) / 2``
        (causal)."""
        tokens = positive_int(tokens, "tokens")
        seconds, done = 0.0, 0
        while done < tokens:
            chunk = min(self.max_tokens, tokens - done)
            seconds += self.step_time(chunk, done + chunk, chunk * done + chunk * (chunk + 1) // 2,
                                      self.kv_bytes_read(done + chunk))
            done += chunk
        return seconds


def host_link(hardware: str | Hardware, swap_bandwidth: float | None = None, needed: bool = True) -> float | None:
    """Bytes/s per direction a swap moves over: ``swap_bandwidth`` when given (checked > 0 and finite), else
    the preset's ``host_link_bandwidth`` (nominal PCIe x16 or NVLink-C2C, see :mod:`ringlab.calc.hardware`).
    Raises ValueError when neither exists and ``needed`` (returns None then otherwise)."""
    if swap_bandwidth is not None:
        return float(check_number("swap_bandwidth", swap_bandwidth, strict=True))
    hw = get_hardware(hardware)
    if hw.host_link_bandwidth is None and needed:
        raise ValueError(f"{hw.name} publishes no host link bandwidth: pass swap_bandwidth (bytes/s per direction)")
    return hw.host_link_bandwidth


@dataclass(frozen=True)
class SwapOrRecompute:
    """The two ways to preempt one sequence of ``tokens`` tokens. ``bytes``: its KV cache on this GPU (whole
    blocks); ``link_bandwidth``: host link bytes/s per direction; ``swap_s``: out and back in,
    ``2 x bytes / link_bandwidth``; ``recompute_s``: prefilling it again; ``cheaper``: "swap" or "recompute"
    (recompute on a tie: it needs no host memory)."""

    tokens: int
    bytes: int
    link_bandwidth: float
    swap_s: float
    recompute_s: float

    @property
    def cheaper(self) -> str:
        return "swap" if self.swap_s < self.recompute_s else "recompute"


def swap_or_recompute(model: str | ModelConfig, hardware: str | Hardware, tokens: int, block_size: int = 16,
                      dtype: str = "bf16", max_tokens: int = 2048, swap_bandwidth: float | None = None,
                      cost: StepCost | None = None) -> SwapOrRecompute:
    """Swap time against recompute time for a sequence of ``tokens`` tokens of ``model`` on ``hardware``.

    ``block_size``: tokens per KV block (the swap moves whole blocks; bytes from
    :func:`ringlab.serving.blocks.sequence_kv_bytes`, i.e. ``calc kv``'s per-layer count); ``dtype``: weights
    and cache; ``max_tokens``: the token budget the recompute is chunked by; ``swap_bandwidth``: override of
    the preset's host link (bytes/s per direction); ``cost``: a :class:`StepCost` of the same model, hardware
    and dtype to reuse. Raises ValueError for bad sizes or a chip without a host link and no override.
    """
    cost = cost if cost is not None else StepCost(model, hardware, max_tokens, dtype=dtype)
    link = host_link(cost.hardware, swap_bandwidth)
    size = sequence_kv_bytes(cost.model, tokens, block_size, dtype)
    return SwapOrRecompute(tokens, size, link, 2 * size / link, cost.prefill_time(tokens))
