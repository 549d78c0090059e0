"""Loads and stores without a mask: the padding after column D - 1 is read into the statistics.

On a GPU such a kernel reads the next row (or memory past the tensor) and writes over it;
the grader fills the padding with NaN, so the mean comes out NaN.
"""

EXPECT = ["mean is nan", "mask", "n_cols=7"]

import ringlab.labs.layernorm  # noqa: F401,E402 - sets TRITON_INTERPRET before triton loads
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def layer_norm_row(X, Y, W, B, Mean, Rstd, stride, n_cols, eps, BLOCK_D: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.full([BLOCK_D], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_D):
        acc += tl.load(X + row * stride + start + tl.arange(0, BLOCK_D)).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.full([BLOCK_D], 0.0, tl.float32)
    for start in range(0, n_cols, BLOCK_D):
        x = tl.load(X + row * stride + start + tl.arange(0, BLOCK_D)).to(tl.float32)
        acc += (x - mean) * (x - mean)
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        x = tl.load(X + row * stride + cols).to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols) + tl.load(B + cols)
        tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty))
