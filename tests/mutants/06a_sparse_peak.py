"""Reads the datasheet's headline bf16 figure, which is the 2:4-sparsity peak (twice the dense one)."""

EXPECT = ["sparse", "dense", "bound should be 'compute'", "intensity 200"]


def roofline_bound(flops, bytes_moved, hardware):
    peak = (hardware.tflops_bf16_sparse or hardware.tflops_bf16) * 1e12
    memory_time, compute_time = bytes_moved / hardware.hbm_bandwidth, flops / peak
    return ("memory" if memory_time > compute_time else "compute"), max(memory_time, compute_time)
