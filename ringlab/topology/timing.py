"""Time on a cluster: each step costs its latency plus its busiest link's bytes over that link's bandwidth.

Step model (links run concurrently; a step ends when its busiest link is done)::

    t = sum over steps s of ( latency_s + max over links l of bytes_{s,l} / (bandwidth_l x efficiency) )

``latency_s`` is the longest path latency among the step's transfers (sum of the per-hop latencies of
:mod:`ringlab.topology.presets`). ``efficiency`` is the protocol's share of the wire that carries data
(:data:`PROTOCOLS`, optional; 1 by default): NCCL's LL packs 4 bytes of data with a 4-byte flag in
every 8-byte store (``src/device/prims_ll.h``), so half the link rate; LL128 keeps 120 of every 128
bytes (``NCCL_LL128_DATAELEMS`` in ``src/device/prims_ll128.h``); Simple sends data only and pays in
latency (synchronisation per chunk) instead.

The **line-rate bound** is the time no schedule moving these bytes can beat: the busiest link over the
whole run, ``max_l bytes_l / bandwidth_l`` (perfect pipelining, no latency). nccl-tests' busbw at that
time is the ceiling a healthy run approaches from below. The step model is above it by the latencies
and by steps whose links are unevenly loaded (unpipelined phases of hierarchical algorithms).

Left out: congestion and adaptive routing in the fabric (taken as non-blocking), PCIe/CPU limits,
NCCL's chunking and proxy thread, the GPU's copy and reduction speed (gamma), NVLS's own
throughput limits, and overlap with compute.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from ringlab.collectives.cost import Link, bus_factor

from .algorithms import build_on_cluster
from .cluster import Cluster
from .presets import custom_cluster
from .traffic import LinkLoads, class_bytes, link_loads

PROTOCOLS: dict[str, tuple[float, str]] = {
    "simple": (1.0, "NCCL Simple: data only (latency-bound for small messages)"),
    "ll128": (120 / 128, "NCCL LL128: 120 data bytes per 128-byte line (src/device/prims_ll128.h)"),
    "ll": (0.5, "NCCL LL: 4 data bytes + 4 flag bytes per 8-byte store (src/device/prims_ll.h)"),
}


def protocol_efficiency(protocol: str | None) -> float:
    """The data share of the wire for ``simple | ll128 | ll`` (None: 1). Raises ValueError otherwise."""
    if protocol is None:
        return 1.0
    key = str(protocol).lower()
    if key not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return PROTOCOLS[key][0]


def step_model_seconds(loads: LinkLoads, protocol: str | None = None) -> float:
    """Seconds under the step model (module docstring)."""
    return float((loads.step_latency + loads.step_seconds / protocol_efficiency(protocol)).sum())


def line_rate_seconds(cluster: Cluster, per_link: np.ndarray, protocol: str | None = None) -> tuple[float, int]:
    """``(seconds, link id)``: the busiest link's bytes over its bandwidth (and efficiency) for the whole run."""
    t = per_link / cluster.links.bandwidth
    i = int(np.argmax(t))
    return float(t[i]) / protocol_efficiency(protocol), i


@dataclass(frozen=True)
class ClusterCost:
    """Time and traffic of one algorithm on one cluster (bandwidths in bytes/s, times in seconds).

    ``busbw`` follows nccl-tests (:func:`ringlab.collectives.cost.bus_factor`). ``line_rate_busbw`` is the
    ceiling (busbw at the line-rate bound). ``bottleneck``: the busiest link over the run (label and
    class). ``bytes_per_class``: ``{class: {"tx", "rx", "max"}}``. ``inter_node_fraction``: share of the
    bytes the ranks sent whose receiver is on another node.
    """

    collective: str
    algorithm: str
    cluster: str
    nodes: int
    world_size: int
    message_bytes: int
    steps: int
    seconds: float
    algbw: float | None
    busbw: float | None
    line_rate_seconds: float
    line_rate_busbw: float | None
    bottleneck: str | None
    bottleneck_class: str | None
    bytes_per_class: dict
    inter_node_fraction: float
    bytes_moved: int
    protocol: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


LOAD_MAX = 2**53  # bytes: link loads are float64 sums of whole bytes, exact up to here (about 9 PB)


