"""The roofline model: is a kernel limited by memory bandwidth or by arithmetic?

A kernel doing ``flops`` FLOPs and moving ``bytes_moved`` bytes between HBM and the chip
takes at least ``max(flops / peak, bytes_moved / bandwidth)`` (Williams, Waterman & Patterson
2009, "Roofline: an insightful visual performance model for multicore architectures",
CACM 52(4)). Its arithmetic intensity ``flops / bytes_moved`` (FLOP/B) is compared with the
chip's ridge point ``peak / bandwidth``: below the ridge the kernel is memory-bound.

Peaks are dense unless ``sparse=True`` (2:4 structured sparsity doubles NVIDIA's printed
figure: H100 SXM bf16 is 989 TFLOP/s dense, 1,979 sparse). Bytes are decimal (1 GB = 1e9 B).

Kernel helpers return ``(flops, bytes_moved)`` tuples to feed :func:`roofline`. They count
the minimum HBM traffic (every operand read once, every result written once, perfect on-chip
reuse), the same idealisation the roofline itself makes.
"""

from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import asdict, dataclass


from ringlab.calc.hardware import Hardware, get_hardware, peak_flops
from ringlab.calc.units import canonical_dtype, dtype_bytes, format_flops
from ringlab.validation import check_number


def tensor_bytes(numel: int, dtype: str) -> int:
    """HBM bytes of ``numel`` elements of ``dtype``, rounded up to whole bytes (int4 packs two per byte)."""
    return math.ceil(numel * dtype_bytes(dtype))


@dataclass(frozen=True)
class RooflineResult:
    """A kernel on a roofline. Units: FLOP, bytes, seconds, FLOP/s, FLOP/B.

    ``bound`` is ``"memory"`` when ``memory_time_s > compute_time_s``, else ``"compute"``
    (a kernel exactly at the ridge is reported compute-bound). ``fraction_of_peak`` is
    ``attainable_flops / peak_flops``, i.e. ``min(1, intensity / ridge_point)``.
    """

    hardware: str
    dtype: str
    sparse: bool
    flops: float
    bytes_moved: float
    peak_flops: float
    bandwidth: float
    intensity: float
    ridge_point: float
    bound: str
    memory_time_s: float
    compute_time_s: float
    time_s: float
    attainable_flops: float
    fraction_of_peak: float

    def to_dict(self) -> dict:
        """Plain-``dict`` view (JSON-serialisable except that an infinite intensity stays ``inf``)."""
        return asdict(self)

    def summary(self) -> str:
        """Several lines of text stating the inputs, the comparison with the ridge and the time."""
        kind = "sparse" if self.sparse else "dense"
        relation = "<" if self.bound == "memory" else ">="
        return "\n".join([
            f"{self.flops:.4g} FLOP, {self.bytes_moved:.4g} B on {self.hardware} "
            f"({format_flops(self.peak_flops)} {kind} {self.dtype}, {self.bandwidth / 1e12:.4g} TB/s)",
            f"intensity {self.intensity:.4g} FLOP/B {relation} ridge {self.ridge_point:.4g} FLOP/B: {self.bound}-bound",
            f"time {self.time_s * 1e3:.4g} ms (memory {self.memory_time_s * 1e3:.4g} ms, "
            f"compute {self.compute_time_s * 1e3:.4g} ms)",
            f"attainable {format_flops(self.attainable_flops)} = {self.fraction_of_peak:.1%} of peak",
        ])


def roofline(flops: float, bytes_moved: float, hardware: str | Hardware, dtype: str = "bf16",
             sparse: bool = False) -> RooflineResult:
    """Place a kernel of ``flops`` FLOP moving ``bytes_moved`` bytes on ``hardware``'s roofline.

    ``hardware`` is a preset name (see ``ringlab.calc.HARDWARE``) or a ``Hardware``; the peak
    is :func:`~ringlab.calc.hardware.peak_flops` for ``dtype``, dense unless ``sparse``.
    time = max(flops / peak, bytes_moved / hbm_bandwidth) (Williams et al. 2009).

    Example (card 06): ``roofline(512e9, 8e9, "a100-sxm-80gb")`` -> intensity 64 FLOP/B,
    ridge 312e12 / 2.039e12 = 153.0 FLOP/B, memory-bound, 3.9235 ms (compute alone 1.641 ms).

    Raises TypeError for non-numbers, ValueError for negative or non-finite sizes, both
    sizes zero, an unknown preset or dtype, or a mode the chip lacks (bf16 on a T4).
    """
    check_number("flops", flops)
    check_number("bytes_moved", bytes_moved)
    if flops == 0 and bytes_moved == 0:
        raise ValueError("flops and bytes_moved cannot both be zero")
    if not isinstance(sparse, bool):
        raise TypeError(f"sparse must be a bool, got {type(sparse).__name__}")
    hw = get_hardware(hardware)
    dtype = canonical_dtype(dtype)
    peak = peak_flops(hw, dtype, sparse=sparse)
    memory_time = bytes_moved / hw.hbm_bandwidth
    compute_time = flops / peak
    time = max(memory_time, compute_time)
    attainable = flops / time
    return RooflineResult(
        hardware=hw.name, dtype=dtype, sparse=sparse, flops=float(flops), bytes_moved=float(bytes_moved),
        peak_flops=peak, bandwidth=hw.hbm_bandwidth,
        intensity=flops / bytes_moved if bytes_moved else math.inf,
        ridge_point=peak / hw.hbm_bandwidth,
        bound=_bound(flops, bytes_moved, peak, hw.hbm_bandwidth),
        memory_time_s=memory_time, compute_time_s=compute_time, time_s=time,
        attainable_flops=attainable, fraction_of_peak=attainable / peak,
    )


