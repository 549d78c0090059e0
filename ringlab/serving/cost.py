"""Time of one engine step (a batch of prefill chunks and decode tokens) from the calc roofline.

A continuous-batching step runs ``T`` tokens through the model at once: one for each decoding
sequence plus every prefill chunk's tokens. Its cost is the decode roofline of
:func:`ringlab.calc.decode.decode_step` (PROBLEMS.md P8) generalised to sequences of different
lengths, without re-deriving it:

- ``decode_step(model, hardware, T, context_len=1)`` gives the bytes (weights once, plus ``T`` one-token
  caches), FLOPs (``T`` tokens through every weight, plus attention over one cached token) and
  tensor-parallel all-reduce time of ``T`` tokens; it is evaluated once for every ``T`` up to the
  token budget (an array sweep), so MoE models keep their batch-dependent expert reads.
- The caches actually read replace the one-token ones: ``kv_bytes_per_token`` (from
  :func:`ringlab.calc.kvcache.kv_cache_bytes_per_token`) x the KV tokens each sequence of the batch
  reads once (its context, including the chunk being written).
- Attention FLOPs grow with the tokens each new token attends to: the step adds
  ``attention_flops_per_token`` (``decode_step``'s FLOPs at context 2 minus context 1) per attended
  token beyond the first. A decode token attends its whole context; a prefill chunk of ``c`` tokens after
  ``p`` computed ones attends ``c p + c (c + 1) / 2`` (causal).

step time = max(bytes / HBM bandwidth, FLOPs / peak FLOP/s) + all-reduce time, a lower bound as in
``decode_step``. Windowed layers are charged as full attention (an upper bound on their cache reads).
"""

from __future__ import annotations

import numpy as np

from ringlab.calc.decode import decode_step
from ringlab.calc.hardware import Hardware, get_hardware, peak_flops
from ringlab.calc.kvcache import kv_cache_bytes_per_token
from ringlab.calc.models import ModelConfig, get_model
from ringlab.calc.units import positive_int


class StepCost:
    """Step times for ``model`` on ``hardware`` for batches of up to ``max_tokens`` tokens.

    Args: ``model`` / ``hardware`` preset names or objects; ``max_tokens`` the token budget (int >= 1);
    ``dtype`` weights and activations, ``kv_dtype`` the cache (default ``dtype``); ``tp`` tensor-parallel
    degree. Attributes: ``kv_bytes_per_token`` (per GPU), ``attention_flops_per_token``.
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

    def step_time(self, tokens: int, kv_tokens_read: int, attended_tokens: int) -> float:
        """Seconds for a step of ``tokens`` tokens (1..max_tokens) whose sequences read ``kv_tokens_read``
        cached tokens in all and whose tokens attend ``attended_tokens`` tokens in all."""
        if not 1 <= tokens <= self.max_tokens:
            raise ValueError(f"tokens must be in 1..{self.max_tokens}, got {tokens}")
        i = tokens - 1
        memory = (self._bytes[i] + kv_tokens_read * self.kv_bytes_per_token) / self._bandwidth
        compute = (self._flops[i] + attended_tokens * self.attention_flops_per_token) / self._peak
        return float(max(memory, compute) + self._comm[i])
