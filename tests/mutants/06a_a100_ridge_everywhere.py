"""Uses the A100's ridge (312 / 2.039 = 153 FLOP/B), remembered from the interview question, on every chip."""

EXPECT = ["bound should be 'memory'", "h100-sxm", "ridge 295"]


def roofline_bound(flops, bytes_moved, hardware):
    peak = hardware.tflops_bf16 * 1e12
    if flops / bytes_moved < 153:  # bug: the ridge depends on the chip
        return "memory", bytes_moved / hardware.hbm_bandwidth
    return "compute", flops / peak
