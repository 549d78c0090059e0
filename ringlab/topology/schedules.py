"""Topology-aware collectives as schedules: NCCL-style channels, hierarchy, trees with chains, NVLS, SHARP.

Every builder (named ``<algorithm>_schedule``, as in :mod:`ringlab.collectives`) takes the cluster's
shape (``nodes`` K, ``gpus_per_node`` G; ranks in block placement, rank = node * G + gpu) and returns a
:class:`ClusterSchedule`: an ordinary :class:`~ringlab.collectives.Schedule` of explicit steps (numpy
arrays, no Python loop per transfer) that every executor runs, plus ``merge``: per step, one int8 per
row saying whether a switch on the path combines it (``REDUCE_AT_SWITCH``: the copies bound for one
(rank, chunk) meet in the switch and one reduced copy goes on from there; ``MULTICAST_AT_SWITCH``: one
copy reaches the switch and is replicated to every receiver). Ranks still exchange exactly what the
steps say, so results and per-rank bytes are checked as for any schedule; only the links past (or
before) the switch carry less.

Algorithms (sources: NCCL ``src/graph/rings.cc``, ``trees.cc``, ``connect.cc``; NCCL 2.12 release notes for
PXN and 2.17 for NVLS; Jeaugey, "Massively scale your deep learning training with NCCL 2.4", NVIDIA
blog 2019, for the double binary tree with chains inside nodes; Graham et al., "Scalable Hierarchical
Aggregation Protocol (SHArP)", COMHPC 2016, for in-network reduction):

``ring_channels``  C rings at once (NCCL's channels), the message cut into C parts. Channel c visits
                   every node in turn; inside a node it starts at GPU ``e_c + d_c`` and ends at GPU
                   ``e_c = c % G``: on a switch the GPUs in order after it, on a mesh the next GPUs of
                   ring ``(c + c // lcm(R, G)) % R`` of :func:`mesh_rings` (R directed Hamiltonian cycles that
                   use every link once: all links of every GPU), so each channel leaves every node
                   through a different GPU's NIC: C = G channels spread the node's crossings over all rails.
``hierarchical``   ring reduce-scatter inside each node (GPU g ends with shard g), ring all-reduce of
                   shard g across nodes on rail g, ring all-gather inside each node.
``tree_chains``    2C trees (NCCL's double binary tree over nodes, both shapes, per channel); inside a
                   node a chain from the tree's head GPU ``(c + t) % G`` through the others; pipelined.
``nvls``           (one NVLink domain) NVLink SHARP: each GPU sends slice q of every piece to GPU q and
                   the switch reduces them on the way; GPU q multicasts the reduced slice back. Per GPU
                   M (1 + 1/N) each way (the switch reads and writes back each GPU's own slice too,
                   :mod:`ringlab.topology.traffic`) instead of the ring's 2(N-1)/N M. Pipelined in pieces.
``nvls_tree``      NVLS reduce-scatter in each node, double binary tree across nodes on every rail for
                   each slice (NCCL's NVLS_TREE), NVLS multicast all-gather; pipelined in pieces.
``sharp``          hierarchical, with the cross-node all-reduce of each shard done in the network
                   switches (in-network reduction): every GPU sends its shard up once and receives the
                   result once.
"""

from __future__ import annotations

from functools import lru_cache
from math import gcd

import numpy as np

from ringlab.collectives import Holdings, Schedule, Step, check_world_size
from ringlab.collectives.tree import double_binary_tree_parents, tree_all_reduce_steps, tree_shape

NO_MERGE, REDUCE_AT_SWITCH, MULTICAST_AT_SWITCH = 0, 1, 2


