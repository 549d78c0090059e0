"""Compares the intensity with bandwidth / peak, the inverse of the ridge, so everything looks compute-bound."""

EXPECT = ["bound should be 'memory'", "ridge 153", "got 'compute'"]


def roofline_bound(flops, bytes_moved, hardware):
    peak = hardware.tflops_bf16 * 1e12
    ridge = hardware.hbm_bandwidth / peak  # bug: upside down
    if flops / bytes_moved < ridge:
        return "memory", bytes_moved / hardware.hbm_bandwidth
    return "compute", flops / peak
