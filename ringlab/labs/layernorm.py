"""Fused LayerNorm forward in Triton: statistics and output in one kernel (topic 12).

LayerNorm (Ba, Kiros & Hinton 2016, arXiv:1607.06450) normalises each row of an ``(N, D)``
input: ``y = (x - mean) * rstd * weight + bias`` with ``mean`` and the biased variance ``var``
taken over the row's D values and ``rstd = 1 / sqrt(var + eps)``, the definition
``torch.nn.functional.layer_norm`` uses. An unfused framework sequence reads and writes the
tensor once per step; this kernel reads ``x`` and writes ``y`` once each when a row fits in
one block of columns.

Kernel layout (one program per block of BLOCK_ROWS rows, a [BLOCK_ROWS, BLOCK_D] tile):

- ``D <= BLOCK_D``: the tile is loaded once, kept on chip, reduced to mean and variance, and
  normalised from registers.
- ``D > BLOCK_D``: a first loop over column blocks merges each block's (mean, M2) into the
  running ones with Chan, Golub & LeVeque's pairwise update (the block form of Welford's
  one-pass algorithm), so the row is never summed as raw ``sum(x^2)``; a second loop reloads
  ``x`` and writes ``y`` (so x is read twice from HBM). The merge formulas are in
  :mod:`ringlab.labs.layernorm_ref`, the numpy reference that follows the same steps.
- Statistics are accumulated in fp32 whatever the input dtype; ``y`` is written in the input
  dtype; ``mean`` and ``rstd`` are stored per row (fp32) for a backward pass.
- ``weight`` and ``bias`` are loaded once per program per column block and broadcast over
  all BLOCK_ROWS rows of the tile, instead of once per row.

Where it runs (decided when this module is imported):

- a CUDA device and ``TRITON_INTERPRET`` unset: kernels are compiled; tensors must be on the GPU.
- no CUDA device: the module sets ``TRITON_INTERPRET=1`` *before* its first ``import triton``
  so every ``@triton.jit`` function becomes an interpreted one that runs on CPU tensors with
  numpy. Triton reads that variable when a function is decorated, so if ``triton`` was
  already imported by then without it the import of this module raises RuntimeError (import
  this module first, or set the variable before starting Python) rather than mixing modes.
- ``TRITON_INTERPRET=1`` set by the user: interpreter (CPU tensors), even when a GPU is present.

Triton's interpreter (3.9) narrows fp32 to bf16 by truncation instead of round-to-nearest-even,
so there a bf16 output is written to an fp32 buffer and rounded by torch; fp32 and fp16 are
stored by the kernel directly. :func:`launch` runs any kernel with the signature of
:func:`layer_norm_fwd_kernel` (for grading a learner's kernel at awkward D).

``import ringlab`` and ``import ringlab.labs`` do not load this module; importing it loads
torch and triton (``pip install 'ringlab[torch,triton]'``).
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from typing import NamedTuple

try:
    import torch
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ringlab.labs.layernorm needs torch: pip install 'ringlab[torch]'") from exc

if importlib.util.find_spec("triton") is None:
    raise ImportError("ringlab.labs.layernorm needs triton: pip install 'ringlab[triton]'")

# Same spellings Triton's getenv_bool accepts (checked against triton 3.9).
_TRUTHY = {"1", "true", "on", "yes", "y"}


def _interpret_requested() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in _TRUTHY


def _choose_mode() -> bool:
    """Return True for the interpreter; set TRITON_INTERPRET=1 when it is needed and still possible."""
    if _interpret_requested():
        return True
    if torch.cuda.is_available():
        return False
    if "triton" in sys.modules:
        raise RuntimeError(
            "ringlab.labs.layernorm: there is no CUDA device, so Triton must run its interpreter, "
            "but triton was imported before TRITON_INTERPRET=1 was set (Triton reads it when a kernel "
            "is decorated). Import ringlab.labs.layernorm before triton (it sets the variable itself), "
            "or start Python with TRITON_INTERPRET=1; in Jupyter, restart the kernel first."
        )
    os.environ["TRITON_INTERPRET"] = "1"
    return True


INTERPRET: bool = _choose_mode()
"""True when kernels run in Triton's CPU interpreter, False when they are compiled for CUDA."""

