"""Tree schedules: binomial broadcast and reduce, their large-message forms, and NCCL's double binary tree.

Sources:

* Binomial tree (MPICH, Thakur, Rabenseifner & Gropp 2005, sec. 4.1): with ``v = (r - root) % N``
  the relative rank and ``L = ceil(log2 N)``, at the step for ``mask = 2**k`` (k from L-1 down to 0)
  every ``v`` that is a multiple of ``2 mask`` sends to ``v + mask`` (if < N). Broadcast sends the
  whole message ``M`` per edge: ``L`` steps, the root sends ``L`` times. Reduce is the same tree run
  backwards (children send up and the parent reduces); every non-root rank sends ``M`` once.
* Scatter + ring all-gather broadcast (van de Geijn; MPICH's long-message broadcast, Thakur et al.
  2005 sec. 4.1): the root scatters N chunks down the binomial tree (an edge carries the chunks of
  the child's subtree: relative ranks ``[w, min(w + mask, N))``), then a ring all-gather. About
  ``2 (N - 1) / N * M`` per rank instead of the root's ``M log2 N``.
* Ring reduce-scatter + binomial gather reduce (Rabenseifner's reduce, Thakur et al. 2005 sec. 4.2):
  the mirror image of the above for reduce.
* Reduce-then-broadcast all-reduce: binomial reduce to rank 0, then binomial broadcast from it.
* Double binary tree all-reduce (NCCL 2.4, ``src/graph/trees.cc``: ``ncclGetBtree``/``ncclGetDtree``):
  tree 0 is NCCL's binary tree rooted at rank 0, built from the lowest set bit of each rank; tree 1
  mirrors it (``r -> N - 1 - r``) when N is even and shifts it by one rank when N is odd, so most
  ranks are a leaf in one tree and an inner node in the other. Each tree reduces one half of the
  message up to its root and broadcasts it back down. NCCL builds the trees between nodes and
  chains the GPUs inside a node; here every rank is a tree node.

  Pipelining: with ``pipeline_chunks = k`` each half is cut into k pieces; piece j leaves a rank of
  subtree height ``h`` at step ``h + j`` and reaches a rank at depth ``d`` of a tree of height ``H``
  at step ``H + j + d - 1``, so a run takes ``2H + k - 1`` steps (NCCL pipelines the same way with
  many more, smaller pieces). ``k = 1`` (the default) is the unpipelined tree. Pipelining changes
  the step count, never the bytes each rank sends.

Byte functions return int64 arrays ``(world_size,)``, exact for any numel (chunk sizes follow
:func:`~ringlab.collectives.chunk_sizes`).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .ring import ring_all_gather_phase, ring_reduce_scatter_phase
from .schedule import Holdings, Schedule, Step, check_itemsize, check_world_size, chunk_sizes


def _check_root(root: int, n: int) -> int:
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < n:
        raise ValueError(f"root must be an int in [0, {n - 1}] for world_size={n}, got {root!r}")
    return int(root)


def _levels(n: int) -> int:
    """ceil(log2 n): the number of binomial-tree steps."""
    return (n - 1).bit_length()


def _binomial_edges(n: int, root: int) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Per step, the binomial broadcast tree's edges as ``(parents, children, mask)`` in real ranks."""
    steps = []
    for k in reversed(range(_levels(n))):
        mask = 1 << k
        v = np.arange(0, n - mask, 2 * mask, dtype=np.int64)
        steps.append(((v + root) % n, (v + mask + root) % n, mask))
    return steps


def _transpose(steps: list[Step], reduce: bool) -> list[Step]:
    """Run a schedule backwards with every edge reversed: broadcast -> reduce, scatter -> gather."""
    return [Step(st.dst, st.src, st.chunk, reduce, st.span) for st in reversed(steps)]


def _binomial_broadcast_steps(n: int, root: int) -> list[Step]:
    return [Step(p, c, np.zeros_like(p), False) for p, c, _ in _binomial_edges(n, root)]


