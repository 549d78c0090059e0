"""Speed of ``ringlab serve-sim``'s engine on ~1,000 requests, as a ratio against a peer in the same run.

The peer is what any simulator that takes its step times from ``ringlab.calc`` must pay at least:
one :func:`ringlab.calc.decode_step` call per step of the same trace, at the step's batch size and
the trace's mean context (mean prompt + half the mean output). The scheduler does far more per step (admission, block tables, prefix keys, preemption,
the trace), but evaluates the roofline once per batch size up front; a ratio near or below 1 says
the bookkeeping costs no more than asking the calculator once a step would. Wall times are printed
for the record; nothing here asserts a time.

Usage: python benchmarks/bench_serving.py [--rate 10] [--seconds 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ringlab.calc import decode_step
from ringlab.serving import poisson_requests, simulate


def _best(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=100.0)
    parser.add_argument("--blocks", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    prompt_len, output_len = 256, 128
    requests = poisson_requests(rate=args.rate, seconds=args.seconds, prompt_len=prompt_len, output_len=output_len,
                                seed=0)
    context = prompt_len + output_len // 2
    engine_s, trace = _best(lambda: simulate(requests, "llama-2-7b", "h100-sxm", args.blocks), args.repeat)
    batch = np.maximum(trace.steps["decode_tokens"] + trace.steps["prefill_tokens"], 1)

    def per_step_calculator():
        for b in batch:
            decode_step("llama-2-7b", "h100-sxm", int(b), context)

    peer_s, _ = _best(per_step_calculator, args.repeat)
    m = trace.metrics()
    print(f"{m['requests']} requests, {m['steps']:,} steps ({m['finished']} finished)")
    print(f"scheduler run           {engine_s:8.3f} s")
    print(f"decode_step per step    {peer_s:8.3f} s   (peer)")
    print(f"ratio scheduler / peer  {engine_s / peer_s:8.2f}")


if __name__ == "__main__":
    main()