class ClusterSchedule(Schedule):
    """A :class:`~ringlab.collectives.Schedule` built for a cluster shape, with per-row switch merges.

    Extra attributes: ``nodes``, ``gpus_per_node``, ``channels`` (or pipeline pieces), and ``merge``: a
    tuple with one int8 array per step, aligned with that step's rows (``NO_MERGE``,
    ``REDUCE_AT_SWITCH`` or ``MULTICAST_AT_SWITCH``).
    """

    def __init__(self, collective, algorithm, nodes, gpus_per_node, num_chunks, steps, merge, inputs, outputs,
                 description="", channels=1):
        super().__init__(collective, algorithm, nodes * gpus_per_node, num_chunks, steps, inputs, outputs,
                         description)
        self.nodes, self.gpus_per_node, self.channels = nodes, gpus_per_node, channels
        self.merge = tuple(np.asarray(m, dtype=np.int8) for m in merge)
        if len(self.merge) != self.num_steps or any(len(m) != st.src.size for m, st in zip(self.merge, self.steps)):
            raise ValueError("merge needs one int8 per row of every step")

    def __repr__(self) -> str:
        return (f"ClusterSchedule({self.collective}/{self.algorithm}, nodes={self.nodes}, "
                f"gpus_per_node={self.gpus_per_node}, channels={self.channels}, steps={self.num_steps})")


def _check_shape(nodes, gpus_per_node, channels=1) -> tuple[int, int, int]:
    k, g = check_world_size(nodes), check_world_size(gpus_per_node)
    if isinstance(channels, bool) or not isinstance(channels, (int, np.integer)) or channels < 1:
        raise ValueError(f"channels must be an int >= 1, got {channels!r}")
    return k, g, int(channels)


def _steps(rows_per_step) -> tuple[list[Step], list[np.ndarray]]:
    """(src, dst, chunk, reduce, merge[, span]) tuples -> Steps and merge arrays."""
    steps, merges = [], []
    for row in rows_per_step:
        src, dst, chunk, reduce, merge = (np.asarray(a) for a in row[:5])
        span = row[5] if len(row) > 5 else None
        steps.append(Step(src.ravel(), dst.ravel(), chunk.ravel(), np.broadcast_to(reduce, src.shape).ravel(),
                          None if span is None else np.broadcast_to(span, src.shape).ravel()))
        merges.append(np.broadcast_to(np.asarray(merge, dtype=np.int8), src.shape).ravel())
    return steps, merges


# --- NCCL-style rings over channels ----------------------------------------------------------

