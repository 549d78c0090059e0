"""Bytes per link: every transfer of a schedule routed onto the cluster's links, counted per link and direction.

Convention: a transfer is charged, in full, to **every** link on its route (an inter-node transfer
counts on the sender's PCIe uplink, its NIC's tx, the receiver NIC's rx and the receiver's PCIe
downlink). So, per class: the GPU egress links (``nvlink``/``xgmi``/``pcie`` tx, the first hop)
together carry exactly the bytes the ranks sent; ``nic`` tx carries exactly the bytes that left
their node, and ``nic`` rx the same bytes arriving. The one exception is a switch that merges
(:mod:`ringlab.topology.schedules`): for rows marked ``REDUCE_AT_SWITCH`` the hops after the switch
carry one copy per (receiver, chunk) of the step; for ``MULTICAST_AT_SWITCH`` the hops before it
carry one copy per (sender, chunk). An NVSwitch merge (NVLS) also moves the owner's own copy: the
switch's reduction reads it from the owner (``multimem.ld_reduce`` reads every GPU of the group,
its issuer included) and its multicast writes back to the sender too (``multimem.st``), so the
owner's NVLink port carries one more copy up and the sender's one more down. Per GPU that is
``M (1 + 1/G)`` each way, as NCCL's maintainers count it (NVIDIA/nccl#828, #1506), not ``M``.

:func:`link_loads` counts from a schedule without data (vectorised per step); :class:`LinkCounter`
is the router the simulator calls with what it actually moved (``ringlab.sim.on_cluster``). Both use
:func:`route_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ringlab.collectives import Schedule, check_itemsize, chunk_sizes

from .cluster import Cluster
from .schedules import MULTICAST_AT_SWITCH, NO_MERGE, REDUCE_AT_SWITCH


def route_bytes(cluster: Cluster, src, dst, nbytes, chunk=None, merge=None) -> tuple[np.ndarray, np.ndarray]:
    """Bytes on every link for one step's transfers, and each transfer's path latency.

    ``src``, ``dst``, ``nbytes`` (and ``chunk``, ``merge`` when a switch merges): int arrays ``(k,)``.
    Returns ``(per_link, latency)``: int64 ``(len(cluster.links),)`` and float64 ``(k,)`` seconds
    (``gpu_latency`` inside a node, ``nic_latency`` between nodes).
    """
    ids, weight, latency = route_sparse(cluster, src, dst, nbytes, chunk, merge)
    per_link = np.zeros(cluster.link_count, dtype=np.int64)
    per_link[ids] = weight
    return per_link, latency


def route_sparse(cluster: Cluster, src, dst, nbytes, chunk=None, merge=None) -> tuple[np.ndarray, np.ndarray,
                                                                                      np.ndarray]:
    """:func:`route_bytes` for the links the transfers touch only: ``(link ids, bytes, latency)``, ids sorted and
    distinct, so the work is O(k log k) whatever the number of links (a 1,024-GPU mesh has a million)."""
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    nbytes = np.asarray(nbytes, dtype=np.int64)
    hops, switch_at = cluster.route(src, dst)
    weight = np.broadcast_to(nbytes[:, None], hops.shape).copy()
    own_ids, own_bytes = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if merge is not None and (np.asarray(merge) != NO_MERGE).any():
        merge, chunk = np.asarray(merge), np.asarray(chunk, dtype=np.int64)
        position = np.arange(hops.shape[1])[None, :]
        own = []
        for kind, side, after in ((REDUCE_AT_SWITCH, dst, True), (MULTICAST_AT_SWITCH, src, False)):
            rows = np.flatnonzero((merge == kind) & (switch_at >= 0))
            if not rows.size:
                continue
            key = (side[rows] * (int(chunk.max()) + 1) + chunk[rows]) * 2 + (switch_at[rows] == 2)
            _, first = np.unique(key, return_index=True)
            repeat = np.ones(rows.size, dtype=bool)
            repeat[first] = False  # every copy after the first of its group rides along in the switch
            sel = rows[repeat]
            past = position >= switch_at[sel, None] if after else position < switch_at[sel, None]
            weight[sel] = np.where(past, 0, weight[sel])
            head = rows[first][switch_at[rows[first]] == 1]  # groups merged in the NVSwitch (NVLS)
            if head.size:  # multimem reads the owner's own copy too, and multicasts back to the sender too
                g = cluster.gpus_per_node
                cls_dir = "tx" if kind == REDUCE_AT_SWITCH else "rx"
                own.append((cluster.link_id("nvlink", cls_dir, side[head] // g, side[head] % g), nbytes[head]))
        if own:
            own_ids = np.concatenate([i for i, _ in own])
            own_bytes = np.concatenate([b for _, b in own])
    valid = hops >= 0
    ids, where = np.unique(np.concatenate([hops[valid], own_ids]), return_inverse=True)
    per_link = np.bincount(where.ravel(), np.concatenate([weight[valid], own_bytes]).astype(np.float64),
                           minlength=len(ids))
    g = cluster.gpus_per_node
    latency = np.where(src // g == dst // g, cluster.gpu_latency, cluster.nic_latency)
    return ids, np.rint(per_link).astype(np.int64), latency


def _merge_rows(schedule: Schedule, s: int, step) -> np.ndarray | None:
    merge = getattr(schedule, "merge", None)
    if merge is None:
        return None
    return np.repeat(merge[s], step.span)


@dataclass(frozen=True)
class LinkLoads:
    """Bytes per link of a whole run and, per step, what the step model needs.

    ``bytes``: int64 ``(links,)``. ``step_seconds``: float64 ``(steps,)`` the busiest link's bytes over its
    bandwidth; ``step_bottleneck``: int64 ``(steps,)`` that link's id (-1 for an empty step);
    ``step_latency``: float64 ``(steps,)`` the longest path latency of the step. ``bytes_moved``: bytes the
    ranks sent (sum of transfers), ``inter_node_bytes``: those whose sender and receiver are on different nodes.
    """

    bytes: np.ndarray
    step_seconds: np.ndarray
    step_bottleneck: np.ndarray
    step_latency: np.ndarray
    bytes_moved: int
    inter_node_bytes: int


class _Accumulator:
    """Sums a run's bytes per link and, per step, the busiest link. A step's loads are kept sparse (the links
    it touches), so the work per step follows its transfers, not the cluster's link count."""

    _SLICE = 1 << 20  # transfers routed at once: bounds the route tables of a huge step

    def __init__(self, cluster: Cluster, num_steps: int):
        self.cluster = cluster
        self.total = np.zeros(cluster.link_count, dtype=np.int64)
        self.seconds, self.latency = np.zeros(num_steps), np.zeros(num_steps)
        self.bottleneck = np.full(num_steps, -1, dtype=np.int64)
        self.moved = self.inter = 0
        self._step, self._parts = None, []

    def add(self, s: int, src, dst, nbytes, chunk=None, merge=None) -> None:
        if s != self._step:
            self.flush()
            self._step = s
        src, dst, nbytes = (np.asarray(a, dtype=np.int64) for a in (src, dst, nbytes))
        if not src.size:
            return
        merging = merge is not None and (np.asarray(merge) != NO_MERGE).any()
        step = len(src) if merging else self._SLICE  # a switch merge groups rows across the whole step
        for a in range(0, len(src), step):
            part = slice(a, a + step)
            ids, load, lat = route_sparse(self.cluster, src[part], dst[part], nbytes[part],
                                          None if chunk is None else np.asarray(chunk)[part],
                                          None if merge is None else np.asarray(merge)[part])
            self._parts.append((ids, load))
            self.latency[s] = max(self.latency[s], float(lat.max(initial=0.0)))
        g = self.cluster.gpus_per_node
        self.moved += int(nbytes.sum())
        self.inter += int(nbytes[src // g != dst // g].sum())

    def flush(self) -> None:
        if self._step is None:
            return
        if self._parts:
            ids = np.concatenate([p[0] for p in self._parts])
            load = np.concatenate([p[1] for p in self._parts])
            if len(self._parts) > 1:
                ids, where = np.unique(ids, return_inverse=True)
                load = np.bincount(where.ravel(), load.astype(np.float64), minlength=len(ids)).round().astype(np.int64)
            if load.any():
                t = load / self.cluster.links.bandwidth[ids]
                busiest = int(np.argmax(t))
                self.bottleneck[self._step] = int(ids[busiest])
                self.seconds[self._step] = float(t[busiest])
            self.total[ids] += load
        self._parts = []
        self._step = None

    def loads(self) -> LinkLoads:
        self.flush()
        return LinkLoads(self.total, self.seconds, self.bottleneck, self.latency, self.moved, self.inter)


def link_loads(schedule: Schedule, cluster: Cluster, numel: int, itemsize: int = 1) -> LinkLoads:
    """Route every transfer of ``schedule`` on ``cluster`` for a message of ``numel`` elements, without data.

    Raises ValueError when the schedule's world size differs from the cluster's.
    """
    check_placement(schedule, cluster)
    sizes = chunk_sizes(numel, schedule.num_chunks) * check_itemsize(itemsize)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    acc = _Accumulator(cluster, schedule.num_steps)
    for s, step in enumerate(schedule.steps):
        e = step.expanded()
        acc.add(s, e.src, e.dst, offsets[e.chunk + 1] - offsets[e.chunk], e.chunk, _merge_rows(schedule, s, step))
    return acc.loads()


def check_placement(schedule: Schedule, cluster: Cluster) -> None:
    """ValueError unless the schedule has the cluster's world size (and shape, for a ClusterSchedule)."""
    if schedule.world_size != cluster.world_size:
        raise ValueError(f"schedule has {schedule.world_size} ranks but the cluster {cluster.nodes} x "
                         f"{cluster.gpus_per_node} = {cluster.world_size} GPUs")
    g = getattr(schedule, "gpus_per_node", None)
    if g is not None and g != cluster.gpus_per_node:
        raise ValueError(f"schedule was built for {g} GPUs per node, the cluster has {cluster.gpus_per_node}")


class LinkCounter:
    """Router for the simulator: called as ``counter(step, src, dst, nbytes)`` with the rows an executor moved.

    Rows arrive in the step's expanded order (as :meth:`~ringlab.collectives.Step.expanded` lists them),
    which is how chunk ids and switch merges are matched to them. ``loads()`` returns :class:`LinkLoads`.
    """

    def __init__(self, schedule: Schedule, cluster: Cluster):
        check_placement(schedule, cluster)
        self.schedule = schedule
        self._acc = _Accumulator(cluster, schedule.num_steps)
        self._merge = getattr(schedule, "merge", None)

    def __call__(self, s: int, src, dst, nbytes) -> None:
        chunk = merge = None
        if self._merge is not None and (self._merge[s] != NO_MERGE).any():
            step = self.schedule.steps[s]
            chunk, merge = step.expanded().chunk, _merge_rows(self.schedule, s, step)
            if len(chunk) != len(np.asarray(src)):
                raise ValueError(f"step {s}: the executor reported {len(src)} rows, the schedule has {len(chunk)}")
        self._acc.add(s, src, dst, nbytes, chunk, merge)

    def loads(self) -> LinkLoads:
        return self._acc.loads()


def class_bytes(cluster: Cluster, per_link: np.ndarray) -> dict[str, dict[str, int]]:
    """``{class: {"tx": total, "rx": total, "max": busiest link}}`` for the classes the cluster has."""
    links = cluster.links
    out = {}
    for cls in dict.fromkeys(links.cls.tolist()):
        row = {}
        for d in ("tx", "rx"):
            ids = links.of_class(cls, d)
            if ids.size:
                row[d] = int(per_link[ids].sum())
        row["max"] = int(per_link[links.of_class(cls)].max(initial=0))
        out[cls] = row
    return out
