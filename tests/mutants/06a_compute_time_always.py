"""Gets the bound right but always returns the compute time, even for a memory-bound kernel."""

EXPECT = ["time_s should be 3.92", "memory-bound", "compute time"]


def roofline_bound(flops, bytes_moved, hardware):
    peak = hardware.tflops_bf16 * 1e12
    bound = "memory" if flops / bytes_moved < peak / hardware.hbm_bandwidth else "compute"
    return bound, flops / peak  # bug: memory-bound kernels take bytes / bandwidth
