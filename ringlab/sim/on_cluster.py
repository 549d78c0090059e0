"""Run a schedule on a cluster with data: results, bytes per rank, and bytes per link counted from what moved.

:func:`run_on_cluster` executes any :class:`~ringlab.collectives.Schedule` (flat, or a topology-aware
:class:`~ringlab.topology.ClusterSchedule`) with the numpy executor, routing every moved run of chunks
onto the cluster's links (:class:`ringlab.topology.LinkCounter`). :func:`verify_on_cluster` checks one
algorithm on one cluster: every output slot against the direct computation, bytes per rank against
the schedule's count, bytes per link against the closed form (topology-aware algorithms) and against
the count from the schedule without data, and the egress links' sum against the bytes moved.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringlab.collectives import chunk_sizes
from ringlab.collectives.registry import REDUCING
from ringlab.topology import (CLUSTER_ALGORITHMS, Cluster, LinkCounter, LinkLoads, build_on_cluster,
                              closed_form_link_bytes, link_loads)
from ringlab.topology.schedules import NO_MERGE

from .executor import Counts, compile_schedule, execute
from .ops import UFUNCS


@dataclass(frozen=True)
class ClusterRun:
    """``out``: ``(world_size, numel)`` working buffer (valid where ``schedule.outputs`` says); ``counts``:
    the executor's per-rank :class:`~ringlab.sim.executor.Counts`; ``loads``: per-link :class:`~ringlab.topology.LinkLoads`."""

    out: np.ndarray
    counts: Counts
    loads: LinkLoads


def _chunk_of_element(numel: int, num_chunks: int) -> np.ndarray:
    return np.repeat(np.arange(num_chunks), chunk_sizes(numel, num_chunks))


def run_on_cluster(schedule, cluster: Cluster, x: np.ndarray, op: str = "sum") -> ClusterRun:
    """Execute ``schedule`` on ``x`` (``(world_size, numel)``) and count bytes per link of ``cluster``.

    Schedules that start from partial data (all_gather) read each rank's input chunks from ``x`` and
    nothing else; all_to_all uses the shift layout of :mod:`ringlab.collectives.alltoall`. Raises ValueError when the shapes disagree.
    """
    x = np.ascontiguousarray(x)
    if x.ndim != 2 or x.shape[0] != schedule.world_size:
        raise ValueError(f"x must be (world_size={schedule.world_size}, numel), got shape {x.shape}")
    plan = compile_schedule(schedule, x.shape[1])
    counter = LinkCounter(schedule, cluster)
    ufunc = UFUNCS[op] if schedule.collective in REDUCING else None
    if schedule.inputs.kind == "every":
        out = np.empty_like(x)
        counts, _ = execute(plan, x, out, ufunc, router=counter)
    else:
        held = schedule.inputs.mask()[:, _chunk_of_element(x.shape[1], schedule.num_chunks)]
        out = np.where(held, x, np.zeros_like(x))
        counts, _ = execute(plan, None, out, None, router=counter)
    return ClusterRun(out, counts, counter.loads())


def expected_slots(schedule, x: np.ndarray, op: str = "sum") -> tuple[np.ndarray, np.ndarray]:
    """``(mask, expected)``: the ``(world_size, numel)`` elements the schedule's outputs cover and their values
    computed directly (the reduction over ranks in the input dtype for integers, float64 otherwise; for
    all_to_all, rank d's chunk k is rank (d - k)'s chunk k; for other copies, the holder's data)."""
    n, numel = x.shape
    chunk = _chunk_of_element(numel, schedule.num_chunks)
    mask = schedule.outputs.mask()[:, chunk]
    if schedule.collective == "all_to_all":
        return mask, x[(np.arange(n)[:, None] - chunk[None, :]) % n, np.arange(numel)[None, :]]
    if schedule.collective in REDUCING:
        acc = x if x.dtype.kind in "iu" else x.astype(np.float64)
        full = UFUNCS[op].reduce(acc, axis=0)
    else:  # every chunk's value is its holder's (inputs say who holds what)
        held = schedule.inputs.mask()[:, _chunk_of_element(numel, schedule.num_chunks)]
        owner = np.argmax(held, axis=0)
        full = x[owner, np.arange(numel)]
    return mask, np.broadcast_to(full, x.shape)


@dataclass(frozen=True)
class ClusterCheck:
    """Verdicts of :func:`verify_on_cluster` (``closed_form`` None where the algorithm has none: flat ones)."""

    algorithm: str
    nodes: int
    gpus_per_node: int
    numel: int
    results: bool
    rank_bytes: bool
    links_vs_schedule: bool
    closed_form: bool | None
    egress_equals_moved: bool
    nic_tx_equals_rx: bool

    @property
    def ok(self) -> bool:
        return (self.results and self.rank_bytes and self.links_vs_schedule and self.closed_form is not False
                and self.egress_equals_moved and self.nic_tx_equals_rx)