def _frozen(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    for a in arrays:
        a.setflags(write=False)  # cached: shared by every caller
    return arrays


@lru_cache(maxsize=16)
def _binomial_sends(n: int) -> np.ndarray:
    """How many children each relative rank v feeds in the binomial broadcast tree (read-only, cached)."""
    v = np.arange(n)
    count = np.zeros(n, dtype=np.int64)
    for k in range(_levels(n)):
        count += (v % (2 << k) == 0) & (v + (1 << k) < n)
    return _frozen(count)[0]


def _to_real(per_relative: np.ndarray, root: int) -> np.ndarray:
    return np.roll(per_relative, root)  # relative rank v is real rank (v + root) % n


def binomial_broadcast_schedule(world_size: int, root: int = 0) -> Schedule:
    """Binomial-tree broadcast of the whole message from ``root``: ``ceil(log2 N)`` steps."""
    n = check_world_size(world_size)
    root = _check_root(root, n)
    return Schedule("broadcast", "binomial_tree", n, 1, _binomial_broadcast_steps(n, root),
                    Holdings.root(n, 1, root), Holdings.every(n, 1),
                    f"root {root}; relative rank v sends to v + 2**k when 2**(k+1) divides v, k from high to low")


def binomial_broadcast_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """``M x`` the number of children of each rank: ``#{k : 2**(k+1) | v and v + 2**k < N}`` for relative rank v."""
    n = check_world_size(world_size)
    m = int(chunk_sizes(numel, 1)[0]) * check_itemsize(itemsize)
    return _to_real(_binomial_sends(n) * m, _check_root(root, n))


def binomial_reduce_schedule(world_size: int, root: int = 0) -> Schedule:
    """Binomial-tree reduce to ``root`` (the broadcast tree run backwards): ``ceil(log2 N)`` steps."""
    n = check_world_size(world_size)
    root = _check_root(root, n)
    return Schedule("reduce", "binomial_tree", n, 1, _transpose(_binomial_broadcast_steps(n, root), True),
                    Holdings.every(n, 1), Holdings.root(n, 1, root),
                    f"root {root}; the binomial broadcast tree backwards, children reduce into parents")


def binomial_reduce_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """Every rank but the root sends ``M`` once."""
    n = check_world_size(world_size)
    m = int(chunk_sizes(numel, 1)[0]) * check_itemsize(itemsize)
    out = np.full(n, m, dtype=np.int64)
    out[_check_root(root, n)] = 0
    return out


def _scatter_steps(n: int, root: int) -> list[Step]:
    """Binomial scatter of N chunks from root: rank r ends with chunk r.

    The edge to relative rank w carries the chunks of w's subtree, relative ranks
    ``[w, min(w + mask, N))``: real chunks ``(root + u) % N``, one block, or two where it wraps past N - 1.
    """
    steps = []
    for parent, child, mask in _binomial_edges(n, root):
        w = (child - root) % n
        start, length = (root + w) % n, np.minimum(w + mask, n) - w
        first = np.minimum(length, n - start)  # the part before the wrap
        rows = np.stack([np.stack([parent, child, start, first], 1),
                         np.stack([parent, child, np.zeros_like(start), length - first], 1)], 1).reshape(-1, 4)
        rows = rows[rows[:, 3] > 0]  # edge by edge, each edge's chunks in relative order
        steps.append(Step(rows[:, 0], rows[:, 1], rows[:, 2], False, rows[:, 3]))
    return steps


def _subtree_elements(n: int, numel: int, root: int) -> tuple[np.ndarray, np.ndarray]:
    """Per relative rank: (elements sent down in the binomial scatter, elements of its own subtree)."""
    c = chunk_sizes(numel, n)
    prefix = np.concatenate([[0], np.cumsum(np.roll(c, -root))])  # chunk of relative rank u is c[(root+u)%n]
    v = np.arange(n)
    down = np.zeros(n, dtype=np.int64)
    for k in range(_levels(n)):
        w = v + (1 << k)
        feeds = (v % (2 << k) == 0) & (w < n)
        down += np.where(feeds, prefix[np.minimum(w + (1 << k), n)] - prefix[np.minimum(w, n)], 0)
    low = np.where(v == 0, 1 << _levels(n), v & -v)  # the mask at which v received: its subtree span
    own = prefix[np.minimum(v + low, n)] - prefix[v]
    return down, own


def scatter_allgather_broadcast_schedule(world_size: int, root: int = 0) -> Schedule:
    """Broadcast as binomial scatter of N chunks + ring all-gather: ``ceil(log2 N) + N - 1`` steps.

    The all-gather is the plain ring of :func:`~ringlab.collectives.ring_all_gather_schedule` (rank r starts
    with chunk r), so the root's predecessor also forwards chunks the root already holds.
    """
    n = check_world_size(world_size)
    root = _check_root(root, n)
    return Schedule("broadcast", "scatter_allgather", n, n, _scatter_steps(n, root) + [ring_all_gather_phase(n, 0)],
                    Holdings.root(n, n, root), Holdings.every(n, n),
                    f"root {root}; binomial scatter (rank r gets chunk r), then ring all-gather")


def scatter_allgather_broadcast_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """Scatter: each rank sends its children's subtrees' chunks; all-gather: ``numel - c[(r + 1) % N]``."""
    n = check_world_size(world_size)
    itemsize = check_itemsize(itemsize)
    root = _check_root(root, n)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    down, _ = _subtree_elements(n, numel, root)
    c = chunk_sizes(numel, n)
    return (_to_real(down, root) + int(numel) - np.roll(c, -1)) * itemsize


def reduce_scatter_gather_reduce_schedule(world_size: int, root: int = 0) -> Schedule:
    """Reduce as ring reduce-scatter (rank r gets chunk r) + binomial gather to ``root``: ``N - 1 + ceil(log2 N)`` steps."""
    n = check_world_size(world_size)
    root = _check_root(root, n)
    return Schedule("reduce", "reduce_scatter_gather", n, n,
                    [ring_reduce_scatter_phase(n, 0)] + _transpose(_scatter_steps(n, root), False),
                    Holdings.every(n, n), Holdings.root(n, n, root),
                    f"root {root}; ring reduce-scatter, then the binomial scatter backwards (gather)")


def reduce_scatter_gather_reduce_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """Ring reduce-scatter ``numel - c[r]``, plus for non-roots the elements of their subtree's chunks."""
    n = check_world_size(world_size)
    itemsize = check_itemsize(itemsize)
    root = _check_root(root, n)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    _, own = _subtree_elements(n, numel, root)
    own[0] = 0  # the root gathers, it does not send
    return (_to_real(own, root) + int(numel) - chunk_sizes(numel, n)) * itemsize


def reduce_broadcast_all_reduce_schedule(world_size: int) -> Schedule:
    """All-reduce as binomial reduce to rank 0 followed by binomial broadcast: ``2 ceil(log2 N)`` steps."""
    n = check_world_size(world_size)
    bcast = _binomial_broadcast_steps(n, 0)
    return Schedule("all_reduce", "reduce_broadcast", n, 1, _transpose(bcast, True) + bcast,
                    Holdings.every(n, 1), Holdings.every(n, 1), "binomial reduce to rank 0, then binomial broadcast")


def reduce_broadcast_all_reduce_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """``M`` up for every non-root rank plus ``M x`` its binomial children on the way down."""
    return binomial_reduce_bytes(world_size, numel, itemsize) + binomial_broadcast_bytes(world_size, numel, itemsize)


# --- NCCL's double binary tree ----------------------------------------------------------------

def nccl_btree_parents(world_size: int) -> np.ndarray:
    """Parent of every rank in NCCL's binary tree rooted at 0 (``ncclGetBtree``), -1 for the root.

    Let ``bit`` be the lowest set bit of rank; the parent is ``(rank ^ bit) | (bit << 1)``, or
    ``rank ^ bit`` when that is out of range. int64 ``(world_size,)``.
    """
    n = check_world_size(world_size)
    r = np.arange(n, dtype=np.int64)
    bit = r & -r
    up = (r ^ bit) | (bit << 1)
    parent = np.where(up < n, up, r ^ bit)
    parent[0] = -1
    return parent


def double_binary_tree_parents(world_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents of every rank in NCCL's two trees (``ncclGetDtree``); -1 marks each root.

    Tree 1 is tree 0 mirrored (``r -> N - 1 - r``) for even N, shifted by one rank for odd N.
    Two int64 arrays ``(world_size,)`` (fresh copies).
    """
    return tuple(shape[0].copy() for shape in _dbt_shapes(check_world_size(world_size)))


@lru_cache(maxsize=16)
def _dbt_shapes(n: int) -> tuple[tuple[np.ndarray, ...], ...]:
    """For each of the two trees: (parent, children, height, depth), read-only and cached per world size."""
    return tuple(_frozen(parent, *tree_shape(parent)) for parent in _dbt_parents(n))


def _dbt_parents(n: int) -> tuple[np.ndarray, np.ndarray]:
    tree0, r = nccl_btree_parents(n), np.arange(n)
    if n % 2 == 0:
        u = tree0[n - 1 - r]
        tree1 = np.where(u < 0, -1, n - 1 - u)
    else:
        u = tree0[(r - 1) % n]
        tree1 = np.where(u < 0, -1, (u + 1) % n)
    return tree0, tree1


def tree_shape(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(children count, subtree height, depth) of every rank of a tree given by parents (-1: root)."""
    parent = np.asarray(parent, dtype=np.int64)
    n = len(parent)
    # pointer jumping: ``up`` is the ancestor ``depth`` levels up (or the root, which points at itself)
    up = np.where(parent >= 0, parent, np.arange(n))
    depth = (parent >= 0).astype(np.int64)
    while (up != up[up]).any():  # O(log height) rounds
        depth += depth[up]
        up = up[up]
    height = np.zeros(n, dtype=np.int64)
    for d in range(int(depth.max(initial=0)), 0, -1):  # deepest first: children before parents
        nodes = np.flatnonzero(depth == d)
        np.maximum.at(height, parent[nodes], height[nodes] + 1)
    children = np.bincount(parent[parent >= 0], minlength=n).astype(np.int64)
    return children, height, depth


def double_binary_tree_all_reduce_schedule(world_size: int, pipeline_chunks: int = 1) -> Schedule:
    """NCCL-style double binary tree all-reduce; each tree reduces and broadcasts half of the message.

    The message is cut into ``2 * pipeline_chunks`` chunks: tree 0 carries chunks ``0 .. k-1``, tree 1
    chunks ``k .. 2k-1``. Steps: ``2H + k - 1`` with H the trees' height (0 for N = 1). Within a step
    transfers are ordered by (tree, piece, rank), so a parent folds its children in rank order.
    Raises ValueError for ``pipeline_chunks < 1``.
    """
    n = check_world_size(world_size)
    if isinstance(pipeline_chunks, bool) or not isinstance(pipeline_chunks, (int, np.integer)) or pipeline_chunks < 1:
        raise ValueError(f"pipeline_chunks must be an int >= 1, got {pipeline_chunks!r}")
    k = int(pipeline_chunks)
    steps = tree_all_reduce_steps([shape[0] for shape in _dbt_shapes(n)], k)
    return Schedule("all_reduce", "double_binary_tree", n, 2 * k, steps, Holdings.every(n, 2 * k),
                    Holdings.every(n, 2 * k),
                    f"NCCL double binary tree, each tree half of the message, {k} pipeline chunk(s) per tree")


def tree_all_reduce_steps(parents, pipeline_chunks: int = 1) -> list[Step]:
    """The steps of an all-reduce over several trees, each reducing its own chunks to its root and back.

    ``parents``: one int64 array ``(world_size,)`` per tree (-1 marks the root). Tree t carries chunks
    ``t * k .. t * k + k - 1`` (``k = pipeline_chunks``): piece j leaves a rank of subtree height h at
    step ``h + j`` and reaches a rank at depth d of a tree of height H at step ``H + j + d - 1``, so
    the run takes ``max_t(2 H_t) + k - 1`` steps. Within a step transfers are ordered by (tree, piece,
    rank), so a parent folds its children in rank order. Used by NCCL's double binary tree here and by
    the cluster trees of :mod:`ringlab.topology` (chains inside nodes, trees between them).
    """
    k = int(pipeline_chunks)
    rows = []  # (step, tree, piece, rank, up-before-down, src, dst, chunk, reduce)
    for t, parent in enumerate(parents):
        parent = np.asarray(parent, dtype=np.int64)
        _, height, depth = tree_shape(parent)
        top = int(height.max(initial=0))
        r = np.flatnonzero(parent >= 0)
        for j in range(k):
            def block(step, order, src, dst, reduce):
                return np.stack([step, np.full_like(r, t), np.full_like(r, j), r, np.full_like(r, order),
                                 src, dst, np.full_like(r, t * k + j), np.full_like(r, reduce)], 1)
            rows += [block(height[r] + j, 0, r, parent[r], 1), block(top + j + depth[r] - 1, 1, parent[r], r, 0)]
    table = np.concatenate(rows) if rows else np.zeros((0, 9), dtype=np.int64)
    table = table[np.lexsort(table[:, 4::-1].T)]
    count = int(table[:, 0].max()) + 1 if len(table) else 0
    bounds = np.searchsorted(table[:, 0], np.arange(count + 1))
    return [Step(*(table[a:b, col] for col in (5, 6, 7)), table[a:b, 8].astype(bool))
            for a, b in zip(bounds[:-1], bounds[1:])]


def double_binary_tree_steps(world_size: int, pipeline_chunks: int = 1) -> int:
    """``2H + k - 1`` steps (0 for N = 1), H = height of NCCL's binary tree over N ranks."""
    n = check_world_size(world_size)
    if n == 1:
        return 0
    height = _dbt_shapes(n)[0][2]
    return 2 * int(height.max()) + int(pipeline_chunks) - 1


def double_binary_tree_all_reduce_bytes(world_size: int, numel: int, itemsize: int,
                                        pipeline_chunks: int = 1) -> np.ndarray:
    """Per tree t carrying ``S_t`` elements, a rank sends ``S_t`` up (unless it is t's root) and ``S_t``
    to each child: ``sum_t S_t (has_parent_t + children_t)``. Independent of pipelining."""
    n = check_world_size(world_size)
    itemsize = check_itemsize(itemsize)
    k = int(pipeline_chunks)
    c = chunk_sizes(numel, 2 * k)
    out = np.zeros(n, dtype=np.int64)
    for t, (parent, children, _, _) in enumerate(_dbt_shapes(n)):
        out += int(c[t * k:(t + 1) * k].sum()) * ((parent >= 0) + children)
    return out * itemsize