import triton  # noqa: E402 - only after TRITON_INTERPRET is settled
import triton.language as tl  # noqa: E402

SUPPORTED_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# Largest column block. Compiled: 8192 columns, so a tile of 8192 fp32 values spread over 8 warps
# (256 threads) holds 32 registers per thread and leaves room for the rest; wider rows loop.
# Interpreter: the tile is a numpy array and every program costs Python overhead, so blocks are
# large in rows and modest in columns, which also makes the tests' D = 4096 and 5000 loop.
COMPILED_BLOCK_D = 8192
INTERPRET_BLOCK_D = 1024
# Elements per tile the row blocking aims for: 4096 (compiled; enough work for 8 warps) or
# 65536 (interpreter; numpy vectorises over the whole tile).
TILE_ELEMENTS = 65536 if INTERPRET else 4096


class LayerNormOutput(NamedTuple):
    """``y`` has ``x``'s shape and dtype; ``mean`` and ``rstd`` are fp32, shape ``(N,)``."""

    y: torch.Tensor
    mean: torch.Tensor
    rstd: torch.Tensor


@triton.jit
def block_moments(x, mask, count):
    """Mean and M2 (sum of squared deviations) of each row of a tile over its ``count`` valid columns."""
    mean = tl.sum(x, axis=1) / count
    diff = tl.where(mask, x - mean[:, None], 0.0)
    return mean, tl.sum(diff * diff, axis=1)


