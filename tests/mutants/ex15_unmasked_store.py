"""Statistics and y are right, but y is stored without a mask.

The padded lanes of the last column block are written too: on a GPU they land in the next row
or past the end of the tensor.
"""

EXPECT = ["wrote column 7", "past the row", "mask it"]

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
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, n_cols, BLOCK_D):
        cols = start + tl.arange(0, BLOCK_D)
        mask = cols < n_cols
        x = tl.load(X + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * tl.load(W + cols, mask=mask, other=0.0) + tl.load(B + cols, mask=mask, other=0.0)
        tl.store(Y + row * stride + cols, y.to(Y.dtype.element_ty))
