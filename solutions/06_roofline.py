"""06a : is a kernel memory-bound or compute-bound, and how long does it take at best?

Grade it: ``ringlab check 06a`` or, in a notebook, ``ringlab.check.grade("06a")``.
Hints: ``ringlab.check.hint("06a", 1)`` (2 and 3 say more).
"""


def roofline_bound(flops, bytes_moved, hardware):
    """Place a bf16 kernel on ``hardware``'s roofline: which roof binds, and the roofline time.

    The roofline model (Williams, Waterman & Patterson 2009): a kernel cannot finish faster than
    its arithmetic at peak rate, nor faster than its HBM traffic at full bandwidth.

    Args:
        flops: floating-point operations the kernel performs (FLOP), a number >= 0.
        bytes_moved: bytes it reads from and writes to HBM, a number > 0.
        hardware: a ``ringlab.calc.Hardware`` datasheet row. Use ``hardware.tflops_bf16`` (dense
            bf16 peak, TFLOP/s = 1e12 FLOP/s), ``hardware.hbm_bandwidth`` (bytes/s). The row also
            carries ``tflops_bf16_sparse``, the 2:4-sparsity figure datasheets print in large type:
            it does not apply to dense kernels.

    Returns:
        ``(bound, time_s)``: ``bound`` is ``"memory"`` when the kernel's arithmetic intensity
        (FLOP/B) is below the ridge point (peak FLOP/s / bandwidth), else ``"compute"``;
        ``time_s`` is the roofline time in seconds, max(flops / peak, bytes_moved / bandwidth).
    """
    ### BEGIN SOLUTION
    peak = hardware.tflops_bf16 * 1e12
    bandwidth = hardware.hbm_bandwidth
    intensity = flops / bytes_moved
    ridge = peak / bandwidth
    if intensity < ridge:
        return "memory", bytes_moved / bandwidth
    return "compute", flops / peak
    ### END SOLUTION
