"""Leaves eps out: rstd = 1 / sqrt(var).

rstd is then too large by a factor of about 1 + eps / (2 var): visible on the grader's first
row (D = 7 values whose sample variance is about 0.07), and infinite on its constant row.
"""

EXPECT = ["rstd is", "eps is missing"]

import ringlab.labs.layernorm  # noqa: F401,E402 - sets TRITON_INTERPRET before triton loads
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def layer_norm_row(X, Y, W, B, Mean, Rstd, stride, n_cols, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK_D], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        acc += tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.full([BLOCK_D], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask) + tl.load(B + cols, mask=mask)
        tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)
