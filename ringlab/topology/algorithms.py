"""The topology-aware algorithms by name: builder, closed-form bytes per link, and when each applies.

``CLUSTER_ALGORITHMS[(collective, name)]`` is a :class:`ClusterAlgorithm`. :func:`cluster_schedules`
lists, for a collective on a cluster, these together with every flat algorithm of
:data:`ringlab.collectives.ALGORITHMS` (placed on the cluster in rank order), which is what
``ringlab cost --topology`` and :func:`ringlab.sim.on_cluster.verify_on_cluster` walk through.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ringlab.collectives import ALGORITHMS, algorithms_for, check_world_size, get_schedule

from . import closed_forms as cf
from . import schedules as sch
from .cluster import Cluster

# A schedule is refused above this many transfers (rows over all steps): ~ a few seconds to route.
MAX_ROWS = 1 << 25
TREE_PIECES = 4  # pipeline pieces per tree (tree_chains) and per slice (nvls): enough for the phases to overlap


def default_channels(cluster: Cluster) -> int:
    """One channel per GPU, so every GPU's NIC carries one channel's crossings; on a mesh, every (ring, exit GPU)
    pair once.

    NCCL opens 16-32 channels on 8-GPU NVSwitch nodes with 8 NICs (2-4 per NIC, ``NCCL_MIN_NCHANNELS``);
    here bandwidth depends only on which rails and links channels use, so one per GPU is enough, and
    fewer than the GPUs leave NICs idle (C channels use C rails). On a mesh the R rings of
    :func:`~ringlab.topology.schedules.mesh_rings` each own different links: one node runs R channels (every
    link once), several nodes ``R G`` (every (ring, exit GPU) pair once, :func:`~ringlab.topology.schedules.ring_orders`:
    every ring leaves by every GPU and enters by every GPU equally often, so the NICs share the crossings evenly
    both ways; ``lcm(R, G)`` would do only when R and G are coprime, as on an 8-GPU full mesh).
    """
    g = cluster.gpus_per_node
    if cluster.fabric != "mesh":
        return g
    r = len(sch.mesh_rings(g, cluster.mesh_links))
    return r if cluster.nodes == 1 else r * g


def _multi_node(cluster: Cluster) -> str | None:
    return None if cluster.nodes > 1 else "needs more than one node"


def _nvls(cluster: Cluster) -> str | None:
    return None if cluster.nvls else f"{cluster.name} has no in-switch reduction (NVLS)"


@dataclass(frozen=True)
class ClusterAlgorithm:
    """One topology-aware algorithm.

    ``build(cluster, channels)`` -> :class:`~ringlab.topology.schedules.ClusterSchedule`;
    ``link_bytes(cluster, channels, numel, itemsize)`` -> int64 per link (closed form);
    ``unavailable(cluster)`` -> None, or why the cluster cannot run it.
    """

    collective: str
    name: str
    build: Callable
    link_bytes: Callable
    unavailable: Callable[[Cluster], str | None]
    summary: str


def _ring(collective: str) -> ClusterAlgorithm:
    return ClusterAlgorithm(
        collective, "ring_channels",
        lambda c, ch: sch.ring_channels_schedule(collective, c.nodes, c.gpus_per_node, ch, c.ring_mesh),
        lambda c, ch, numel, item: cf.ring_channels_link_bytes(collective, c, ch, numel, item),
        lambda c: None, "NCCL-style rings, one per channel, each leaving the node on another rail")


CLUSTER_ALGORITHMS: dict[tuple[str, str], ClusterAlgorithm] = {(a.collective, a.name): a for a in (
    _ring("all_reduce"), _ring("reduce_scatter"), _ring("all_gather"),
    ClusterAlgorithm("all_reduce", "hierarchical",
                     lambda c, ch: sch.hierarchical_all_reduce_schedule(c.nodes, c.gpus_per_node),
                     lambda c, ch, numel, item: cf.hierarchical_link_bytes(c, numel, item),
                     lambda c: None, "reduce-scatter in node, ring all-reduce per rail, all-gather in node"),
    ClusterAlgorithm("all_reduce", "tree_chains",
                     lambda c, ch: sch.tree_chains_all_reduce_schedule(c.nodes, c.gpus_per_node, ch, TREE_PIECES),
                     lambda c, ch, numel, item: cf.tree_chains_link_bytes(c, ch, numel, item, TREE_PIECES),
                     _multi_node, "double binary tree between nodes, chains inside (NCCL TREE)"),
    ClusterAlgorithm("all_reduce", "nvls", lambda c, ch: sch.nvls_all_reduce_schedule(1, c.gpus_per_node, TREE_PIECES),
                     lambda c, ch, numel, item: cf.nvls_link_bytes(c, numel, item, TREE_PIECES),
                     lambda c: _nvls(c) or (None if c.nodes == 1 else "one NVLink domain only (see nvls_tree)"),
                     "NVLink SHARP: reduce and multicast in the NVSwitch (NCCL NVLS)"),
    ClusterAlgorithm("all_reduce", "nvls_tree",
                     lambda c, ch: sch.nvls_all_reduce_schedule(c.nodes, c.gpus_per_node, TREE_PIECES),
                     lambda c, ch, numel, item: cf.nvls_link_bytes(c, numel, item, TREE_PIECES),
                     lambda c: _nvls(c) or _multi_node(c), "NVLS in each node, trees across nodes (NCCL NVLS_TREE)"),
    ClusterAlgorithm("all_reduce", "sharp",
                     lambda c, ch: sch.hierarchical_all_reduce_schedule(c.nodes, c.gpus_per_node, in_network=True),
                     lambda c, ch, numel, item: cf.hierarchical_link_bytes(c, numel, item, in_network=True),
                     lambda c: (None if c.sharp else f"{c.name} has no in-network reduction (SHARP)") or _multi_node(c),
                     "hierarchical with the cross-node all-reduce done in the switches (SHARP / CollNet)"),
)}


def cluster_algorithms_for(collective: str) -> tuple[str, ...]:
    """Names of the topology-aware algorithms of ``collective`` (may be empty)."""
    return tuple(name for coll, name in CLUSTER_ALGORITHMS if coll == collective)


def get_cluster_algorithm(collective: str, name: str) -> ClusterAlgorithm:
    """The entry for ``(collective, name)``; ValueError listing the accepted names."""
    if (collective, name) not in CLUSTER_ALGORITHMS:
        valid = cluster_algorithms_for(collective)
        close = difflib.get_close_matches(str(name), valid, n=2)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        raise ValueError(f"topology-aware algorithm for {collective} must be one of {', '.join(valid) or '(none)'}; "
                         f"got {name!r}{hint}")
    return CLUSTER_ALGORITHMS[(collective, name)]


# Flat algorithms whose steps send several chunks per rank (halving, doubling of whole halves, direct):
# at most 2 N (N - 1) chunk transfers in all. Every other flat algorithm sends at most one chunk per rank
# per step: at most N x steps. (tests/topology/test_topology_guards.py checks both bounds up to 600 ranks.)
_QUADRATIC = {("all_reduce", "rabenseifner"), ("all_reduce", "direct"), ("reduce_scatter", "recursive_halving"),
              ("all_gather", "recursive_doubling")}


def transfers_estimate(collective: str, algorithm: str, cluster: Cluster, channels: int | None = None) -> int:
    """Chunk transfers (rows of every step, runs expanded) of ``algorithm`` on ``cluster``, from the shape alone.

    Closed forms read off the builders of :mod:`ringlab.topology.schedules` (N ranks, K nodes, G GPUs per
    node, C channels, P = :data:`TREE_PIECES`), exact for the topology-aware algorithms:
    ring_channels ``C N s`` with s = 2 (N - 1) steps for all_reduce, N - 1 otherwise; hierarchical
    ``2 (G - 1) N K + 2 (K - 1) N``; sharp ``2 (G - 1) N K + 2 K (K - 1) G``; tree_chains ``4 C (N - 1) P``;
    nvls / nvls_tree ``4 K G (G - 1) P + 4 G (K - 1) P``. For flat algorithms an upper bound: N x steps,
    or ``2 N (N - 1)`` for those that send several chunks per rank and step. Nothing is built: this is
    what guards refuse on. Raises ValueError for unknown names.
    """
    n, k, g = cluster.world_size, cluster.nodes, cluster.gpus_per_node
    ch = default_channels(cluster) if channels is None else check_world_size(channels)
    p = TREE_PIECES
    if (collective, algorithm) in CLUSTER_ALGORITHMS:
        if algorithm == "ring_channels":
            return ch * n * (2 * (n - 1) if collective == "all_reduce" else n - 1)
        if algorithm == "hierarchical":
            return 2 * (g - 1) * n * k + 2 * (k - 1) * n
        if algorithm == "sharp":
            return 2 * (g - 1) * n * k + 2 * k * (k - 1) * g
        if algorithm == "tree_chains":
            return 4 * ch * (n - 1) * p
        return 4 * k * g * (g - 1) * p + 4 * g * (k - 1) * p  # nvls, nvls_tree
    if (collective, algorithm) not in ALGORITHMS:
        valid = algorithms_for(collective) + cluster_algorithms_for(collective)
        raise ValueError(f"algorithm for {collective} must be one of {', '.join(valid)}; got {algorithm!r}")
    steps = ALGORITHMS[(collective, algorithm)].num_steps(n)
    return max(n * steps, 2 * n * (n - 1)) if (collective, algorithm) in _QUADRATIC else n * steps


def check_transfers(collective: str, algorithm: str, cluster: Cluster, channels: int | None = None,
                    limit: int = MAX_ROWS) -> int:
    """:func:`transfers_estimate`, or ValueError (with the estimate and ``limit``) when it is over ``limit``."""
    estimate = transfers_estimate(collective, algorithm, cluster, channels)
    if estimate > limit:
        raise ValueError(f"{algorithm} over {cluster.world_size:,} ranks ({cluster.nodes:,} nodes) would route about "
                         f"{estimate:,} transfers, over the limit of {limit:,}; use fewer nodes or channels")
    return estimate


def build_on_cluster(collective: str, algorithm: str, cluster: Cluster, channels: int | None = None):
    """The schedule of ``algorithm`` for ``collective`` on ``cluster``: a topology-aware one, or a flat one
    from :data:`ringlab.collectives.ALGORITHMS` over ``cluster.world_size`` ranks (root 0).

    Raises ValueError for unknown names, an algorithm the cluster cannot run, or a schedule whose
    :func:`transfers_estimate` is over :data:`MAX_ROWS` (checked before anything is built).
    """
    ch = default_channels(cluster) if channels is None else check_world_size(channels)
    if (collective, algorithm) in CLUSTER_ALGORITHMS:
        entry = CLUSTER_ALGORITHMS[(collective, algorithm)]
        why = entry.unavailable(cluster)
        if why:
            raise ValueError(f"{algorithm} on {cluster.name}: {why}")
        check_transfers(collective, algorithm, cluster, ch)
        return entry.build(cluster, ch)
    check_transfers(collective, algorithm, cluster, ch)  # before building: a flat schedule holds its rows
    return get_schedule(collective, algorithm, cluster.world_size)


def cluster_schedules(collective: str, cluster: Cluster, channels: int | None = None,
                      algorithms=None) -> list[tuple[str, object, str | None]]:
    """``(name, schedule or None, why not)`` for every flat and topology-aware algorithm of ``collective``, or
    for the named ``algorithms`` only (then a name the cluster cannot run raises ValueError)."""
    names = list(algorithms) if algorithms else list(algorithms_for(collective)) + list(cluster_algorithms_for(collective))
    out = []
    for name in names:
        entry = CLUSTER_ALGORITHMS.get((collective, name))
        why = entry.unavailable(cluster) if entry else None
        if why and algorithms:
            raise ValueError(f"{name} on {cluster.name}: {why}")
        if why:
            out.append((name, None, why))
            continue
        try:
            out.append((name, build_on_cluster(collective, name, cluster, channels), None))
        except ValueError as exc:
            if algorithms:
                raise
            out.append((name, None, str(exc)))
    return out


def closed_form_link_bytes(collective: str, algorithm: str, cluster: Cluster, numel: int, itemsize: int = 1,
                           channels: int | None = None) -> np.ndarray:
    """Closed-form bytes per link of a topology-aware algorithm (see :mod:`ringlab.topology.closed_forms`)."""
    ch = default_channels(cluster) if channels is None else check_world_size(channels)
    return get_cluster_algorithm(collective, algorithm).link_bytes(cluster, ch, numel, itemsize)
