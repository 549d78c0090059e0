"""Simulator speed and memory against the direct reduction, measured in the same run.

Peer: ``x.sum(axis=0)`` followed by materialising it on N output rows (``np.broadcast_to(...).copy()``),
the cheapest way to give every rank the reduced array. Timings are the best of ``--repeat``
runs, alternating sim and peer so both see the same machine load. Peak memory is the
tracemalloc peak during one simulator call divided by the input's bytes.

Usage: python benchmarks/bench_ring_sim.py [--repeat 5] [--quick]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import ringlab

CASES = [(8, 2**20), (64, 2**20), (512, 2**18)]


def _direct(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(x.sum(axis=0), x.shape).copy()


def _best(fn, x, repeat: int) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t0)
    return best


def run(cases, repeat: int) -> list[dict]:
    rows = []
    for n, numel in cases:
        x = np.random.default_rng(0).standard_normal((n, numel)).astype(np.float32)
        ringlab.ring_allreduce(x)  # warm-up: compiles and caches the plan
        sim = direct = np.inf
        for _ in range(repeat):  # alternate so both see the same load
            sim = min(sim, _best(ringlab.ring_allreduce, x, 1))
            direct = min(direct, _best(_direct, x, 1))
        tracemalloc.start()
        ringlab.ring_allreduce(x)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append({"world_size": n, "numel": numel, "input_MiB": x.nbytes / 2**20, "sim_s": sim,
                     "direct_s": direct, "ratio": sim / direct, "peak_over_input": peak / x.nbytes})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller messages, for a smoke run")
    args = parser.parse_args()
    cases = [(n, numel // 16) for n, numel in CASES] if args.quick else CASES
    print(f"{'N':>4} {'numel':>9} {'input MiB':>10} {'sim s':>8} {'direct s':>9} {'sim/direct':>11} {'peak/input':>11}")
    for r in run(cases, args.repeat):
        print(f"{r['world_size']:>4} {r['numel']:>9} {r['input_MiB']:>10.0f} {r['sim_s']:>8.4f} {r['direct_s']:>9.4f} "
              f"{r['ratio']:>11.2f} {r['peak_over_input']:>11.2f}")


if __name__ == "__main__":
    main()
