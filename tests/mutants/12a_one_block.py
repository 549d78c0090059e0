"""Handles only the first column block: no loop, so it assumes D <= BLOCK_D.

Right for D = 1, 7 and 127; at D = 1000 with BLOCK_D = 256 it normalises over the first 256
values and never writes the rest.
"""

EXPECT = ["n_cols=1000", "mean is", "first BLOCK_D = 256 columns only"]

import ringlab.labs.layernorm  # noqa: F401,E402 - sets TRITON_INTERPRET before triton loads
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def layer_norm_row(X, Y, W, B, Mean, Rstd, stride, n_cols, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_D)
    mask = cols < n_cols
    x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    y = d * rstd * tl.load(W + cols, mask=mask, other=0.0) + tl.load(B + cols, mask=mask, other=0.0)
    tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)