def egress_bytes(cluster: Cluster, per_link: np.ndarray) -> int:
    """Bytes on the links a transfer leaves its GPU by (nvlink / xgmi / pcie tx)."""
    links = cluster.links
    first_hop = (links.direction == "tx") & np.isin(links.cls, ("nvlink", "xgmi", "pcie"))
    return int(per_link[first_hop].sum())


def merged_copies(schedule, numel: int, itemsize: int) -> int:
    """Bytes of the multicast rows that are not a group's first copy (their egress rides in the switch)."""
    merge = getattr(schedule, "merge", None)
    if merge is None:
        return 0
    off = np.concatenate([[0], np.cumsum(chunk_sizes(numel, schedule.num_chunks))]) * itemsize
    total = 0
    for s, step in enumerate(schedule.steps):
        m = np.repeat(merge[s], step.span)
        e = step.expanded()
        rows = np.flatnonzero(m == 2)
        if rows.size:
            key = e.src[rows] * schedule.num_chunks + e.chunk[rows]
            _, first = np.unique(key, return_index=True)
            b = off[e.chunk[rows] + 1] - off[e.chunk[rows]]
            total += int(b.sum() - b[first].sum())
    return total


def nvswitch_reads(schedule, cluster: Cluster, numel: int, itemsize: int) -> int:
    """Bytes an NVSwitch reduction reads from each group's owner itself (one copy per (receiver, chunk) of the
    intra-node reduce-merged rows): they leave the owner's GPU without being a transfer of the schedule
    (:mod:`ringlab.topology.traffic`)."""
    merge = getattr(schedule, "merge", None)
    if merge is None or cluster.fabric != "nvswitch":
        return 0
    off = np.concatenate([[0], np.cumsum(chunk_sizes(numel, schedule.num_chunks))]) * itemsize
    g, total = cluster.gpus_per_node, 0
    for s, step in enumerate(schedule.steps):
        m = np.repeat(merge[s], step.span)
        e = step.expanded()
        rows = np.flatnonzero((m == 1) & (e.src // g == e.dst // g))
        if rows.size:
            _, first = np.unique(e.dst[rows] * schedule.num_chunks + e.chunk[rows], return_index=True)
            c = e.chunk[rows][first]
            total += int((off[c + 1] - off[c]).sum())
    return total


def verify_on_cluster(collective: str, algorithm: str, cluster: Cluster, numel: int = 1001, channels: int | None = None,
                      seed: int = 0, op: str = "sum") -> ClusterCheck:
    """Run ``algorithm`` on ``cluster`` with seeded int64 data and check everything (see the module docstring).

    int64 data makes every reduction exact, so results are compared for equality. Raises ValueError
    for names the cluster cannot run.
    """
    schedule = build_on_cluster(collective, algorithm, cluster, channels)
    x = np.random.default_rng(seed).integers(-1000, 1000, size=(cluster.world_size, numel))
    run = run_on_cluster(schedule, cluster, x, op)
    mask, expected = expected_slots(schedule, x, op)
    results = bool(np.array_equal(run.out[mask], expected[mask]))
    item = x.itemsize
    rank_bytes = bool(np.array_equal(run.counts.bytes_sent, schedule.bytes_sent(numel, item))
                      and np.array_equal(run.counts.bytes_received, schedule.bytes_received(numel, item)))
    counted = link_loads(schedule, cluster, numel, item).bytes
    closed = None
    if (collective, algorithm) in CLUSTER_ALGORITHMS:
        closed = bool(np.array_equal(run.loads.bytes, closed_form_link_bytes(collective, algorithm, cluster, numel,
                                                                             item, channels)))
    moved = int(run.counts.bytes_sent.sum())
    egress = (egress_bytes(cluster, run.loads.bytes)
              == moved - merged_copies(schedule, numel, item) + nvswitch_reads(schedule, cluster, numel, item))
    links = cluster.links
    nic_tx, nic_rx = (int(run.loads.bytes[links.of_class("nic", d)].sum()) for d in ("tx", "rx"))
    has_merge = any((m != NO_MERGE).any() for m in getattr(schedule, "merge", ()))
    # merged rows cross the network once per group, so only unmerged runs equal the ranks' cross-node bytes
    nic_ok = nic_tx == nic_rx and (has_merge or nic_tx == run.loads.inter_node_bytes)
    return ClusterCheck(algorithm, cluster.nodes, cluster.gpus_per_node, numel, results, rank_bytes,
                        bool(np.array_equal(run.loads.bytes, counted)), closed, bool(egress), bool(nic_ok))
