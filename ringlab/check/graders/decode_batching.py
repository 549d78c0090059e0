"""Grader for topic 07, decode batching under a latency SLA (card 07).

* 07a ``decode_step_time(batch_size, weight_bytes, kv_bytes_per_sequence, flops_per_token,
  peak_flops, hbm_bandwidth) -> seconds``.

Expected values are written out here from the closed form (card 07), never taken from
``ringlab.calc``. When an answer is wrong, the grader also evaluates the known wrong formulas (weights
read per sequence, KV left out, ...) and names the one the answer matches.
"""

from __future__ import annotations

from ..engine import CaseFailure, as_number, close, named_mistake, run_grader
from ..exercise import Exercise


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
    """07a: max((weights once + batch x KV) / bandwidth, batch x FLOPs per token / peak)."""
    b, w, kv = batch_size, weight_bytes, kv_bytes_per_sequence
    memory_time = (w + b * kv) / hbm_bandwidth
    compute_time = b * flops_per_token / peak_flops
    want = max(memory_time, compute_time)
    got = as_number(fn(b, w, kv, flops_per_token, peak_flops, hbm_bandwidth), "the step time")
    if close(got, want):
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
                      f"{got * 1e3:.6g} ms{named_mistake(got, known)}")


def _decode(fn):
    return run_grader("07a", "decode_step_time", fn, check_decode, decode_cases(), decode_strategy(),
                      "weights once per step, KV per sequence, the larger roof: right at every batch size tried")


EXERCISES = (
    Exercise("07a", "decode_step_time", "Decode step time for a batch", _decode, (
        "Ask what one decode step reads from HBM. Does a second sequence in the batch make the weights "
        "cross HBM a second time?",
        "No: the batch is one matmul per weight matrix, so weights are read once per step; each sequence "
        "adds only its own KV cache. FLOPs, though, grow with every token produced.",
        "bytes = weight_bytes + batch_size * kv_bytes_per_sequence; flops = batch_size * flops_per_token; "
        "return max(bytes / hbm_bandwidth, flops / peak_flops).",
    )),
)
