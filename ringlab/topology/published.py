"""Published nccl-tests results, each with its source, and the model's line-rate ceiling for each.

Every entry is a busbw someone measured (or an NVIDIA engineer stated as what a healthy system
reaches), the cluster it ran on, and the algorithm NCCL ran when the source says so (``None``: not
stated; the ring is assumed, as NCCL's maintainers benchmark a fabric with ``NCCL_ALGO=RING``,
unless the number is above the ring's line rate, which only the tree or NVLS can do).
:func:`compare` returns the ceiling and the ratio measured / ceiling for each. The ratios say how far
below the line rate real runs sit (protocol framing, NVLS's reduction throughput, ...); a ratio above
1 would mean the model is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ringlab.collectives.cost import bus_factor

from .algorithms import build_on_cluster, cluster_algorithms_for
from .cluster import Cluster
from .presets import custom_cluster, get_cluster
from .timing import linear_time


# HGX H100 hosts below use the dgx-h100 preset: the same NVLink 4 switch and 8 x 400 Gb/s rails.


def _a100(nodes: int, nics: int, gbps: float) -> Cluster:
    # A100 SXM: NVLink 3, 600 GB/s both ways = 300 GB/s per GPU per direction (A100 datasheet), NVSwitch
    return custom_cluster(nodes, 8, 300e9, nics_per_node=nics, nic_gbps=gbps, name=f"a100-{nics}x{gbps:g}G")


@dataclass(frozen=True)
class PublishedRun:
    """``measured`` busbw in GB/s (as nccl-tests prints it); ``algorithm`` a ringlab name or None."""

    source: str
    what: str
    cluster: Callable[[], Cluster]
    collective: str
    algorithm: str | None
    measured: float


PUBLISHED: tuple[PublishedRun, ...] = (
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/212", "8x H100, NCCL_ALGO=RING: 'effective NVLink "
                 "bandwidth of 370GB/s' (S. Jeaugey)", lambda: get_cluster("dgx-h100", 1), "all_reduce",
                 "ring_channels", 370.0),
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/212", "8x H100, NVLS all_reduce: 'peak busBw of "
                 "~480GB/s' (S. Jeaugey)", lambda: get_cluster("dgx-h100", 1), "all_reduce", "nvls", 480.0),
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/290", "single H100 node, NVLS: '476GB/s looks to be in "
                 "the expected range' (A. Laddy)", lambda: get_cluster("dgx-h100", 1), "all_reduce", "nvls", 476.0),
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/319", "2 HGX H100 nodes, 8x CX7 400 Gb/s: 'up to "
                 "~396GB/s with the RING protocol' (A. Laddy)", lambda: get_cluster("dgx-h100", 2), "all_reduce",
                 "ring_channels", 396.0),
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/309", "2 HGX hosts, 16 GPU-NIC pairs (400 Gb/s, "
                 "default NVLSTree): 470 GB/s", lambda: get_cluster("dgx-h100", 2), "all_reduce", "nvls_tree", 470.0),
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/309", "4 HGX hosts, 32 GPU-NIC pairs: 365.84 GB/s",
                 lambda: get_cluster("dgx-h100", 4), "all_reduce", None, 365.84),
    PublishedRun("https://github.com/NVIDIA/nccl/issues/812", "DGX A100, 8x 200 Gb/s IB: 'we measure 192GB/s "
                 "AllReduce BusBW' (A. Laddy)", lambda: _a100(2, 8, 200), "all_reduce", None, 192.0),
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/119", "4x 200 Gb/s per node: 96.45 GB/s, '24GB/s is "
                 "the peak performance per 200G NIC' (S. Jeaugey)", lambda: _a100(2, 4, 200), "all_reduce", None, 96.45),
    PublishedRun("https://github.com/NVIDIA/nccl-tests/issues/100", "2 HGX A100, 4x CX6 200 Gb/s: 91 GB/s",
                 lambda: _a100(2, 4, 200), "all_reduce", None, 91.0),
)


def ceilings(cluster: Cluster, collective: str) -> dict[str, float]:
    """Line-rate busbw (GB/s) of every topology-aware algorithm of ``collective`` that ``cluster`` can run."""
    out = {}
    for name in cluster_algorithms_for(collective):
        if name in ("hierarchical", "sharp"):
            continue  # not among NCCL's algorithms on these systems (SHARP needs CollNet)
        try:
            sched = build_on_cluster(collective, name, cluster)
        except ValueError:
            continue
        out[name] = bus_factor(collective, cluster.world_size) / linear_time(sched, cluster)[2] / 1e9
    return out


def ceiling_for(run: PublishedRun) -> tuple[str, float]:
    """``(algorithm, ceiling GB/s)`` for one run: the stated algorithm's line rate, else the ring's unless
    the measurement is above it (then the tightest other ceiling that covers it)."""
    by_name = ceilings(run.cluster(), run.collective)
    if run.algorithm is not None:
        return run.algorithm, by_name[run.algorithm]
    if run.measured <= by_name["ring_channels"]:
        return "ring_channels", by_name["ring_channels"]
    above = {n: v for n, v in by_name.items() if v >= run.measured}
    name = min(above, key=above.get) if above else max(by_name, key=by_name.get)
    return name, by_name[name]


def compare(runs=PUBLISHED) -> list[dict]:
    """One row per run: source, what, algorithm, measured and ceiling (GB/s), ratio measured / ceiling."""
    rows = []
    for run in runs:
        name, ceiling = ceiling_for(run)
        rows.append({"source": run.source, "what": run.what, "algorithm": name, "measured_GBps": run.measured,
                     "ceiling_GBps": ceiling, "ratio": run.measured / ceiling})
    return rows
