"""``ringlab cost --topology`` and explain's ceilings at cluster scale, against peers measured in the same run.

1. Every preset at 16,384 GPUs (GB200/GB300 NVL72: 228 racks, 16,416): ``cluster_costs`` of all_reduce at 1 GiB
   (every algorithm: ring rules where a schedule is too large, explicit schedules where they fit), in a child
   process each so that its peak resident memory (``ru_maxrss``) is its own. The peer: the same child doing
   nothing but import ringlab and build the cluster's link table.
2. The ring rule against the explicit schedule where both run (2 nodes of each preset, ``ring_channels``
   all_reduce): equal results (checked here too), and the time of each.
3. explain's ceiling for a 1,440-GPU all_reduce on 20 GB200 NVL72 racks (closed forms on the whole cluster).

Nothing here asserts a time (tests assert the numbers); run it by hand:
``python benchmarks/bench_topology_scale.py``. Targets from issue 29: under 5 s and 1 GB per preset.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

_CHILD = """
import json, resource, sys, time
name, nodes, work = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
from ringlab.topology import get_cluster
from ringlab.topology.scale import cluster_costs
start = time.perf_counter()
cluster = get_cluster(name, nodes)
cluster.links
costs, skipped = cluster_costs("all_reduce", cluster, 2**30) if work else ([], [])
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "world": cluster.world_size, "run": [c.algorithm for c in costs], "skipped": len(skipped)}))
"""


def _child(name: str, nodes: int, work: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", _CHILD, name, str(nodes), "1" if work else "0"], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def presets_at_scale() -> None:
    from ringlab.topology import PRESETS

    print("all_reduce 1 GiB, every algorithm, at ~16,384 GPUs (child process each; peer: link table only)")
    print(f"{'preset':16} {'GPUs':>7} {'time s':>7} {'peer s':>7} {'peak MiB':>9} {'peer MiB':>9}  run / skipped")
    for name, base in PRESETS.items():
        nodes = -(-16384 // base.gpus_per_node)
        got, peer = _child(name, nodes, True), _child(name, nodes, False)
        print(f"{name:16} {got['world']:7,} {got['seconds']:7.2f} {peer['seconds']:7.2f} {got['rss_mib']:9.0f} "
              f"{peer['rss_mib']:9.0f}  {len(got['run'])} / {got['skipped']} ({', '.join(got['run'])})")


def rule_against_schedule() -> None:
    from ringlab.topology import PRESETS, build_on_cluster, cost_of
    from ringlab.topology.scale import scale_cost

    print("\nring_channels all_reduce on 2 nodes: ring rule vs explicit schedule (build + route)")
    for name, base in PRESETS.items():
        cluster = base.with_nodes(2)
        cluster.links
        t0 = time.perf_counter()
        sched = build_on_cluster("all_reduce", "ring_channels", cluster)
        size = sched.num_chunks * 4096
        want = cost_of(sched, cluster, size)
        t1 = time.perf_counter()
        got = scale_cost("all_reduce", "ring_channels", cluster, size)
        t2 = time.perf_counter()
        same = (got.line_rate_seconds == want.line_rate_seconds and got.bytes_per_class == want.bytes_per_class
                and abs(got.seconds / want.seconds - 1) < 1e-12)
        print(f"{name:16} explicit {t1 - t0:7.3f} s  rule {t2 - t1:7.4f} s  ratio {(t1 - t0) / (t2 - t1):7.1f}x  "
              f"equal: {same}")


def explain_1440() -> None:
    from ringlab.nccl.ceiling import ceiling_busbw
    from ringlab.nccl.facts import Facts

    facts = Facts(collective="all_reduce", world_size=1440, nodes=20, gpu="NVIDIA GB200", nics=72,
                  nic_bandwidth=50e9, graphs=["Ring", "NVLS"])
    t0 = time.perf_counter()
    bw, _ = ceiling_busbw(facts)
    print(f"\nexplain's ceiling, 1,440 GB200 on 20 racks: {bw / 1e9:.1f} GB/s in {time.perf_counter() - t0:.2f} s")


if __name__ == "__main__":
    presets_at_scale()
    rule_against_schedule()
    explain_1440()
