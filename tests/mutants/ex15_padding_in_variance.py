"""Masked loads (other=0.0) but the centred values are not masked before squaring.

Each padded lane then adds (0 - mean)**2 to the sum of squares, so the variance is too large
whenever D is not a multiple of BLOCK_D and the mean is not zero.
"""

EXPECT = ["rstd is", "padded lanes", "n_cols=7"]

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
        x = tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += (x - mean) * (x - mean)
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask) + tl.load(B + cols, mask=mask)
        tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)