def _walecki(g: int) -> list[list[int]]:
    """Odd G: Walecki's (G - 1) / 2 undirected Hamiltonian cycles of K_G, each taken both ways: G - 1 directed
    cycles using every arc once (Lucas, "Recreations mathematiques" II, 1892; Alspach, "The wonderful Walecki
    construction", Bull. ICA 52, 2008). Vertex G - 1 is the hub, 0 .. G - 2 sit on a circle."""
    m = (g - 1) // 2
    out = []
    for i in range(m):
        zigzag = [i] + [(i + (s + 1) // 2 * (1 if s % 2 else -1)) % (2 * m) for s in range(1, 2 * m)]
        cycle = [g - 1] + zigzag
        out += [cycle, [cycle[0]] + cycle[:0:-1]]
    return out


def _search(g: int, budget: int = 200_000, links: np.ndarray | None = None,
            wanted: int | None = None) -> list[list[int]] | None:
    """Directed Hamiltonian cycles that use every arc once, found depth first. Without ``links``, the G - 1 of the
    complete digraph (even G: they exist for every even G but 4 and 6: Tillson, "A Hamiltonian decomposition of
    K*_2m, 2m >= 8", J. Comb. Theory B 29, 1980). With ``links`` (G x G link counts, symmetric), a link a - b
    gives one arc each way, so a pair of c links is used by c cycles each way: one cycle per link of a GPU
    (``wanted`` cycles if given). None when none is found within ``budget`` extensions (G = 4, 6, a large G, or a graph without one)."""
    left = (1 - np.eye(g, dtype=np.int64)) if links is None else np.array(links, dtype=np.int64)
    wanted = int(left[0].sum()) if wanted is None else wanted
    cycles: list[list[int]] = []
    calls = 0

    def extend(path: list[int]) -> bool:
        nonlocal calls
        calls += 1
        if calls > budget:
            raise TimeoutError
        a = path[-1]
        if len(path) == g:
            if not left[a, 0]:
                return False
            left[a, 0] -= 1
            cycles.append(list(path))
            if len(cycles) == wanted or extend([0]):
                return True
            cycles.pop()
            left[a, 0] += 1
            return False
        for b in range(g):
            if left[a, b] and b not in path:
                left[a, b] -= 1
                if extend(path + [b]):
                    return True
                left[a, b] += 1
        return False

    try:
        return cycles if extend([0]) else None
    except TimeoutError:
        return None


MESH_SEARCH_MAX = 16  # even meshes up to this size are decomposed by search (G = 8: 151 extensions)


@lru_cache(maxsize=64)
def mesh_rings(gpus_per_node: int, links: tuple[tuple[int, ...], ...] | None = None) -> tuple[tuple[int, ...], ...]:
    """Directed rings over the G GPUs of a full mesh, each a tuple of the GPUs in ring order, that together
    use every link a -> b at most once: an arc-disjoint decomposition of the complete digraph into G - 1
    Hamiltonian cycles wherever one exists (odd G: Walecki; even G up to :data:`MESH_SEARCH_MAX` but 4 and 6:
    search), so R rings at once load all G - 1 links of every GPU equally. Otherwise the rings ``a -> a + d``
    for the strides d coprime with G (phi(G) of them: G = 4 and 6 use 2 of their 3 and 5 links).

    ``links``: a partial mesh's G x G link counts (a DGX-1's NVLink cube-mesh): rings only over pairs with a
    link, as NCCL builds its rings over NVLink only (``src/graph/search.cc``): one ring per link of a GPU, each
    link used once each way (search), where such a set exists (every GPU with as many links). Otherwise (a part
    of such a node) as many arc-disjoint Hamiltonian cycles over linked pairs as the search finds, up to the
    fewest links of a GPU; with none, the GPUs in order and back: then the hops without a link cross PCIe
    (:meth:`~ringlab.topology.cluster.Cluster.route`), as NCCL falls back to a PCIe path. Raises ValueError for links that are not G x G, or a mesh above
    :data:`MESH_SEARCH_MAX` GPUs."""
    g = check_world_size(gpus_per_node)
    if links is not None:
        m = np.asarray(links, dtype=np.int64)
        if m.shape != (g, g) or g > MESH_SEARCH_MAX:
            raise ValueError(f"links must be {g} x {g}, of a mesh of at most {MESH_SEARCH_MAX} GPUs")
        if g <= 2:
            return (tuple(range(g)),)
        rings = None
        for wanted in range(int(m.sum(axis=1).min()), 0, -1):  # as many rings as the GPU with fewest links allows
            rings = _search(g, links=m, wanted=wanted, budget=20_000)
            if rings:
                break
        if not rings:
            rings = [list(range(g)), [0] + list(range(g - 1, 0, -1))]
        return tuple(tuple(int(v) for v in r) for r in rings)
    if g <= 2:
        return (tuple(range(g)),)  # one GPU: no link; two: the ring 0 -> 1 -> 0 uses both links
    rings = _walecki(g) if g % 2 else (_search(g) if g <= MESH_SEARCH_MAX else None)
    if rings is None:
        rings = [[(d * j) % g for j in range(g)] for d in range(1, g) if gcd(d, g) == 1]
    return tuple(tuple(int(v) for v in r) for r in rings)


def ring_orders(nodes: int, gpus_per_node: int, channels: int, mesh=False) -> np.ndarray:
    """The rank order of every channel's ring, int64 ``(channels, N)``: position p holds rank ``orders[c, p]``.

    Channel c exits each node at GPU ``e_c = c % G``; inside a node it visits the GPUs after ``e_c`` in order
    (switch, ``mesh=False``), or along ring ``(c + c // L) % R`` of the R :func:`mesh_rings` (``mesh=True``: a
    full mesh; or a partial mesh's G x G link counts, :attr:`ringlab.topology.cluster.Cluster.ring_mesh`), ending
    at ``e_c``; ``L = lcm(R, G)``, so channels 0 .. R G - 1 take every (ring, exit GPU) pair once.
    """
    k, g, ch = _check_shape(nodes, gpus_per_node, channels)
    c = np.arange(ch)[:, None]
    e = c % g
    full = isinstance(mesh, (bool, np.bool_))
    if not full or mesh:
        rings = np.asarray(mesh_rings(g, None if full else mesh), dtype=np.int64)  # (R, G)
        r = len(rings)
        period = r * g // gcd(r, g)  # channels c, c + period share (ring, exit GPU) unless the ring shifts by one
        ring = rings[(np.arange(ch) + np.arange(ch) // period) % r]  # (C, G)
        at = np.argmax(ring == e, axis=1)[:, None]  # where e_c sits in its ring
        local = np.take_along_axis(ring, (at + 1 + np.arange(g)[None, :]) % g, axis=1)  # (C, G): ends at e_c
    else:
        local = (e + np.arange(g)[None, :] + 1) % g
    return (np.arange(k)[None, :, None] * g + local[:, None, :]).reshape(ch, k * g)


def _ring_rows(orders: np.ndarray, phase: str):
    """Per step of one phase, rows over all channels; chunk of rank r in channel c is ``r * C + c``.

    ``phase`` ``rs``: owner-of-position rotation ending with rank r holding its chunk; ``ag``: the
    owners forward their chunks.
    """
    ch, n = orders.shape
    pos = np.arange(n)
    cidx = np.arange(ch)[:, None]
    out = []
    for s in range(n - 1):
        owner_pos = (pos[None, :] - 1 - s) % n if phase == "rs" else (pos[None, :] - s) % n
        owner = np.take_along_axis(orders, np.broadcast_to(owner_pos, orders.shape), axis=1)
        out.append((orders, np.roll(orders, -1, axis=1), owner * ch + cidx, phase == "rs", NO_MERGE))
    return out


def ring_channels_schedule(collective: str, nodes: int, gpus_per_node: int, channels: int,
                           mesh=False) -> ClusterSchedule:
    """Multi-channel ring ``all_reduce | reduce_scatter | all_gather`` (module docstring).

    ``num_chunks = N * C``; rank r owns chunks ``r * C .. r * C + C - 1`` (its 1/N of the message, one
    piece per channel): reduce_scatter leaves them reduced on rank r, all_gather starts from them.
    Steps: ``2 (N - 1)`` for all_reduce, ``N - 1`` otherwise, each with ``C * N`` transfers.
    Raises ValueError for another collective or a bad shape.
    """
    k, g, ch = _check_shape(nodes, gpus_per_node, channels)
    n = k * g
    orders = ring_orders(k, g, ch, mesh)
    own = Holdings.explicit(n, n * ch, [range(r * ch, (r + 1) * ch) for r in range(n)]) if collective != "all_reduce" else None
    every = Holdings.every(n, n * ch)
    if collective == "all_reduce":
        rows, ins, outs = _ring_rows(orders, "rs") + _ring_rows(orders, "ag"), every, every
    elif collective == "reduce_scatter":
        rows, ins, outs = _ring_rows(orders, "rs"), every, own
    elif collective == "all_gather":
        rows, ins, outs = _ring_rows(orders, "ag"), own, every
    else:
        raise ValueError(f"ring_channels builds all_reduce, reduce_scatter or all_gather, not {collective!r}")
    steps, merge = _steps(rows)
    return ClusterSchedule(collective, "ring_channels", k, g, n * ch, steps, merge, ins, outs,
                           f"{ch} ring channel(s); channel c leaves each node at GPU c % {g}", ch)


# --- hierarchical ----------------------------------------------------------------------------

def _intra_ring(k: int, g: int, phase: str, span: int):
    """Ring reduce-scatter (rs) / all-gather (ag) inside every node over G shards of ``span`` chunks."""
    node, gpu = np.meshgrid(np.arange(k), np.arange(g), indexing="ij")
    out = []
    for s in range(g - 1):
        shard = (gpu - 1 - s) % g if phase == "rs" else (gpu - s) % g
        out.append((node * g + gpu, node * g + (gpu + 1) % g, shard * span, phase == "rs", NO_MERGE, span))
    return out


def _rail_ring_all_reduce(k: int, g: int):
    """Ring all-reduce across nodes on every rail: shard g's K pieces (chunks g*K + q) among ranks i*G + g."""
    node, gpu = np.meshgrid(np.arange(k), np.arange(g), indexing="ij")
    src, dst = node * g + gpu, ((node + 1) % k) * g + gpu
    out = []
    for phase, shift in (("rs", 0), ("ag", 1)):
        for s in range(k - 1):
            out.append((src, dst, gpu * k + (node + shift - s) % k, phase == "rs", NO_MERGE))
    return out


def _rail_switch_all_reduce(k: int, g: int):
    """In-network all-reduce across nodes on every rail: pieces to their owner node (reduced in the switch),
    then each owner's piece multicast back."""
    i, q, gpu = np.meshgrid(np.arange(k), np.arange(k), np.arange(g), indexing="ij")
    off = i != q
    me, owner, chunk = (i * g + gpu)[off], (q * g + gpu)[off], (gpu * k + q)[off]
    return [(me, owner, chunk, True, REDUCE_AT_SWITCH), (owner, me, chunk, False, MULTICAST_AT_SWITCH)]


def hierarchical_all_reduce_schedule(nodes: int, gpus_per_node: int, in_network: bool = False) -> ClusterSchedule:
    """Reduce-scatter in each node, all-reduce across nodes on each rail, all-gather in each node.

    ``num_chunks = N``: chunk ``g * K + q`` is piece q of shard g. Steps ``2 (G - 1) + 2 (K - 1)``; with
    ``in_network=True`` (algorithm ``sharp``) the cross-node part is two switch steps (none for K = 1).
    """
    k, g, _ = _check_shape(nodes, gpus_per_node)
    cross = (_rail_switch_all_reduce(k, g) if in_network else _rail_ring_all_reduce(k, g)) if k > 1 else []
    steps, merge = _steps(_intra_ring(k, g, "rs", k) + cross + _intra_ring(k, g, "ag", k))
    every = Holdings.every(k * g, k * g)
    name = "sharp" if in_network else "hierarchical"
    how = "in-network (switch) all-reduce" if in_network else "ring all-reduce"
    return ClusterSchedule("all_reduce", name, k, g, k * g, steps, merge, every, every,
                           f"ring reduce-scatter in each node, {how} across nodes per rail, ring all-gather")


# --- trees between nodes, chains inside -------------------------------------------------------

def tree_chain_parents(nodes: int, gpus_per_node: int, channels: int) -> list[np.ndarray]:
    """Parents over all N ranks of the 2C trees: tree u = 2c + t has NCCL's tree-t shape over nodes,
    head GPU ``(c + t) % G``, and a chain head <- head+1 <- ... inside each node. With C = G every GPU
    (and its NIC) heads one tree of each shape, so no NIC is an inner node of both."""
    k, g, ch = _check_shape(nodes, gpus_per_node, channels)
    node_trees = double_binary_tree_parents(k)
    node, gpu = np.repeat(np.arange(k), g), np.tile(np.arange(g), k)
    out = []
    for u in range(2 * ch):
        head = (u // 2 + u % 2) % g
        pos = (gpu - head) % g  # place in the chain; 0 is the head
        up_node = node_trees[u % 2][node]
        parent = np.where(pos > 0, node * g + (head + pos - 1) % g, np.where(up_node >= 0, up_node * g + head, -1))
        out.append(parent.astype(np.int64))
    return out


def tree_chains_all_reduce_schedule(nodes: int, gpus_per_node: int, channels: int,
                                    pipeline_chunks: int = 4) -> ClusterSchedule:
    """NCCL-style tree all-reduce: 2C trees (chains in nodes, double binary tree between them), each
    ``1 / (2C)`` of the message in ``pipeline_chunks`` pieces. ``num_chunks = 2 C k``."""
    k, g, ch = _check_shape(nodes, gpus_per_node, channels)
    _check_shape(1, 1, pipeline_chunks)
    steps = tree_all_reduce_steps(tree_chain_parents(k, g, ch), pipeline_chunks)
    merge = [np.zeros(st.src.size, dtype=np.int8) for st in steps]
    n, c = k * g, 2 * ch * pipeline_chunks
    return ClusterSchedule("all_reduce", "tree_chains", k, g, c, steps, merge, Holdings.every(n, c),
                           Holdings.every(n, c), f"{2 * ch} trees (double binary between nodes, chains inside), "
                                                 f"{pipeline_chunks} pieces each", ch)


# --- NVLS ------------------------------------------------------------------------------------

def nvls_all_reduce_schedule(nodes: int, gpus_per_node: int, pieces: int = 4) -> ClusterSchedule:
    """NVLS in each node (+ a double binary tree across nodes per rail when ``nodes > 1``: ``nvls_tree``).

    Chunk ``(2 q + t) * P + j`` is half t of slice q of piece j. Piece j: at step j every GPU sends its
    slice-q halves to GPU q, reduced in the switch; across nodes, rail q's two trees carry slice q's
    halves (steps 1 + j ..); at step ``2H + 1 + j`` GPU q multicasts slice q. Steps ``2H + P + 1``, H the
    node trees' height (0 for one node).
    """
    k, g, p = _check_shape(nodes, gpus_per_node, pieces)
    n = k * g
    node, s, q, t, j = np.meshgrid(np.arange(k), np.arange(g), np.arange(g), np.arange(2), np.arange(p), indexing="ij")
    off = s != q
    chunk = ((2 * q + t) * p + j)
    rows: dict[int, list] = {}

    def add(step_of, src, dst, ch, reduce, merge):
        reduce = np.broadcast_to(reduce, src.shape)
        for st in np.unique(step_of):
            sel = step_of == st
            rows.setdefault(int(st), []).append((src[sel], dst[sel], ch[sel], reduce[sel],
                                                 np.full(int(sel.sum()), merge, dtype=np.int8)))

    me, owner = (node * g + s)[off], (node * g + q)[off]
    add(j[off], me, owner, chunk[off], True, REDUCE_AT_SWITCH)
    top = 0
    if k > 1:
        trees = double_binary_tree_parents(k)
        top = max(int(tree_shape(tr)[1].max()) for tr in trees)
        parents = []
        for qq in range(g):
            rail = np.arange(k) * g + qq
            for tr in trees:
                par = np.full(n, -1, dtype=np.int64)
                par[rail] = np.where(tr >= 0, tr * g + qq, -1)
                parents.append(par)
        for st, step in enumerate(tree_all_reduce_steps(parents, p)):
            e = step.expanded()
            add(np.full(e.src.size, st + 1), e.src, e.dst, e.chunk, e.reduce, NO_MERGE)
    add((2 * top + 1 + j)[off], owner, me, chunk[off], False, MULTICAST_AT_SWITCH)
    count = 2 * top + p + 1 if n > 1 else 0
    steps, merges = [], []
    for st in range(count):
        parts = rows.get(st, [])
        cat = [np.concatenate([x[i] for x in parts]) if parts else np.zeros(0, dtype=np.int64) for i in range(5)]
        steps.append(Step(cat[0], cat[1], cat[2], cat[3].astype(bool)))
        merges.append(cat[4].astype(np.int8))
    c = 2 * g * p
    return ClusterSchedule("all_reduce", "nvls" if k == 1 else "nvls_tree", k, g, c, steps, merges,
                           Holdings.every(n, c), Holdings.every(n, c),
                           f"NVLS reduce + multicast in each node, {p} pieces" + (", double binary tree across nodes"
                                                                                  if k > 1 else ""), p)


# The builders' names before they said "schedule": the same objects, so code written against them runs.
ring_channels = ring_channels_schedule
hierarchical_all_reduce = hierarchical_all_reduce_schedule
tree_chains_all_reduce = tree_chains_all_reduce_schedule
nvls_all_reduce = nvls_all_reduce_schedule
