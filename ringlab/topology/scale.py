"""Cost on a cluster of any size from ring rules, without building a schedule.

An explicit schedule routes every transfer of every step: ``C N x 2 (N - 1)`` rows for NCCL-style rings,
4.3 billion on 16,384 GPUs. The algorithms here are made of *uniform phases*: every step of a phase moves
one chunk (or one shard) along the same edges, so a phase is known from one step's edges and its step
count. That gives, exactly and in O(edges) = O(C N) work:

* bytes per link for any message size (each edge's whole-run bytes, :mod:`ringlab.topology.closed_forms`,
  routed once by :meth:`~ringlab.topology.cluster.Cluster.route`), hence the line-rate bound, the
  bottleneck and the bytes per link class;
* the step model (:mod:`ringlab.topology.timing`) as the line ``t = a + b S``: a phase of ``s`` steps costs
  ``s (latency + busiest link's bytes of one step / bandwidth)``. :func:`~ringlab.topology.timing.linear_time`
  gives the same line from the explicit schedule; both equal the step model for S divisible by the
  schedule's chunk count (for other S the explicit steps differ by at most one element per chunk).

Algorithms (:data:`SCALABLE`): ``ring_channels`` (all_reduce, reduce_scatter, all_gather), the flat
``ring`` in rank order, and ``hierarchical`` all_reduce. Every other algorithm is built and routed
explicitly where it fits (:data:`EXPLICIT_ROWS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringlab.collectives import algorithms_for
from ringlab.collectives.cost import bus_factor
from ringlab.collectives.ring import ring_all_gather_bytes, ring_all_reduce_bytes, ring_reduce_scatter_bytes

from . import closed_forms as cf
from .algorithms import (CLUSTER_ALGORITHMS, build_on_cluster, cluster_algorithms_for, default_channels,
                         transfers_estimate)
from .cluster import Cluster
from .schedules import ring_orders
from .timing import ClusterCost, cost_of, line_rate_seconds, protocol_efficiency
from .traffic import class_bytes

SCALABLE = {("all_reduce", "ring_channels"), ("reduce_scatter", "ring_channels"), ("all_gather", "ring_channels"),
            ("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring"),
            ("all_reduce", "hierarchical")}
# Explicit schedules of more rows than this are not routed by `ringlab cost --topology` when a ring rule
# gives the same numbers (about two seconds of routing on one core).
EXPLICIT_ROWS = 1 << 20
_UNIT = 64  # bytes per chunk of the unit message the step model is counted at (as linear_time does)


@dataclass(frozen=True)
class Phase:
    """``steps`` identical steps; one step moves ``nbytes`` (per chunk of ``_UNIT`` bytes) from ``src`` to ``dst``."""

    steps: int
    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray


@dataclass(frozen=True)
class RingRule:
    """An algorithm as uniform phases: ``chunks`` (the schedule's chunk count), ``phases``, and ``edges(numel,
    itemsize)`` -> ``[(src, dst, bytes of the whole run)]`` exact for any size."""

    chunks: int
    phases: tuple[Phase, ...]
    edges: object


def _ring_edges(orders: np.ndarray):
    return orders, np.roll(orders, -1, axis=1)


def ring_rule(collective: str, algorithm: str, cluster: Cluster, channels: int | None = None) -> RingRule:
    """The :class:`RingRule` of ``(collective, algorithm)`` on ``cluster``. Raises ValueError for an algorithm
    not in :data:`SCALABLE`."""
    if (collective, algorithm) not in SCALABLE:
        raise ValueError(f"no ring rule for {collective} {algorithm}; ring rules: "
                         + ", ".join(f"{c} {a}" for c, a in sorted(SCALABLE)))
    k, g = cluster.nodes, cluster.gpus_per_node
    n = k * g
    passes = 2 if collective == "all_reduce" else 1
    if algorithm == "ring_channels":
        ch = default_channels(cluster) if channels is None else int(channels)
        src, dst = _ring_edges(ring_orders(k, g, ch, cluster.ring_mesh))
        unit = np.full(src.shape, _UNIT, dtype=np.int64)

        def edges(numel, itemsize):
            size = cf._sizes(numel, n * ch, itemsize).reshape(n, ch)
            total, c = size.sum(axis=0)[:, None], np.arange(ch)[:, None]
            own, nxt = size[src, c], size[dst, c]
            sent = {"all_reduce": 2 * total - own - nxt, "reduce_scatter": total - own, "all_gather": total - nxt}
            return [(src, dst, sent[collective])]
        return RingRule(n * ch, (Phase(passes * (n - 1), src, dst, unit),) if n > 1 else (), edges)
    if algorithm == "ring":
        src = np.arange(n)
        dst = np.roll(src, -1)
        per_rank = {"all_reduce": ring_all_reduce_bytes, "reduce_scatter": ring_reduce_scatter_bytes,
                    "all_gather": ring_all_gather_bytes}[collective]
        return RingRule(n, (Phase(passes * (n - 1), src, dst, np.full(n, _UNIT, dtype=np.int64)),) if n > 1 else (),
                        lambda numel, itemsize: [(src, dst, per_rank(n, numel, itemsize))])
    # hierarchical all_reduce: reduce-scatter in node (G - 1 steps of a K-chunk shard), ring all-reduce per rail
    # (2 (K - 1) steps of one chunk), all-gather in node
    node, gpu = np.meshgrid(np.arange(k), np.arange(g), indexing="ij")
    intra = (node * g + gpu, node * g + (gpu + 1) % g)
    rail = (node * g + gpu, ((node + 1) % k) * g + gpu)
    phases = []
    if g > 1:
        phases.append(Phase(g - 1, *intra, np.full(n, k * _UNIT, dtype=np.int64)))
    if k > 1:
        phases.append(Phase(2 * (k - 1), *rail, np.full(n, _UNIT, dtype=np.int64)))
    if g > 1:
        phases.append(phases[0])

    def edges(numel, itemsize):
        piece = cf._sizes(numel, n, itemsize).reshape(g, k)
        shard, m = piece.sum(axis=1), int(piece.sum())
        out = []
        if g > 1:
            out.append((*intra, (m - shard[gpu]) + (m - shard[(gpu + 1) % g])))
        if k > 1:
            out.append((*rail, 2 * shard[gpu] - piece[gpu, (node + 1) % k] - piece[gpu, (node + 2) % k]))
        return out
    return RingRule(n, tuple(phases), edges)


class _Routes:
    """Routes of edge arrays, each routed once: a rule's phases and its whole-run edges share their arrays."""

    def __init__(self, cluster: Cluster):
        self.cluster, self.seen = cluster, {}

    def __call__(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        key = (id(src), id(dst))
        if key not in self.seen:
            self.seen[key] = (src, dst, self.cluster.route(np.ravel(src), np.ravel(dst))[0])  # keeps the ids alive
        return self.seen[key][2]


def rule_link_bytes(rule: RingRule, cluster: Cluster, numel: int, itemsize: int = 1,
                    routes: _Routes | None = None) -> tuple[np.ndarray, int, int]:
    """``(bytes per link, bytes moved, bytes moved between nodes)`` of a run of ``numel`` elements: exact."""
    routes = routes or _Routes(cluster)
    out = np.zeros(cluster.link_count, dtype=np.int64)
    moved = inter = 0
    g = cluster.gpus_per_node
    for src, dst, nbytes in (rule.edges(numel, itemsize) if rule.phases else ()):  # one rank: nothing moves
        nbytes = np.asarray(nbytes, dtype=np.int64).ravel()
        cf.charge(out, routes(src, dst), nbytes)
        moved += int(nbytes.sum())
        inter += int(nbytes[np.ravel(src) // g != np.ravel(dst) // g].sum())
    return out, moved, inter


def rule_linear_time(rule: RingRule, cluster: Cluster, protocol: str | None = None,
                     routes: _Routes | None = None) -> tuple[float, float]:
    """``(a, b)``: the step model ``t(S) = a + b S`` (seconds, bytes), as
    :func:`~ringlab.topology.timing.linear_time` gives it from the explicit schedule."""
    routes = routes or _Routes(cluster)
    unit_message = rule.chunks * _UNIT
    eff = protocol_efficiency(protocol)
    a = b = 0.0
    g = cluster.gpus_per_node
    for phase in rule.phases:
        load = np.zeros(cluster.link_count, dtype=np.int64)
        cf.charge(load, routes(phase.src, phase.dst), phase.nbytes)
        crosses = bool((phase.src.ravel() // g != phase.dst.ravel() // g).any())
        a += phase.steps * (cluster.nic_latency if crosses else cluster.gpu_latency)
        b += phase.steps * float((load / cluster.links.bandwidth).max()) / eff / unit_message
    return a, b


def scale_cost(collective: str, algorithm: str, cluster: Cluster, message_bytes: int, protocol: str | None = None,
               channels: int | None = None) -> ClusterCost:
    """:class:`~ringlab.topology.timing.ClusterCost` from the ring rule: what ``cost_of`` gives for the explicit
    schedule (the step model exactly when S is divisible by the chunk count; the rest exactly)."""
    message_bytes = int(message_bytes)
    if message_bytes < 0:
        raise ValueError(f"message_bytes must be >= 0, got {message_bytes}")
    rule = ring_rule(collective, algorithm, cluster, channels)
    routes = _Routes(cluster)
    per_link, moved, inter = rule_link_bytes(rule, cluster, message_bytes, 1, routes)
    a, b = rule_linear_time(rule, cluster, protocol, routes)
    seconds = a + b * message_bytes if rule.phases else 0.0
    bound, link = line_rate_seconds(cluster, per_link, protocol)
    factor = bus_factor(collective, cluster.world_size)
    busy = bool(per_link.any())
    links = cluster.links
    return ClusterCost(
        collective, algorithm, cluster.name, cluster.nodes, cluster.world_size, message_bytes,
        sum(p.steps for p in rule.phases), seconds, message_bytes / seconds if seconds > 0 else None,
        factor * message_bytes / seconds if seconds > 0 else None, bound,
        factor * message_bytes / bound if bound > 0 else None, links.label(link) if busy else None,
        str(links.cls[link]) if busy else None, class_bytes(cluster, per_link), inter / moved if moved else 0.0,
        moved, (protocol or "simple").lower())


def cluster_costs(collective: str, cluster: Cluster, message_bytes: int, protocol: str | None = None,
                  channels: int | None = None, algorithms=None) -> tuple[list[ClusterCost], list[tuple[str, str]]]:
    """``(costs, skipped)`` for every flat and topology-aware algorithm of ``collective`` on ``cluster`` (or the named
    ``algorithms``, which then raise ValueError when they cannot run): from the ring rule where one exists and the
    explicit schedule would exceed :data:`EXPLICIT_ROWS` rows, else from the explicit schedule, which is not
    built above :data:`EXPLICIT_ROWS` (``skipped`` says so, with the estimate)."""
    names = list(algorithms) if algorithms else list(algorithms_for(collective)) + list(cluster_algorithms_for(collective))
    costs, skipped = [], []
    for name in names:
        try:
            entry = CLUSTER_ALGORITHMS.get((collective, name))
            why = entry.unavailable(cluster) if entry else None
            if why:
                raise ValueError(f"{name} on {cluster.name}: {why}")
            rows = transfers_estimate(collective, name, cluster, channels)
            if rows > EXPLICIT_ROWS and (collective, name) in SCALABLE:
                costs.append(scale_cost(collective, name, cluster, message_bytes, protocol, channels))
                continue
            if rows > EXPLICIT_ROWS:
                raise ValueError(f"{name} over {cluster.world_size:,} ranks would route about {rows:,} transfers, over "
                                 f"the {EXPLICIT_ROWS:,} routed explicitly, and has no ring rule")
            costs.append(cost_of(build_on_cluster(collective, name, cluster, channels), cluster, message_bytes,
                                 protocol))
        except ValueError as exc:
            if algorithms:
                raise
            skipped.append((name, str(exc).removeprefix(f"{name} on {cluster.name}: ")))
    return costs, skipped
