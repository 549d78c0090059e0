"""Accumulates in the input dtype: fp16 rows are summed and squared in fp16.

Right for fp32 inputs; for fp16 the running sums have 11 significant bits, so the mean and
the variance lose several digits (tl.sum of an fp16 tensor stays fp16).
"""

EXPECT = ["dtype=float16", "mean is", "fp16 rounding"]

import ringlab.labs.layernorm  # noqa: F401,E402 - sets TRITON_INTERPRET before triton loads
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def layer_norm_row(X, Y, W, B, Mean, Rstd, stride, n_cols, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK_D], 0.0, X.dtype.element_ty)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        acc += tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.full([BLOCK_D], 0.0, X.dtype.element_ty)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
        d = tl.where(mask, x - mean, 0.0).to(X.dtype.element_ty)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask) + tl.load(B + cols, mask=mask)
        tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)
