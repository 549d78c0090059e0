"""Variance as E[x^2] - E[x]^2 from one pass of sum(x) and sum(x*x).

Algebraically right, numerically not: when |mean| is large next to the spread, two nearly equal
fp32 numbers are subtracted and the digits cancel. The row with mean 300 and standard deviation
0.5 loses about (300 / 0.5)^2 = 3.6e5 times fp32 epsilon of relative accuracy in the variance.
"""

EXPECT = ["n_rows=3", "row 1: rstd is", "nearly equal"]

import ringlab.labs.layernorm  # noqa: F401,E402 - sets TRITON_INTERPRET before triton loads
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def layer_norm_row(X, Y, W, B, Mean, Rstd, stride, n_cols, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK_D], 0.0, tl.float32)
    acc_sq = tl.full([BLOCK_D], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        x = tl.load(X + row * stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x
        acc_sq += x * x
    mean = tl.sum(acc, axis=0) / n_cols
    var = tl.maximum(tl.sum(acc_sq, axis=0) / n_cols - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask, other=0.0) + tl.load(B + cols, mask=mask, other=0.0)
        tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty), mask=mask)
