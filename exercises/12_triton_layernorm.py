"""12a : the body of a LayerNorm forward kernel in Triton, one program per row.

Grade it: ``ringlab check 12a`` or, in a notebook, ``ringlab.check.grade("12a")``. The grader
launches your kernel itself in Triton's CPU interpreter (no GPU needed) on awkward row lengths
(D = 1, 7, 127, 1000), fp32 and fp16, and compares y, mean and rstd with a float64 computation.
Hints: ``ringlab.check.hint("12a", 1)`` (2 and 3 say more).
"""

# isort: skip_file
# Import order matters: on a machine without CUDA, ringlab.labs.layernorm sets TRITON_INTERPRET=1
# and only then imports triton, so the @triton.jit below becomes an interpreted kernel.
import ringlab.labs.layernorm  # noqa: F401
import triton
import triton.language as tl


@triton.jit
def layer_norm_row(X, Y, W, B, Mean, Rstd, stride, n_cols, eps, BLOCK_D: tl.constexpr):
    """Normalise row ``tl.program_id(0)`` of X into Y: ``y = (x - mean) * rstd * w + b``.

    The grader launches it as ``layer_norm_row[(n_rows,)](X, Y, W, B, Mean, Rstd, stride,
    n_cols, eps, BLOCK_D=block_d)``, one program per row.

    Args:
        X: pointer to the input, fp32 or fp16; row ``r`` starts at ``X + r * stride`` and its
            ``n_cols`` values are contiguous. Memory after column ``n_cols - 1`` of a row is
            padding you must neither use nor overwrite (``stride >= n_cols``).
        Y: pointer to the output, same dtype and layout as X (same ``stride``).
        W, B: pointers to the weight and bias, fp32, ``n_cols`` values each.
        Mean, Rstd: pointers to fp32 arrays of ``n_rows`` values: store the row's mean and
            ``rstd = 1 / sqrt(var + eps)`` at index ``row`` (a backward pass reuses them).
        stride: elements between the starts of consecutive rows (int).
        n_cols: D, the row length (int >= 1); not a power of two in general.
        eps: added to the variance before the square root (float).
        BLOCK_D: columns handled per step (a power of two, tl.constexpr); it may be smaller than
            D, so the row is processed in a loop over column blocks.

    ``var`` is the biased variance (divide by D, as torch.nn.functional.layer_norm does).
    Accumulate in fp32 whatever X's dtype, compute the variance from centred values (rows may
    have a large mean), and write y in Y's dtype.
    """
    raise NotImplementedError("12a: replace this line with your code")
