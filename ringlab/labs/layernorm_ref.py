"""LayerNorm forward in numpy, following the Triton kernel's one-pass algorithm step by step.

The row is read in column blocks of ``block_d``. Each block contributes its count ``n_b``,
mean ``mean_b`` and ``M2_b = sum((x - mean_b)^2)``, merged into the running ``(n_a, mean_a,
M2_a)`` with the pairwise update of Chan, Golub & LeVeque ("Updating formulae and a pairwise
algorithm for computing sample variances", Stanford STAN-CS-79-773, 1979)::

    n     = n_a + n_b
    delta = mean_b - mean_a
    mean  = mean_a + delta * n_b / n
    M2    = M2_a + M2_b + delta^2 * n_a * n_b / n

With ``block_d = 1`` this is Welford's update (Technometrics 4(3):419-420, 1962). Then
``var = M2 / D`` (biased, as torch.nn.functional.layer_norm), ``rstd = 1 / sqrt(var + eps)``
and ``y = (x - mean) * rstd * weight + bias`` (Ba, Kiros & Hinton 2016, arXiv:1607.06450).
Everything is computed in float32, like the kernel, so the lesson runs without Triton or torch.
"""

from __future__ import annotations

from typing import NamedTuple

import ml_dtypes
import numpy as np

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


class LayerNormReference(NamedTuple):
    """``y`` has ``x``'s shape and dtype; ``mean`` and ``rstd`` are float32 of shape ``(N,)``."""

    y: np.ndarray
    mean: np.ndarray
    rstd: np.ndarray


def _check_float(name: str, dtype: np.dtype) -> None:
    if not (np.issubdtype(dtype, np.floating) or dtype == _BFLOAT16):
        raise TypeError(f"{name} must hold float16/32/64 or ml_dtypes.bfloat16 values, got dtype {dtype}")


def _affine(name: str, value, n_cols: int) -> np.ndarray | None:
    if value is None:
        return None
    value = np.asarray(value)
    if value.shape != (n_cols,):
        raise ValueError(f"{name} must have shape ({n_cols},) to match x's last dimension, got {value.shape}")
    _check_float(name, value.dtype)
    return value.astype(np.float32)


def layer_norm_reference(x, weight=None, bias=None, eps: float = 1e-5, *, block_d: int = 1024) -> LayerNormReference:
    """LayerNorm over the last axis of ``x`` (shape ``(..., D)``; float16/32/64 or bfloat16), in float32.

    ``weight`` and ``bias`` are optional arrays of shape ``(D,)``; ``block_d`` (>= 1) is the
    column block of the one-pass merge (the kernel's BLOCK_D; results differ from another
    block size only by float32 rounding). Returns ``LayerNormReference(y, mean, rstd)``:
    ``y`` in ``x``'s dtype and shape, ``mean`` and ``rstd`` float32 of shape ``(N,)`` with
    N the product of the leading dimensions.

    Raises TypeError for a non-floating ``x``/``weight``/``bias``, a non-int ``block_d`` or a
    non-numeric ``eps``; ValueError for a 0-d ``x``, D = 0, mismatched ``weight``/``bias``
    shapes, a negative or non-finite ``eps`` or ``block_d < 1``.
    """
    x = np.asarray(x)
    _check_float("x", x.dtype)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"x must have shape (..., D) with D >= 1, got {x.shape}")
    if isinstance(block_d, bool) or not isinstance(block_d, (int, np.integer)):
        raise TypeError(f"block_d must be an int, got {type(block_d).__name__}")
    if block_d < 1:
        raise ValueError(f"block_d must be >= 1, got {block_d}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating)):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps must be finite and >= 0, got {eps}")
    n_cols = x.shape[-1]
    weight = _affine("weight", weight, n_cols)
    bias = _affine("bias", bias, n_cols)

    rows = x.reshape(-1, n_cols).astype(np.float32)
    mean = np.zeros(rows.shape[0], dtype=np.float32)
    m2 = np.zeros(rows.shape[0], dtype=np.float32)
    for start in range(0, n_cols, block_d):
        block = rows[:, start:start + block_d]
        count_a, count_b = np.float32(start), np.float32(block.shape[1])
        mean_b = block.sum(axis=1, dtype=np.float32) / count_b
        m2_b = np.square(block - mean_b[:, None]).sum(axis=1, dtype=np.float32)
        total = count_a + count_b
        delta = mean_b - mean
        mean = mean + delta * (count_b / total)
        m2 = m2 + m2_b + delta * delta * (count_a * count_b / total)
    rstd = (np.float32(1.0) / np.sqrt(m2 / np.float32(n_cols) + np.float32(eps))).astype(np.float32)

    y = (rows - mean[:, None]) * rstd[:, None]
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return LayerNormReference(y.astype(x.dtype).reshape(x.shape), mean, rstd)
