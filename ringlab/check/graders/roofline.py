"""Grader for topic 06, the roofline (card 06).

* 06a ``roofline_bound(flops, bytes_moved, hardware) -> (bound, time_s)`` on datasheet rows.

Expected values are written out here from the closed form (Williams et al. 2009), never taken from
``ringlab.calc``. When an answer is wrong, the grader also evaluates the known wrong formulas (the
sparse peak, ...) and names the one the answer matches.
"""

from __future__ import annotations

from ringlab.calc.hardware import HARDWARE
from ..engine import CaseFailure, as_number, close, named_mistake, run_grader
from ..exercise import Exercise


ROOFLINE_HARDWARE = tuple(name for name, hw in HARDWARE.items() if hw.tflops_bf16)


def roofline_cases() -> list[dict]:
    """Card 06's kernel itself, then intensities placed between the dense and sparse ridges of A100 and H100,
    between the A100's and H100's ridges, a pure copy (0 FLOP), and chips without a sparse mode."""
    return [
        {"flops": 512e9, "bytes_moved": 8e9, "hardware": "a100-sxm-80gb"},  # card 06: memory-bound, 3.92 ms
        {"flops": 512e9, "bytes_moved": 8e9, "hardware": "a100-sxm-40gb"},  # 1.555 TB/s, not 2.039
        {"flops": 200e9, "bytes_moved": 1e9, "hardware": "a100-sxm-80gb"},  # dense ridge 153 < 200 < sparse 306
        {"flops": 2 * 4096**3, "bytes_moved": 6 * 4096**2, "hardware": "a100-sxm-80gb"},  # 4096 matmul
        {"flops": 250e9, "bytes_moved": 1e9, "hardware": "h100-sxm"},  # A100 ridge 153 < 250 < H100 ridge 295
        {"flops": 400e9, "bytes_moved": 1e9, "hardware": "h100-sxm"},  # dense ridge 295 < 400 < sparse 590
        {"flops": 0, "bytes_moved": 2**30, "hardware": "h200"},  # a copy: memory-bound
        {"flops": 4e15, "bytes_moved": 1e9, "hardware": "mi300x"},
        {"flops": 1e12, "bytes_moved": 1e10, "hardware": "tpu-v5e"},
        {"flops": 3e12, "bytes_moved": 1e10, "hardware": "l4"},
    ]


def roofline_strategy():
    """Hypothesis strategy: FLOPs 1e6..1e16, bytes 1e4..1e12 (log-uniform), any preset with a bf16 peak."""
    from hypothesis import strategies as st

    return st.fixed_dictionaries({
        "flops": st.floats(6, 16).map(lambda e: float(f"{10**e:.6g}")),
        "bytes_moved": st.floats(4, 12).map(lambda e: float(f"{10**e:.6g}")),
        "hardware": st.sampled_from(ROOFLINE_HARDWARE),
    })


def check_roofline(fn, flops: float, bytes_moved: float, hardware: str) -> None:
    """06a: the bound against the dense ridge, and max(flops / peak, bytes / bandwidth)."""
    hw = HARDWARE[hardware]
    peak, bw = hw.tflops_bf16 * 1e12, hw.hbm_bandwidth
    memory_time, compute_time = bytes_moved / bw, flops / peak
    intensity, ridge = flops / bytes_moved, peak / bw
    want_bound = "memory" if memory_time > compute_time else "compute"
    want_time = max(memory_time, compute_time)

    result = fn(flops, bytes_moved, hw)
    if not isinstance(result, tuple) or len(result) != 2:
        raise CaseFailure(f"roofline_bound should return a tuple (bound, time_s), got {result!r}")
    bound, got_time = result[0], as_number(result[1], "time_s")
    sparse_peak = (hw.tflops_bf16_sparse or hw.tflops_bf16) * 1e12
    sparse_bound = "memory" if memory_time > flops / sparse_peak else "compute"
    uses_sparse = (f"your answer matches the sparse peak {sparse_peak / 1e12:g} TFLOP/s (2:4 structured "
                   f"sparsity, twice the dense figure): dense kernels get tflops_bf16 = {peak / 1e12:g}")
    if bound not in ("memory", "compute"):
        raise CaseFailure(f"bound should be 'memory' or 'compute', got {bound!r}")
    tie = close(memory_time, compute_time)
    if bound != want_bound and not tie:
        relation = "below" if want_bound == "memory" else "at or above"
        why = uses_sparse if bound == sparse_bound and hw.tflops_bf16_sparse else (
            "compare the intensity flops / bytes_moved with the ridge of this chip, dense peak / bandwidth "
            "(both in per-second units: TFLOP/s x 1e12 over bytes/s)")
        raise CaseFailure(f"bound should be {want_bound!r}: intensity {intensity:.4g} FLOP/B is {relation} the ridge "
                          f"{ridge:.4g} FLOP/B of {hw.name}, got {bound!r}; {why}")
    if not close(got_time, want_time):
        roof = "bytes / bandwidth" if want_bound == "memory" else "flops / peak"
        known = {
            "that is the compute time flops / peak; a memory-bound kernel takes bytes / bandwidth": compute_time,
            "that is the memory time bytes / bandwidth; a compute-bound kernel takes flops / peak": memory_time,
            uses_sparse: max(memory_time, flops / sparse_peak),
            "the roofline takes the larger of the two times, not their sum": memory_time + compute_time,
        }
        raise CaseFailure(f"time_s should be {want_time * 1e3:.6g} ms ({want_bound}-bound: {roof}), got "
                          f"{got_time * 1e3:.6g} ms{named_mistake(got_time, known)}")


def _roofline(fn):
    return run_grader("06a", "roofline_bound", fn, check_roofline, roofline_cases(), roofline_strategy(),
                      "the bound and the roofline time are right on every chip tried, dense peaks throughout")


EXERCISES = (
    Exercise("06a", "roofline_bound", "Memory-bound or compute-bound? (roofline)",
             _roofline, (
                 "Two times bound the kernel from below: its FLOPs at the peak rate and its bytes at the HBM "
                 "bandwidth. The larger one is the roofline time.",
                 "Datasheets print the 2:4-sparsity figure in large type; a dense kernel gets half of it "
                 "(tflops_bf16, not tflops_bf16_sparse). TFLOP/s means 1e12 FLOP/s.",
                 "ridge = tflops_bf16 * 1e12 / hbm_bandwidth (FLOP/B); below it the kernel is memory-bound and "
                 "takes bytes_moved / hbm_bandwidth, otherwise flops / peak.",
             )),
)
