"""Every (collective, algorithm) in the simulator against the direct reduction, measured in the same run.

Peer (as in bench_ring_sim.py): ``x.sum(axis=0)`` materialised on N output rows
(``np.broadcast_to(...).copy()``) for the same ``(N, numel)`` float32 input. Every algorithm gets
that input (all_gather: the gathered message has numel elements, each rank holds 1/N of it;
all_to_all: numel-element send buffers). Timings are the best of ``--repeat`` runs, alternating
simulator and peer. The naive direct all-reduce buffers N (N - 1) whole messages in its single
step (64 GiB at N=128, 2**20 float32), so it runs at ``numel // N`` and is compared with the peer
at that size; it does N times the arithmetic of the others by design.

Usage: python benchmarks/bench_collectives.py [--world-size 128] [--numel 1048576] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ringlab.collectives import ALGORITHMS
from ringlab.sim.runner import run_collective


def _direct(x: np.ndarray) -> np.ndarray:
    return np.broadcast_to(x.sum(axis=0), x.shape).copy()


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def run(world_size: int, numel: int, repeat: int) -> list[dict]:
    rows = []
    full = np.random.default_rng(0).standard_normal((world_size, numel)).astype(np.float32)
    for collective, algorithm in ALGORITHMS:
        x = full[:, :numel // world_size] if (collective, algorithm) == ("all_reduce", "direct") else full
        inputs = np.array_split(x[0], world_size) if collective == "all_gather" else x

        def sim():
            return run_collective(collective, algorithm, inputs)

        sim()  # warm-up: compiles and caches the plan
        best_sim = best_direct = np.inf
        for _ in range(repeat):
            best_sim = min(best_sim, _seconds(sim))
            best_direct = min(best_direct, _seconds(lambda: _direct(x)))
        rows.append({"collective": collective, "algorithm": algorithm, "numel": x.shape[1], "sim_s": best_sim,
                     "direct_s": best_direct, "ratio": best_sim / best_direct})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=128)
    parser.add_argument("--numel", type=int, default=2**20, help="float32 elements per rank")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"N={args.world_size}, float32, peer = sum over ranks + materialised broadcast")
    print(f"{'collective':<15} {'algorithm':<22} {'numel':>8} {'sim s':>8} {'direct s':>9} {'sim/direct':>11}")
    for r in run(args.world_size, args.numel, args.repeat):
        print(f"{r['collective']:<15} {r['algorithm']:<22} {r['numel']:>8} {r['sim_s']:>8.4f} {r['direct_s']:>9.4f} "
              f"{r['ratio']:>11.2f}")


if __name__ == "__main__":
    main()
