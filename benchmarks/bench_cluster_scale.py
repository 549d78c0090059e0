"""Cluster-scale simulation and traffic counting, against peers measured in the same run.

1. Ring all-reduce moving data at N = 4,096 x 4,096 and 16,384 x 1,024 float32 (one call, plan
   compiled inside it): results against the float64 direct sum, bytes against the closed form, time
   against the peer (``x.sum(axis=0)`` materialised on N rows, as in bench_ring_sim.py), and the
   tracemalloc peak over the input's bytes.
2. Traffic only at N = 131,072: building each schedule and calling ``bytes_sent(numel, itemsize)``,
   checked equal to the algorithm's closed form, timed against that closed form itself.

Usage: python benchmarks/bench_cluster_scale.py [--quick]
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import ringlab
from ringlab.collectives import ALGORITHMS, ring_all_reduce_bytes
from ringlab.sim.plan import clear_plans

DATA_CASES = [(4096, 4096), (16384, 1024)]
TRAFFIC_N = 131072
TRAFFIC = [("all_reduce", "ring"), ("all_reduce", "double_binary_tree"), ("all_reduce", "rabenseifner"),
           ("reduce_scatter", "recursive_halving"), ("all_gather", "recursive_doubling"),
           ("broadcast", "scatter_allgather")]


def _direct(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(x.sum(axis=0), x.shape).copy()


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def data_rows(cases) -> list[dict]:
    rows = []
    for n, numel in cases:
        x = np.random.default_rng(0).standard_normal((n, numel)).astype(np.float32)
        clear_plans()
        res, sim = _timed(lambda: ringlab.ring_allreduce(x))  # cold: the plan is compiled inside
        clear_plans()
        tracemalloc.start()  # a second cold call for the peak (tracing slows it, so it is not timed)
        ringlab.ring_allreduce(x)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        direct = min(_timed(lambda: _direct(x))[1] for _ in range(3))
        exact = x.astype(np.float64).sum(axis=0)
        bound = n * np.finfo(np.float32).eps * np.abs(x).astype(np.float64).sum(axis=0)  # Higham: (N-1) u sum |x|
        ok = bool((np.abs(res.outputs - exact) <= bound).all()
                  and np.array_equal(res.traffic.bytes_sent, ring_all_reduce_bytes(n, numel, 4)))
        rows.append({"world_size": n, "numel": numel, "sim_s": sim, "direct_s": direct, "ratio": sim / direct,
                     "peak_over_input": peak / x.nbytes, "ok": ok})
    return rows


def traffic_rows(n: int) -> list[dict]:
    rows = []
    numel, itemsize = 2**30 + 7, 2
    for key in TRAFFIC:
        algo = ALGORITHMS[key]
        counted, t_count = _timed(lambda: algo(n).bytes_sent(numel, itemsize))
        closed, t_closed = _timed(lambda: algo.bytes_sent(n, numel, itemsize))
        rows.append({"collective": key[0], "algorithm": key[1], "count_s": t_count, "closed_s": t_closed,
                     "equal": bool(np.array_equal(counted, closed))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the ranks, for a smoke run")
    args = parser.parse_args()
    cases = [(n // 4, numel) for n, numel in DATA_CASES] if args.quick else DATA_CASES
    print("ring all-reduce moving data (float32); peer = sum over ranks + materialised broadcast")
    print(f"{'N':>7} {'numel':>7} {'sim s':>7} {'direct s':>9} {'sim/direct':>11} {'peak/input':>11} {'checks':>7}")
    for r in data_rows(cases):
        print(f"{r['world_size']:>7} {r['numel']:>7} {r['sim_s']:>7.2f} {r['direct_s']:>9.4f} {r['ratio']:>11.1f} "
              f"{r['peak_over_input']:>11.2f} {'ok' if r['ok'] else 'FAIL':>7}")
    n = TRAFFIC_N // 4 if args.quick else TRAFFIC_N
    print(f"\ntraffic only at N={n}: build the schedule + bytes_sent(), against the closed form")
    print(f"{'collective':<15} {'algorithm':<20} {'count s':>8} {'closed s':>9} {'equal':>6}")
    for r in traffic_rows(n):
        print(f"{r['collective']:<15} {r['algorithm']:<20} {r['count_s']:>8.2f} {r['closed_s']:>9.3f} "
              f"{'yes' if r['equal'] else 'NO':>6}")


if __name__ == "__main__":
    main()