@triton.jit
def normalise_and_store(x, mean, rstd, Y, W, B, stride_y, rows, cols, row_mask, col_mask,
                        HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr):
    """Write ``(x - mean) * rstd * w + b`` for one tile; ``w`` and ``b`` are loaded once for all its rows."""
    y = (x - mean[:, None]) * rstd[:, None]
    if HAS_WEIGHT:
        w = tl.load(W + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = y * w[None, :]
    if HAS_BIAS:
        b = tl.load(B + cols, mask=col_mask, other=0.0).to(tl.float32)
        y = y + b[None, :]
    mask = row_mask[:, None] & col_mask[None, :]
    tl.store(Y + rows[:, None].to(tl.int64) * stride_y + cols[None, :], y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, n_rows, n_cols, stride_x, stride_y, eps,
                          HAS_WEIGHT: tl.constexpr, HAS_BIAS: tl.constexpr,
                          BLOCK_ROWS: tl.constexpr, BLOCK_D: tl.constexpr, ONE_BLOCK: tl.constexpr):
    """One program normalises rows ``[pid * BLOCK_ROWS, (pid + 1) * BLOCK_ROWS)`` of X into Y.

    Pointers: X, Y (n_rows, n_cols) with row strides ``stride_x``, ``stride_y`` and unit column
    stride; W, B (n_cols,) (ignored unless HAS_WEIGHT / HAS_BIAS); Mean, Rstd (n_rows,) fp32.
    ONE_BLOCK is ``n_cols <= BLOCK_D``. This signature is the contract :func:`launch` calls
    any kernel with.
    """
    rows = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    row_mask = rows < n_rows
    x_rows = X + rows[:, None].to(tl.int64) * stride_x  # int64: N * D may pass 2**31
    if ONE_BLOCK:
        # The whole row fits: load once, keep the tile on chip for statistics and output.
        cols = tl.arange(0, BLOCK_D)
        col_mask = cols < n_cols
        mask = row_mask[:, None] & col_mask[None, :]
        x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        mean, m2 = block_moments(x, mask, n_cols)
        rstd = 1.0 / tl.sqrt(m2 / n_cols + eps)
        normalise_and_store(x, mean, rstd, Y, W, B, stride_y, rows, cols, row_mask, col_mask,
                            HAS_WEIGHT, HAS_BIAS)
    else:
        # Pass 1: merge each column block's moments into the running ones. Every block before
        # `start` was full, so `start` values have been seen so far.
        mean = tl.full([BLOCK_ROWS], 0.0, tl.float32)
        m2 = tl.full([BLOCK_ROWS], 0.0, tl.float32)
        for start in range(0, n_cols, BLOCK_D):
            cols = start + tl.arange(0, BLOCK_D)
            col_mask = cols < n_cols
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            count_b = tl.minimum(n_cols - start, BLOCK_D).to(tl.float32)
            mean_b, m2_b = block_moments(x, mask, count_b)
            count_a = start * 1.0
            total = count_a + count_b
            delta = mean_b - mean
            mean = mean + delta * (count_b / total)
            m2 = m2 + m2_b + delta * delta * (count_a * count_b / total)
        rstd = 1.0 / tl.sqrt(m2 / n_cols + eps)
        # Pass 2: reload x block by block and write y.
        for start in range(0, n_cols, BLOCK_D):
            cols = start + tl.arange(0, BLOCK_D)
            col_mask = cols < n_cols
            mask = row_mask[:, None] & col_mask[None, :]
            x = tl.load(x_rows + cols[None, :], mask=mask, other=0.0).to(tl.float32)
            normalise_and_store(x, mean, rstd, Y, W, B, stride_y, rows, cols, row_mask, col_mask,
                                HAS_WEIGHT, HAS_BIAS)
    tl.store(Mean + rows, mean, mask=row_mask)
    tl.store(Rstd + rows, rstd, mask=row_mask)


def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _check_block(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (a power of two) or None, got {type(value).__name__}")
    if value < 1 or value & (value - 1):
        raise ValueError(f"{name} must be a power of two >= 1 (tl.arange needs one), got {value}")


def block_sizes(n_rows: int, n_cols: int) -> tuple[int, int]:
    """Default ``(block_rows, block_d)``: powers of two, the whole row in one block when it fits.

    ``block_d`` is ``next_power_of_2(n_cols)`` capped at ``COMPILED_BLOCK_D`` or
    ``INTERPRET_BLOCK_D``; ``block_rows`` fills a tile of about ``TILE_ELEMENTS`` elements
    without exceeding ``next_power_of_2(n_rows)``.
    """
    cap = INTERPRET_BLOCK_D if INTERPRET else COMPILED_BLOCK_D
    block_d = min(_next_power_of_2(n_cols), cap)
    block_rows = max(1, min(TILE_ELEMENTS // block_d, _next_power_of_2(n_rows)))
    return block_rows, block_d


def _check_affine(name: str, value, x: torch.Tensor, n_cols: int) -> torch.Tensor | None:
    if value is None:
        return None
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of shape ({n_cols},) or None, got {type(value).__name__}")
    if tuple(value.shape) != (n_cols,):
        raise ValueError(f"{name} must have shape ({n_cols},) to match x's last dimension, got {tuple(value.shape)}")
    if value.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"{name} dtype must be one of float32, float16, bfloat16, got {value.dtype}")
    if value.device != x.device:
        raise ValueError(f"{name} is on {value.device} but x is on {x.device}; put them on one device")
    return value.contiguous()


def launch(kernel, x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
           eps: float = 1e-5, *, block_rows: int | None = None, block_d: int | None = None) -> LayerNormOutput:
    """Validate the inputs, allocate the outputs and run ``kernel`` (same signature as
    :func:`layer_norm_fwd_kernel`) over a grid of ``ceil(N / block_rows)`` programs.

    Shapes and errors are those of :func:`layer_norm`. Passing another kernel lets a grader run
    a learner's kernel body through exactly the same launch.
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must have shape (..., D) with D >= 1, got {tuple(x.shape)}")
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"x dtype must be one of float32, float16, bfloat16, got {x.dtype}")
    if INTERPRET and x.device.type != "cpu":
        raise ValueError(f"x is on {x.device} but Triton runs in its CPU interpreter here; pass a CPU tensor")
    if not INTERPRET and x.device.type != "cuda":
        raise ValueError(f"x is on {x.device} but Triton compiles for CUDA here; pass a CUDA tensor")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    _check_block("block_rows", block_rows)
    _check_block("block_d", block_d)

    n_cols = x.shape[-1]
    weight = _check_affine("weight", weight, x, n_cols)
    bias = _check_affine("bias", bias, x, n_cols)
    # Rows may be strided (x[::2] is read in place); a last dimension that is not unit-stride
    # (a transpose) is copied, since the kernel's column offsets assume stride 1.
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    n_rows = x2.shape[0]
    # Triton's interpreter (3.9) narrows fp32 to bf16 by truncation, not round-to-nearest-even,
    # which puts half the outputs one bf16 ulp off. There the kernel writes fp32 and torch rounds.
    out_dtype = torch.float32 if INTERPRET and x.dtype == torch.bfloat16 else x.dtype
    y = torch.empty((n_rows, n_cols), dtype=out_dtype, device=x.device)
    mean = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rstd = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    if n_rows:
        default_rows, default_d = block_sizes(n_rows, n_cols)
        block_rows = block_rows or default_rows
        block_d = block_d or default_d
        # Any pointer works for an absent weight/bias: HAS_WEIGHT/HAS_BIAS=False never load it.
        grid = (triton.cdiv(n_rows, block_rows),)
        kernel[grid](x2, y, weight if weight is not None else y, bias if bias is not None else y, mean, rstd,
                     n_rows, n_cols, x2.stride(0), y.stride(0), float(eps),
                     HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None,
                     BLOCK_ROWS=block_rows, BLOCK_D=block_d, ONE_BLOCK=n_cols <= block_d,
                     num_warps=min(max(block_rows * block_d // 512, 1), 8))
    return LayerNormOutput(y.to(x.dtype).reshape(x.shape), mean, rstd)


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None = None, bias: torch.Tensor | None = None,
               eps: float = 1e-5, *, block_rows: int | None = None, block_d: int | None = None) -> LayerNormOutput:
    """LayerNorm forward over the last dimension with the fused Triton kernel.

    Args:
        x: ``(N, D)`` or ``(..., D)`` tensor, float32 / float16 / bfloat16; CPU when Triton runs
            its interpreter (no CUDA device), CUDA otherwise. Leading dimensions are flattened
            into N. bfloat16 under the interpreter is computed the same way but stored via an fp32
            buffer that torch rounds (the interpreter's own bf16 cast truncates). Strided rows are read in place; a non-unit stride on the last dimension is
            handled by copying ``x`` with ``.contiguous()``.
        weight, bias: optional ``(D,)`` tensors (same supported dtypes, same device), read in fp32.
        eps: added to the variance before the square root (>= 0), as in torch.
        block_rows, block_d: tile shape (powers of two); default from :func:`block_sizes`.

    Returns:
        ``LayerNormOutput(y, mean, rstd)``: ``y`` with ``x``'s shape and dtype; ``mean`` and
        ``rstd = 1 / sqrt(var + eps)`` (biased variance) as fp32 tensors of shape ``(N,)``.

    Raises:
        TypeError: ``x``/``weight``/``bias`` not tensors or of an unsupported dtype; ``eps`` not a
            number; block sizes not ints.
        ValueError: ``x`` 0-d or with D = 0; ``weight``/``bias`` shape not ``(D,)`` or on another
            device; ``x`` on the wrong device for the mode; ``eps`` negative or not finite; block
            sizes not powers of two.

    Formula: Ba, Kiros & Hinton (2016), arXiv:1607.06450, eq. 4, with torch's biased variance.
    """
    return launch(layer_norm_fwd_kernel, x, weight, bias, eps, block_rows=block_rows, block_d=block_d)
