"""Graders for the performance exercises: roofline (P3), decode step (P8), pipeline bubble (P10).

* ex09 ``roofline_bound(flops, bytes_moved, hardware) -> (bound, time_s)`` on datasheet rows.
* ex10 ``decode_step_time(batch_size, weight_bytes, kv_bytes_per_sequence, flops_per_token,
  peak_flops, hbm_bandwidth) -> seconds``.
* ex11 ``pipeline_bubble(stages, microbatches, schedule, virtual_stages, relative_to) -> fraction``.

Expected values are written out here from the closed forms (Williams et al. 2009;
PROBLEMS.md P8; Narayanan et al. 2021, sec. 2.2) and never taken from ``ringlab.calc``. When
an answer is wrong, the grader also evaluates the known wrong formulas (sparse peak, weights
read per sequence, KV left out, wall-clock vs ideal, v forgotten, ...) and names the one the
answer matches.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ringlab.calc.hardware import HARDWARE

from .engine import CaseFailure, as_number, run_grader
from .exercise import Exercise

REL_TOL = 1e-9


def _number(value, what: str) -> float:
    return as_number(value, what)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-300)


def _diagnose(got: float, known_wrong: dict[str, float]) -> str:
    """'; <explanation>' for the first known wrong formula ``got`` matches, else ''."""
    for explanation, value in known_wrong.items():
        if _close(got, value):
            return f"; {explanation}"
    return ""


# ---------------------------------------------------------------------------------------- ex09

ROOFLINE_HARDWARE = tuple(name for name, hw in HARDWARE.items() if hw.tflops_bf16)


def roofline_cases() -> list[dict]:
    """P3 itself, then intensities placed between the dense and sparse ridges of A100 and H100,
    between the A100's and H100's ridges, a pure copy (0 FLOP), and chips without a sparse mode."""
    return [
        {"flops": 512e9, "bytes_moved": 8e9, "hardware": "a100-sxm-80gb"},  # P3: memory-bound, 3.92 ms
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
    """ex09: the bound against the dense ridge, and max(flops / peak, bytes / bandwidth)."""
    hw = HARDWARE[hardware]
    peak, bw = hw.tflops_bf16 * 1e12, hw.hbm_bandwidth
    memory_time, compute_time = bytes_moved / bw, flops / peak
    intensity, ridge = flops / bytes_moved, peak / bw
    want_bound = "memory" if memory_time > compute_time else "compute"
    want_time = max(memory_time, compute_time)

    result = fn(flops, bytes_moved, hw)
    if not isinstance(result, tuple) or len(result) != 2:
        raise CaseFailure(f"roofline_bound should return a tuple (bound, time_s), got {result!r}")
    bound, got_time = result[0], _number(result[1], "time_s")
    sparse_peak = (hw.tflops_bf16_sparse or hw.tflops_bf16) * 1e12
    sparse_bound = "memory" if memory_time > flops / sparse_peak else "compute"
    uses_sparse = (f"your answer matches the sparse peak {sparse_peak / 1e12:g} TFLOP/s (2:4 structured "
                   f"sparsity, twice the dense figure): dense kernels get tflops_bf16 = {peak / 1e12:g}")
    if bound not in ("memory", "compute"):
        raise CaseFailure(f"bound should be 'memory' or 'compute', got {bound!r}")
    tie = _close(memory_time, compute_time)
    if bound != want_bound and not tie:
        relation = "below" if want_bound == "memory" else "at or above"
        why = uses_sparse if bound == sparse_bound and hw.tflops_bf16_sparse else (
            "compare the intensity flops / bytes_moved with the ridge of this chip, dense peak / bandwidth "
            "(both in per-second units: TFLOP/s x 1e12 over bytes/s)")
        raise CaseFailure(f"bound should be {want_bound!r}: intensity {intensity:.4g} FLOP/B is {relation} the ridge "
                          f"{ridge:.4g} FLOP/B of {hw.name}, got {bound!r}; {why}")
    if not _close(got_time, want_time):
        roof = "bytes / bandwidth" if want_bound == "memory" else "flops / peak"
        known = {
            "that is the compute time flops / peak; a memory-bound kernel takes bytes / bandwidth": compute_time,
            "that is the memory time bytes / bandwidth; a compute-bound kernel takes flops / peak": memory_time,
            uses_sparse: max(memory_time, flops / sparse_peak),
            "the roofline takes the larger of the two times, not their sum": memory_time + compute_time,
        }
        raise CaseFailure(f"time_s should be {want_time * 1e3:.6g} ms ({want_bound}-bound: {roof}), got "
                          f"{got_time * 1e3:.6g} ms{_diagnose(got_time, known)}")


# ---------------------------------------------------------------------------------------- ex10

# Llama-2-7B-like numbers on an A100 SXM 80GB (bf16): weights 13.48 GB, KV 524,288 B per token.
_W, _KV_TOKEN, _F, _PEAK, _BW = 13_476_831_232, 524_288, 13.4e9, 312e12, 2.039e12


def decode_cases() -> list[dict]:
    """Batch 1 first (where the linear model is still right), then batches where it is not,
    4,096 and 128 tokens of context, a compute-bound batch, and no KV at all."""
    cases = [{"batch_size": b, "weight_bytes": _W, "kv_bytes_per_sequence": _KV_TOKEN * ctx,
              "flops_per_token": _F, "peak_flops": _PEAK, "hbm_bandwidth": _BW}
             for ctx, batches in ((4096, (1, 8, 27)), (128, (1, 64, 1024)))
             for b in batches]
    cases.append({"batch_size": 16, "weight_bytes": 140_000_000_000, "kv_bytes_per_sequence": 0,
                  "flops_per_token": 1.4e11, "peak_flops": 989e12, "hbm_bandwidth": 3.35e12})
    return cases


def decode_strategy():
    """Hypothesis strategy over batch 1..4096, weights 1e8..1e12 B, KV 0..1e10 B per sequence,
    FLOPs per token about one per weight byte, peaks 1e13..3e15 FLOP/s, bandwidths 1e11..1e13 B/s."""
    from hypothesis import strategies as st

    def log_int(lo, hi):
        return st.floats(lo, hi).map(lambda e: int(10**e))

    return st.fixed_dictionaries({
        "batch_size": st.integers(1, 4096),
        "weight_bytes": log_int(8, 12),
        "kv_bytes_per_sequence": st.one_of(st.just(0), log_int(4, 10)),
        "flops_per_token": st.floats(8, 12).map(lambda e: float(f"{10**e:.6g}")),
        "peak_flops": st.floats(13, 15.5).map(lambda e: float(f"{10**e:.6g}")),
        "hbm_bandwidth": st.floats(11, 13).map(lambda e: float(f"{10**e:.6g}")),
    })


def check_decode(fn, batch_size: int, weight_bytes: int, kv_bytes_per_sequence: int, flops_per_token: float,
                 peak_flops: float, hbm_bandwidth: float) -> None:
    """ex10: max((weights once + batch x KV) / bandwidth, batch x FLOPs per token / peak)."""
    b, w, kv = batch_size, weight_bytes, kv_bytes_per_sequence
    memory_time = (w + b * kv) / hbm_bandwidth
    compute_time = b * flops_per_token / peak_flops
    want = max(memory_time, compute_time)
    got = _number(fn(b, w, kv, flops_per_token, peak_flops, hbm_bandwidth), "the step time")
    if _close(got, want):
        return
    bound = "memory" if memory_time > compute_time else "compute"
    detail = ("(weight_bytes + batch_size x kv_bytes_per_sequence) / hbm_bandwidth" if bound == "memory"
              else "batch_size x flops_per_token / peak_flops")
    known = {
        "that is every sequence reading all the weights on its own, batch x (weights + KV) / bandwidth (the "
        "circulating linear model): a batched step reads the weights once per step": max(
            b * (w + kv) / hbm_bandwidth, compute_time),
        "that leaves out the KV cache: each sequence reads its own KV at every step": max(
            w / hbm_bandwidth, compute_time),
        "that adds the two roofs; the step takes the larger of memory time and compute time":
            memory_time + compute_time,
        "the FLOPs grow with the batch: batch_size x flops_per_token": max(memory_time, flops_per_token / peak_flops),
    }
    raise CaseFailure(f"step time should be {want * 1e3:.6g} ms ({bound}-bound: {detail}), got "
                      f"{got * 1e3:.6g} ms{_diagnose(got, known)}")


# ---------------------------------------------------------------------------------------- ex11

BUBBLE_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b")


def bubble_cases() -> list[dict]:
    """P10 (P=8, M=16) in every schedule and convention, then one stage, one micro-batch, v = 4."""
    cases = [{"stages": 8, "microbatches": 16, "schedule": s, "virtual_stages": 2 if s == "interleaved-1f1b" else 1,
              "relative_to": rel} for s in BUBBLE_SCHEDULES for rel in ("ideal", "total")]
    cases += [
        {"stages": 1, "microbatches": 4, "schedule": "1f1b", "virtual_stages": 1, "relative_to": "total"},
        {"stages": 4, "microbatches": 1, "schedule": "gpipe", "virtual_stages": 1, "relative_to": "ideal"},
        {"stages": 4, "microbatches": 8, "schedule": "interleaved-1f1b", "virtual_stages": 4, "relative_to": "total"},
        {"stages": 4, "microbatches": 8, "schedule": "interleaved-1f1b", "virtual_stages": 1, "relative_to": "ideal"},
        # v given to schedules without model chunks: it must not change their bubble
        {"stages": 8, "microbatches": 16, "schedule": "gpipe", "virtual_stages": 2, "relative_to": "ideal"},
        {"stages": 4, "microbatches": 8, "schedule": "1f1b", "virtual_stages": 4, "relative_to": "total"},
    ]
    return cases


def bubble_strategy():
    """Hypothesis strategy: P 1..32, M 1..128 (a multiple of P for interleaved), v 1..8 (ignored but for interleaved)."""
    from hypothesis import strategies as st

    def fix(case: dict) -> dict:
        if case["schedule"] == "interleaved-1f1b":
            case["microbatches"] = case["stages"] * max(1, case["microbatches"] // case["stages"])
        return case

    return st.fixed_dictionaries({
        "stages": st.integers(1, 32), "microbatches": st.integers(1, 128),
        "schedule": st.sampled_from(BUBBLE_SCHEDULES), "virtual_stages": st.integers(1, 8),
        "relative_to": st.sampled_from(("ideal", "total")),
    }).map(fix)


def check_bubble(fn, stages: int, microbatches: int, schedule: str, virtual_stages: int, relative_to: str) -> None:
    """ex11: (P-1)/(vM) relative to ideal compute, (P-1)/(vM + P-1) of the wall clock (v = 1 unless interleaved)."""
    p, m = stages, microbatches
    v = virtual_stages if schedule == "interleaved-1f1b" else 1
    ideal, total = Fraction(p - 1, v * m), Fraction(p - 1, v * m + p - 1)
    want = ideal if relative_to == "ideal" else total
    got = _number(fn(stages=p, microbatches=m, schedule=schedule, virtual_stages=virtual_stages,
                     relative_to=relative_to), "the bubble fraction")
    if _close(got, float(want)):
        return
    vm = "v x M" if v > 1 else "M"
    formula = f"(P-1)/({vm})" if relative_to == "ideal" else f"(P-1)/({vm} + P-1)"
    if relative_to == "ideal" and v == 1:
        formula = "(P-1)/M"
    known = {}
    if schedule != "interleaved-1f1b" and virtual_stages > 1:  # checked first: v = 2 also looks like "halved"
        known[f"{schedule} has no model chunks, so virtual_stages = {virtual_stages} does not apply: only "
              f"interleaved-1f1b divides the bubble by it"] = (
            Fraction(p - 1, virtual_stages * m) if relative_to == "ideal" else Fraction(p - 1, virtual_stages * m + p - 1))
    known.update({
        "that is the bubble relative to the ideal compute time, (P-1)/M; of the wall clock it is "
        "bubble / (bubble + compute)": Fraction(p - 1, v * m),
        "that is the wall-clock share; relative to the ideal compute time it is (P-1)/M": total,
        "that is the non-interleaved value: interleaving divides the bubble by virtual_stages": Fraction(
            p - 1, m) if relative_to == "ideal" else Fraction(p - 1, m + p - 1),
        "1F1B has the same bubble as GPipe; what it saves is activation memory (at most P micro-batches in flight)":
            want / 2,
    })
    raise CaseFailure(f"{schedule} bubble relative to {relative_to} should be {formula} = {want} = {float(want):.6g}, "
                      f"got {got:.6g}{_diagnose(got, {k: float(x) for k, x in known.items() if x != want})}")


# ------------------------------------------------------------------------------------ registry

def _roofline(fn):
    return run_grader("ex09", "roofline_bound", fn, check_roofline, roofline_cases(), roofline_strategy(),
                      "the bound and the roofline time are right on every chip tried, dense peaks throughout")


def _decode(fn):
    return run_grader("ex10", "decode_step_time", fn, check_decode, decode_cases(), decode_strategy(),
                      "weights once per step, KV per sequence, the larger roof: right at every batch size tried")


def _bubble(fn):
    return run_grader("ex11", "pipeline_bubble", fn, check_bubble, bubble_cases(), bubble_strategy(),
                      "the bubble is right for every schedule, P, M, v and convention tried")


EXERCISES = (
    Exercise("ex09", "ex09_roofline", "roofline_bound", "Memory-bound or compute-bound? (roofline)", "P3",
             _roofline, (
                 "Two times bound the kernel from below: its FLOPs at the peak rate and its bytes at the HBM "
                 "bandwidth. The larger one is the roofline time.",
                 "Datasheets print the 2:4-sparsity figure in large type; a dense kernel gets half of it "
                 "(tflops_bf16, not tflops_bf16_sparse). TFLOP/s means 1e12 FLOP/s.",
                 "ridge = tflops_bf16 * 1e12 / hbm_bandwidth (FLOP/B); below it the kernel is memory-bound and "
                 "takes bytes_moved / hbm_bandwidth, otherwise flops / peak.",
             )),
    Exercise("ex10", "ex10_decode_step", "decode_step_time", "Decode step time for a batch", "P8", _decode, (
        "Ask what one decode step reads from HBM. Does a second sequence in the batch make the weights "
        "cross HBM a second time?",
        "No: the batch is one matmul per weight matrix, so weights are read once per step; each sequence "
        "adds only its own KV cache. FLOPs, though, grow with every token produced.",
        "bytes = weight_bytes + batch_size * kv_bytes_per_sequence; flops = batch_size * flops_per_token; "
        "return max(bytes / hbm_bandwidth, flops / peak_flops).",
    )),
    Exercise("ex11", "ex11_pipeline_bubble", "pipeline_bubble", "Pipeline bubble fraction", "P10", _bubble, (
        "Each device idles while the first micro-batch's forward reaches it and while the last backward "
        "comes back: (P-1) stage-times of forward + backward per step, against M of useful work.",
        "GPipe and 1F1B have the same bubble; interleaving v chunks per device makes each stage-time v times "
        "shorter, so the bubble divides by v.",
        "bubble = (P-1)/v, compute = M (in the same unit); 'ideal' returns bubble / compute, 'total' "
        "returns bubble / (bubble + compute).",
    )),
)
