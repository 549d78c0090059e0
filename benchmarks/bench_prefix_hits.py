"""Speed of :func:`ringlab.serving.prefix_hits.prefix_hit_curve`, as a ratio against BlockManager itself.

A seeded synthetic trace of chained hash ids (default 20,000 requests of 25 blocks: a shared prefix of one of
300 "documents" picked with Pareto popularity, then blocks of its own) is replayed at 10 pool sizes under both
policies. The peer is the same replay through ``BlockManager.allocate`` / ``free`` (the allocator the curve
copies) at one pool size; the ratio is the curve's time per pool size over the peer's. Wall and CPU times are
printed for the record; nothing here asserts a time.

Usage: python benchmarks/bench_prefix_hits.py [--requests 20000] [--blocks 25]
"""

from __future__ import annotations

import argparse
import random
import time

from ringlab.serving import BlockManager
from ringlab.serving.prefix_hits import infinite_cache_hit_rate, prefix_hit_curve


def synthetic_trace(requests: int, blocks: int, seed: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    docs, next_id = [], 0
    for _ in range(300):
        size = rng.randint(5, min(20, blocks))
        docs.append(list(range(next_id, next_id + size)))
        next_id += size
    trace = []
    for _ in range(requests):
        doc = docs[min(int(rng.paretovariate(1.0)) - 1, len(docs) - 1)]
        shared = rng.randint(1, len(doc))
        trace.append(doc[:shared] + list(range(next_id, next_id + blocks - shared)))
        next_id += blocks - shared
    return trace


class _Keyed(list):
    def __init__(self, keys):
        super().__init__(range(2 * len(keys) + 1))
        self.keys = keys

    def block_keys(self, block_size):
        return self.keys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--blocks", type=int, default=25)
    args = parser.parse_args()
    trace = synthetic_trace(args.requests, args.blocks)
    sizes = [26, 50, 100, 200, 400, 800, 1_600, 3_200, 6_400, 12_800]
    print(f"{len(trace):,} requests x {args.blocks} blocks; ceiling {infinite_cache_hit_rate(trace):.4f}")
    for policy in ("vllm-v1", "uncached-first"):
        wall, cpu = time.perf_counter(), time.process_time()
        curve = prefix_hit_curve(trace, sizes, policy)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        peer = time.process_time()
        bm = BlockManager(800, 2, policy=policy)
        for i, hashes in enumerate(trace):
            bm.allocate(i, _Keyed(hashes))
            bm.free(i)
        peer = time.process_time() - peer
        assert bm.prefix_cache_hits / (len(trace) * args.blocks) == curve[800]
        print(f"{policy:15s} " + " ".join(f"{n}:{r:.4f}" for n, r in curve.items()))
        print(f"{'':15s} {len(sizes)} pool sizes: {wall:.2f} s wall, {cpu:.2f} s CPU; BlockManager at one size "
              f"{peer:.2f} s CPU; ratio per size {cpu / len(sizes) / peer:.3f}")


if __name__ == "__main__":
    main()
