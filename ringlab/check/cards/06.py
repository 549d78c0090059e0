"""Card 06 (Roofline): the values its text uses, and fresh kernels and GPUs."""

from __future__ import annotations

from ringlab.calc import elementwise_cost, get_hardware, roofline
from ringlab.check.cards import Ask, Slip

PARAMS = {"hw": "a100-sxm-80gb", "gflop": 512, "gb": 8}  # the fixed card's numbers
HARDWARE = ("a100-sxm-80gb", "a100-pcie-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "mi300x", "l40s")
GBS = (1, 2, 4, 8, 16, 32)
INTENSITIES = (8, 16, 32, 64, 128, 256, 512, 1024)  # FLOP/B: both sides of every ridge in HARDWARE

ASKS = (
    Ask("ai", "arithmetic intensity", unit="FLOP/B", show="FLOP/B", rel_tol=0.01),
    Ask("time_ms", "fastest possible time", unit="s", show="ms"),
)
SLIPS = (
    Slip("ai", "ridge", "that is the ridge point, peak / bandwidth, a property of the GPU; the kernel's intensity is "
         "its FLOPs over its bytes"),
    Slip("time_ms", "other_ms", "that is the smaller of the memory time ({mem_ms:.2f} ms) and the compute time "
         "({compute_ms:.2f} ms); the roofline time is the larger"),
    Slip("time_ms", "sparse_ms", "the 2:4-sparse peak used as the dense one ({sparse_t:.0f} instead of "
         "{peak_t:.0f} TFLOP/s)"),
    Slip("time_ms", "time_rounded_ms", "the bandwidth rounded to {rounded_tb} TB/s; the datasheet says {bw_tb:.3f}"),
    Slip("time_ms", "a100_40gb_ms", "the A100 40GB's HBM2 ({bw40_tb:.3f} TB/s) used for the 80GB's "
         "({bw80_tb:.3f} TB/s)"),
)


def values(hw: str = "a100-sxm-80gb", gflop: int = 512, gb: int = 8) -> dict:
    """Roofline of a kernel of ``gflop`` GFLOP moving ``gb`` GB on preset ``hw`` (dense bf16), with the traps."""
    flops, nbytes = gflop * 1e9, gb * 1e9
    a100 = roofline(flops, nbytes, hw)  # the drawn GPU; the A100 SXM 80GB of the fixed card
    sparse_peak = roofline(flops, nbytes, hw, sparse=True)
    rounded_tb = round(a100.bandwidth / 1e12)
    a100_40 = roofline(flops, nbytes, "a100-sxm-40gb")
    # The sparse-peak trap, shown on a kernel of 400 FLOP/B on an H100 SXM.
    dense = roofline(400 * nbytes, nbytes, "h100-sxm")
    sparse = roofline(400 * nbytes, nbytes, "h100-sxm", sparse=True)
    numel = 2**28
    unfused = roofline(*elementwise_cost(numel, 2, fused=False), "a100-sxm-80gb")
    fused = roofline(*elementwise_cost(numel, 2, fused=True), "a100-sxm-80gb")
    return {
        "gflop": flops / 1e9, "gb": nbytes / 1e9, "peak_t": a100.peak_flops / 1e12,
        "bw_tb": a100.bandwidth / 1e12, "ai": a100.intensity, "ridge": a100.ridge_point,
        "hw": hw, "cmp": "<" if a100.intensity < a100.ridge_point else ">=",
        "waits": ("the arithmetic units wait for memory. A real kernel reaches maybe 80-90 % of the bandwidth"
                  if a100.bound == "memory" else
                  "memory keeps up and the tensor cores set the pace. A real kernel reaches maybe 70-80 % of peak"),
        "bound": a100.bound, "time_ms": a100.time_s * 1e3, "mem_ms": a100.memory_time_s * 1e3,
        "rounded_tb": rounded_tb, "time_rounded_ms": max(nbytes / (rounded_tb * 1e12), flops / a100.peak_flops) * 1e3,
        "compute_ms": a100.compute_time_s * 1e3, "attain_t": a100.attainable_flops / 1e12,
        "other_ms": min(a100.memory_time_s, a100.compute_time_s) * 1e3, "sparse_ms": sparse_peak.time_s * 1e3,
        "sparse_t": sparse_peak.peak_flops / 1e12,
        "a100_40gb_ms": a100_40.time_s * 1e3 if hw == "a100-sxm-80gb" else None,
        "frac": a100.fraction_of_peak,
        "bw40_tb": get_hardware("a100-sxm-40gb").hbm_bandwidth / 1e12,
        "bw80_tb": get_hardware("a100-sxm-80gb").hbm_bandwidth / 1e12, "time40_ms": a100_40.time_s * 1e3,
        "h_dense_t": dense.peak_flops / 1e12, "h_sparse_t": sparse.peak_flops / 1e12,
        "h_ridge": dense.ridge_point, "h_ridge_sparse": sparse.ridge_point,
        "h_bound": dense.bound, "h_bound_sparse": sparse.bound,
        "h_ms": dense.time_s * 1e3, "h_ms_sparse": sparse.time_s * 1e3, "h_tflop": dense.flops / 1e12,
        "numel": numel, "unfused_bytes": int(unfused.bytes_moved), "fused_bytes": int(fused.bytes_moved),
        "unfused_ai": unfused.intensity, "fused_ai": fused.intensity,
        "unfused_ms": unfused.time_s * 1e3, "fused_ms": fused.time_s * 1e3,
    }


def draw(rng) -> dict:
    """A GPU of :data:`HARDWARE` and a kernel of :data:`GBS` GB at one of :data:`INTENSITIES` FLOP/B."""
    gb = int(rng.choice(GBS))
    return {"hw": str(rng.choice(HARDWARE)), "gflop": gb * int(rng.choice(INTENSITIES)), "gb": gb}