def _bound(flops: float, bytes_moved: float, peak: float, bandwidth: float) -> str:
    """``"memory"`` when intensity < ridge, i.e. ``flops * bandwidth < peak * bytes_moved``, compared exactly.

    Fractions of the float inputs decide ties the documented way (at the ridge: compute-bound), which
    comparing the two rounded times cannot guarantee.
    """
    if Fraction(flops) * Fraction(bandwidth) < Fraction(peak) * Fraction(bytes_moved):
        return "memory"
    return "compute"


def matmul_cost(m: int, n: int, k: int, dtype: str = "bf16") -> tuple[int, int]:
    """``(flops, bytes)`` of ``C[m, n] = A[m, k] @ B[k, n]``, all three in ``dtype``.

    FLOPs = 2 m n k (one multiply and one add per term). Bytes = (m k + k n + m n) x element
    size: A and B read once, C written once (the ideal of a perfectly tiled kernel).
    Raises TypeError for non-int sizes, ValueError for sizes < 1.
    """
    for name, value in (("m", m), ("n", n), ("k", k)):
        check_number(name, value, 1, integer=True)
    return 2 * m * n * k, tensor_bytes(m * k + k * n + m * n, dtype)


def elementwise_cost(numel: int, n_ops: int, dtype: str = "bf16", fused: bool = False,
                     n_inputs: int = 1) -> tuple[int, int]:
    """``(flops, bytes)`` of a chain of ``n_ops`` elementwise ops over ``numel`` elements.

    The first op reads ``n_inputs`` tensors; each later op transforms the previous result;
    each op counts one FLOP per element. Unfused, every op is its own kernel, so each of the
    ``n_ops - 1`` intermediates is written to HBM and read back: bytes = (n_inputs + 1 +
    2 (n_ops - 1)) x numel x element size. Fused into one kernel the intermediates stay in
    registers: bytes = (n_inputs + 1) x numel x element size. Same FLOPs, fewer bytes, higher
    intensity (card 06's follow-up, notebook 06). Raises TypeError for non-int sizes, ValueError for sizes < 1.
    """
    for name, value in (("numel", numel), ("n_ops", n_ops), ("n_inputs", n_inputs)):
        check_number(name, value, 1, integer=True)
    if not isinstance(fused, bool):
        raise TypeError(f"fused must be a bool, got {type(fused).__name__}")
    tensors = n_inputs + 1 + (0 if fused else 2 * (n_ops - 1))
    return n_ops * numel, tensor_bytes(tensors * numel, dtype)


# FLOPs per element of a LayerNorm forward: mean (1 add), variance of the centred values
# (subtract, square, add: 3), scale by 1/std (1 multiply), affine gamma/beta (2).
LAYERNORM_FLOPS_PER_ELEMENT = 7


def layernorm_cost(rows: int, cols: int, dtype: str = "bf16") -> tuple[int, int]:
    """``(flops, bytes)`` of a LayerNorm forward over ``(rows, cols)``, normalising each row.

    FLOPs = 7 x rows x cols (see ``LAYERNORM_FLOPS_PER_ELEMENT``; the per-row divide and rsqrt
    are ignored). Bytes: input read once and output written once in ``dtype``, plus gamma and
    beta (``cols`` each, same dtype); statistics stay on chip (a single-pass fused kernel,
    as in notebook 12). Raises TypeError for non-int sizes, ValueError for sizes < 1.
    """
    check_number("rows", rows, 1, integer=True)
    check_number("cols", cols, 1, integer=True)
    return LAYERNORM_FLOPS_PER_ELEMENT * rows * cols, tensor_bytes(2 * rows * cols + 2 * cols, dtype)


def attention_decode_cost(batch_size: int, context_len: int, num_attention_heads: int,
                          num_key_value_heads: int, head_dim: int, dtype: str = "bf16",
                          kv_dtype: str | None = None) -> tuple[int, int]:
    """``(flops, bytes)`` of one decode step of attention in one layer (one new token per sequence).

    Per sequence and query head: scores q.K^T over ``context_len`` keys (2 x head_dim x
    context FLOPs) and the weighted sum of values (the same again), so FLOPs = 4 x batch x
    num_attention_heads x head_dim x context_len; softmax (~5 FLOPs per score) is ignored.
    Bytes: the K and V cache, 2 x batch x context_len x num_key_value_heads x head_dim in
    ``kv_dtype`` (default ``dtype``), plus q read and the output written (batch x
    num_attention_heads x head_dim each, in ``dtype``). Grouped-query attention shares each
    KV head among ``num_attention_heads / num_key_value_heads`` query heads, which is why
    decode attention's intensity is about that ratio (FLOP/B, with 2-byte caches).
    Names follow HF config.json. Raises ValueError for sizes < 1 or heads not divisible.
    """
    for name, value in (("batch_size", batch_size), ("context_len", context_len),
                        ("num_attention_heads", num_attention_heads),
                        ("num_key_value_heads", num_key_value_heads), ("head_dim", head_dim)):
        check_number(name, value, 1, integer=True)
    if num_attention_heads % num_key_value_heads:
        raise ValueError(
            f"num_attention_heads ({num_attention_heads}) must be a multiple of num_key_value_heads "
            f"({num_key_value_heads})"
        )
    flops = 4 * batch_size * num_attention_heads * head_dim * context_len
    kv = tensor_bytes(2 * batch_size * context_len * num_key_value_heads * head_dim, kv_dtype or dtype)
    return flops, kv + tensor_bytes(2 * batch_size * num_attention_heads * head_dim, dtype)