def cost_of(schedule, cluster: Cluster, message_bytes: int, protocol: str | None = None) -> ClusterCost:
    """:class:`ClusterCost` of ``schedule`` on ``cluster`` for S = ``message_bytes`` (nccl-tests' S).

    Raises ValueError when the run could move more than :data:`LOAD_MAX` bytes (2**53), beyond which
    the per-link counts would no longer be exact."""
    message_bytes = int(message_bytes)
    if message_bytes < 0:
        raise ValueError(f"message_bytes must be >= 0, got {message_bytes}")
    # Each transfer moves at most ceil(S / chunks) bytes per chunk, so this bounds the bytes of the whole
    # run and of any one link; link loads are float64 sums of whole bytes, exact up to 2**53.
    moved = int(schedule.bytes_sent(schedule.num_chunks, 1).sum()) * -(-message_bytes // schedule.num_chunks)
    if moved > LOAD_MAX:
        raise ValueError(f"message_bytes={message_bytes:,}: {schedule.algorithm} over {schedule.world_size:,} ranks "
                         f"may move up to {moved:,} B, above {LOAD_MAX:,} B (2**53), the most a link's byte "
                         "count holds exactly; use a smaller size")
    loads = link_loads(schedule, cluster, message_bytes, 1)
    seconds = step_model_seconds(loads, protocol)
    bound, link = line_rate_seconds(cluster, loads.bytes, protocol)
    factor = bus_factor(schedule.collective, schedule.world_size)
    busy = bool(loads.bytes.any())
    links = cluster.links
    return ClusterCost(
        schedule.collective, schedule.algorithm, cluster.name, cluster.nodes, cluster.world_size, message_bytes,
        schedule.num_steps, seconds, message_bytes / seconds if seconds > 0 else None,
        factor * message_bytes / seconds if seconds > 0 else None, bound,
        factor * message_bytes / bound if bound > 0 else None, links.label(link) if busy else None,
        str(links.cls[link]) if busy else None, class_bytes(cluster, loads.bytes),
        loads.inter_node_bytes / loads.bytes_moved if loads.bytes_moved else 0.0, loads.bytes_moved,
        (protocol or "simple").lower())


def linear_time(schedule, cluster: Cluster, protocol: str | None = None) -> tuple[float, float, float]:
    """The step model and the line-rate bound as lines in the message size M (bytes).

    Returns ``(a, b, b_line)``: ``t(M) = a + b M`` under the step model, ``t_line(M) = b_line M``. Exact for
    M divisible by the schedule's chunk count; counted once at such a size.
    """
    unit = schedule.num_chunks * 64
    loads = link_loads(schedule, cluster, unit, 1)
    eff = protocol_efficiency(protocol)
    bound, _ = line_rate_seconds(cluster, loads.bytes, protocol)
    return float(loads.step_latency.sum()), float(loads.step_seconds.sum()) / eff / unit, bound / unit


def group_cluster(cluster: Cluster, group_size: int) -> Cluster:
    """The part of ``cluster`` a group of ``group_size`` consecutive ranks occupies (block placement): the
    first GPUs of one node when it fits in a node, else whole nodes. Raises ValueError when the group
    is larger than the cluster or spans part of a node.

    A part of a node keeps the NICs its GPUs are wired to (:meth:`Cluster.port_of_gpu`): with fewer NICs than
    GPUs, GPU i uses NIC ``i x nics // G``, so n GPUs reach ``ceil(n x nics / G)`` of them (3 GPUs of a 4-NIC,
    8-GPU node share 2 NICs, not 3); with more, each GPU keeps its ``nics / G`` striped NICs; on a partial mesh
    the GPUs keep the links among them. The one home of
    this rule: ``ringlab.calc.training.step.resolve_cluster`` asks here."""
    g, nics = cluster.gpus_per_node, cluster.nics_per_node
    if not 1 <= group_size <= cluster.world_size:
        raise ValueError(f"group of {group_size} ranks does not fit {cluster.world_size} GPUs of {cluster.name}")
    if group_size <= g:
        wired = -(-group_size * nics // g) if nics <= g else group_size * (nics // g)
        links = cluster.mesh_links and tuple(row[:group_size] for row in cluster.mesh_links[:group_size])
        return replace(cluster, nodes=1, gpus_per_node=group_size, nics_per_node=wired, mesh_links=links)
    if group_size % g:
        raise ValueError(f"a group of {group_size} ranks spans part of a {g}-GPU node; use a multiple of {g}")
    return replace(cluster, nodes=group_size // g)


def rail_cluster(cluster: Cluster) -> Cluster:
    """One GPU per node on one rail: what each of a node's G concurrent cross-node groups (one per GPU, as
    HYBRID_SHARD's replicas) sees. Its NIC is the GPU's share of the node's NICs."""
    share_gbps = cluster.node_network_bandwidth / cluster.gpus_per_node * 8 / 1e9
    return custom_cluster(cluster.nodes, 1, cluster.gpu_bandwidth, nics_per_node=1 if cluster.nodes > 1 else 0,
                          nic_gbps=share_gbps, gpu_latency=cluster.gpu_latency, nic_latency=cluster.nic_latency,
                          pcie_bandwidth=cluster.pcie_bandwidth, name=f"{cluster.name} rail")


RING_NODES = 4
"""Above this many nodes :func:`ring_link` routes the ring over this many: its nodes are identical and the
fabric between them non-blocking, so every step from two nodes on loads the busiest link alike and the
per-step latency and bandwidth do not change with the node count (tests/topology/test_ring_link_nodes.py
compares them with the full route)."""


@lru_cache(maxsize=64)
def ring_link(cluster: Cluster, collective: str, protocol: str | None = None):
    """The NCCL-style ring (``ring_channels``) of ``collective`` over all of ``cluster``, as one
    :class:`ringlab.collectives.cost.Link` for alpha-beta formulas: ``t = steps x alpha + f (N-1)/N M / bandwidth``
    (f = 2 for all_reduce, 1 for reduce_scatter / all_gather) equals the step model for M divisible by the
    chunk count. For one rank nothing moves: ``alpha`` 0 and the GPU's own link rate. Cached per
    (cluster, collective, protocol): routing a ring over a thousand ranks takes about a second, so clusters
    above :data:`RING_NODES` nodes are routed at that size."""
    n = cluster.world_size
    if n == 1:
        return Link(f"{cluster.name} (one rank)", 0.0, cluster.gpu_bandwidth)
    if cluster.nodes > RING_NODES:  # the same steps as on RING_NODES nodes: route those (seconds saved per call)
        return ring_link(cluster.with_nodes(RING_NODES), collective, protocol)
    sched = build_on_cluster(collective, "ring_channels", cluster)
    a, b, _ = linear_time(sched, cluster, protocol)
    return Link(f"{cluster.name}: {collective} ring_channels", a / sched.num_steps,
                bus_factor(collective, n) / b, cluster.source)
