"""NCCL's tuning model (ringlab.nccl.tuning) against ringlab's alpha-beta model, measured in the same run.

1. ``tune()``: the whole ``ncclTopoTuneModel`` table (5 functions x 7 algorithms x 3 protocols) for two DGX H100
   nodes, per call, against one ``cost_table`` (every all-reduce algorithm of the alpha-beta model) per call.
2. ``choose()``: one call's algorithm, protocol and channels from that table, against the same peer.
3. ``ringlab cost --nccl``'s sweep (23 sizes, 1 KiB to 4 GiB) against 23 ``cost_table`` calls.

The numbers printed are ratios (how many times the peer's time); the check is that the choice is the table's
least time at every size. Usage: python benchmarks/bench_nccl_tuning.py [--quick]
"""

from __future__ import annotations

import argparse
import time

from ringlab.collectives.cost import cost_table, get_link
from ringlab.nccl.tuning import choose, comm_for_cluster, tune
from ringlab.topology import get_cluster

SIZES = [1 << k for k in range(10, 33)]


def _per_call(fn, repeat: int) -> float:
    fn()  # warm
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args(argv).quick
    repeat = 20 if quick else 200
    comm = comm_for_cluster(get_cluster("dgx-h100", 2), "2.30").comm
    table = tune(comm, "2.30")
    link = get_link("nvlink4")
    peer = _per_call(lambda: cost_table("all_reduce", 16, 1 << 20, link), repeat)
    t_tune = _per_call(lambda: tune(comm, "2.30"), repeat)
    t_choose = _per_call(lambda: choose(table, "all_reduce", 1 << 20), repeat)
    t_sweep = _per_call(lambda: [choose(tune(comm_for_cluster(get_cluster("dgx-h100", 2), "2.30").comm, "2.30"),
                                        "all_reduce", s) for s in SIZES], max(2, repeat // 20))
    t_peer_sweep = _per_call(lambda: [cost_table("all_reduce", 16, s, link) for s in SIZES], max(2, repeat // 20))
    for s in SIZES:
        c = choose(table, "all_reduce", s)
        assert c.time_us == min(t for t in c.times.values() if t is not None)
    print(f"tune(), one communicator's table:     {t_tune / peer:6.1f}x one cost_table call")
    print(f"choose(), one call:                   {t_choose / peer:6.1f}x one cost_table call")
    print(f"the --nccl sweep of {len(SIZES)} sizes:          {t_sweep / t_peer_sweep:6.1f}x {len(SIZES)} cost_table calls")
    print("check: the choice is the least predicted time at every size: ok")


if __name__ == "__main__":
    main()
