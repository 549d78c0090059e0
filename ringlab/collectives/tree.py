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

import numpy as np

from .halving_doubling import _check_itemsize
from .ring import _check_world_size, ring_all_gather_steps, ring_reduce_scatter_steps
from .schedule import Schedule, Transfer, chunk_sizes

Step = tuple[Transfer, ...]


def _check_root(root: int, n: int) -> int:
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < n:
        raise ValueError(f"root must be an int in [0, {n - 1}] for world_size={n}, got {root!r}")
    return int(root)


def _levels(n: int) -> int:
    """ceil(log2 n): the number of binomial-tree steps."""
    return (n - 1).bit_length()


def _binomial_edges(n: int, root: int) -> list[list[tuple[int, int, int]]]:
    """Per step, the ``(parent, child, mask)`` edges of the binomial broadcast tree, in real ranks."""
    steps = []
    for k in reversed(range(_levels(n))):
        mask = 1 << k
        steps.append([((v + root) % n, (v + mask + root) % n, mask) for v in range(0, n - mask, 2 * mask)])
    return steps


def _transpose(steps: list[Step], reduce: bool) -> list[Step]:
    """Run a schedule backwards with every edge reversed: broadcast -> reduce, scatter -> gather."""
    return [tuple(Transfer(t.dst, t.src, t.chunk, reduce) for t in step) for step in reversed(steps)]


def _binomial_broadcast_steps(n: int, root: int) -> list[Step]:
    return [tuple(Transfer(p, c, 0, False) for p, c, _ in step) for step in _binomial_edges(n, root)]


def _binomial_sends(n: int) -> np.ndarray:
    """How many children each relative rank v feeds in the binomial broadcast tree."""
    v = np.arange(n)
    count = np.zeros(n, dtype=np.int64)
    for k in range(_levels(n)):
        count += (v % (2 << k) == 0) & (v + (1 << k) < n)
    return count


def _to_real(per_relative: np.ndarray, root: int) -> np.ndarray:
    return np.roll(per_relative, root)  # relative rank v is real rank (v + root) % n


def binomial_broadcast(world_size: int, root: int = 0) -> Schedule:
    """Binomial-tree broadcast of the whole message from ``root``: ``ceil(log2 N)`` steps."""
    n = _check_world_size(world_size)
    root = _check_root(root, n)
    return Schedule("broadcast", "binomial_tree", n, 1, tuple(_binomial_broadcast_steps(n, root)),
                    tuple((0,) if r == root else () for r in range(n)), ((0,),) * n,
                    f"root {root}; relative rank v sends to v + 2**k when 2**(k+1) divides v, k from high to low")


def binomial_broadcast_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """``M x`` the number of children of each rank: ``#{k : 2**(k+1) | v and v + 2**k < N}`` for relative rank v."""
    n = _check_world_size(world_size)
    m = int(chunk_sizes(numel, 1)[0]) * _check_itemsize(itemsize)
    return _to_real(_binomial_sends(n) * m, _check_root(root, n))


def binomial_reduce(world_size: int, root: int = 0) -> Schedule:
    """Binomial-tree reduce to ``root`` (the broadcast tree run backwards): ``ceil(log2 N)`` steps."""
    n = _check_world_size(world_size)
    root = _check_root(root, n)
    return Schedule("reduce", "binomial_tree", n, 1, tuple(_transpose(_binomial_broadcast_steps(n, root), True)),
                    ((0,),) * n, tuple((0,) if r == root else () for r in range(n)),
                    f"root {root}; the binomial broadcast tree backwards, children reduce into parents")


def binomial_reduce_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """Every rank but the root sends ``M`` once."""
    n = _check_world_size(world_size)
    m = int(chunk_sizes(numel, 1)[0]) * _check_itemsize(itemsize)
    out = np.full(n, m, dtype=np.int64)
    out[_check_root(root, n)] = 0
    return out


def _scatter_steps(n: int, root: int) -> list[Step]:
    """Binomial scatter of N chunks from root: rank r ends with chunk r."""
    return [tuple(Transfer(p, c, (root + u) % n, False)
                  for p, c, mask in step
                  for u in range((c - root) % n, min((c - root) % n + mask, n)))
            for step in _binomial_edges(n, root)]


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


def scatter_allgather_broadcast(world_size: int, root: int = 0) -> Schedule:
    """Broadcast as binomial scatter of N chunks + ring all-gather: ``ceil(log2 N) + N - 1`` steps.

    The all-gather is the plain ring of :func:`~ringlab.collectives.ring_all_gather` (rank r starts
    with chunk r), so the root's predecessor also forwards chunks the root already holds.
    """
    n = _check_world_size(world_size)
    root = _check_root(root, n)
    every = tuple(range(n))
    return Schedule("broadcast", "scatter_allgather", n, n,
                    tuple(_scatter_steps(n, root) + ring_all_gather_steps(n, 0)),
                    tuple(every if r == root else () for r in range(n)), (every,) * n,
                    f"root {root}; binomial scatter (rank r gets chunk r), then ring all-gather")


def scatter_allgather_broadcast_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """Scatter: each rank sends its children's subtrees' chunks; all-gather: ``numel - c[(r + 1) % N]``."""
    n = _check_world_size(world_size)
    itemsize = _check_itemsize(itemsize)
    root = _check_root(root, n)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    down, _ = _subtree_elements(n, numel, root)
    c = chunk_sizes(numel, n)
    return (_to_real(down, root) + int(numel) - np.roll(c, -1)) * itemsize


def reduce_scatter_gather_reduce(world_size: int, root: int = 0) -> Schedule:
    """Reduce as ring reduce-scatter (rank r gets chunk r) + binomial gather to ``root``: ``N - 1 + ceil(log2 N)`` steps."""
    n = _check_world_size(world_size)
    root = _check_root(root, n)
    every = tuple(range(n))
    return Schedule("reduce", "reduce_scatter_gather", n, n,
                    tuple(ring_reduce_scatter_steps(n, 0) + _transpose(_scatter_steps(n, root), False)),
                    (every,) * n, tuple(every if r == root else () for r in range(n)),
                    f"root {root}; ring reduce-scatter, then the binomial scatter backwards (gather)")


def reduce_scatter_gather_reduce_bytes(world_size: int, numel: int, itemsize: int, root: int = 0) -> np.ndarray:
    """Ring reduce-scatter ``numel - c[r]``, plus for non-roots the elements of their subtree's chunks."""
    n = _check_world_size(world_size)
    itemsize = _check_itemsize(itemsize)
    root = _check_root(root, n)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    _, own = _subtree_elements(n, numel, root)
    own[0] = 0  # the root gathers, it does not send
    return (_to_real(own, root) + int(numel) - chunk_sizes(numel, n)) * itemsize


def reduce_broadcast_all_reduce(world_size: int) -> Schedule:
    """All-reduce as binomial reduce to rank 0 followed by binomial broadcast: ``2 ceil(log2 N)`` steps."""
    n = _check_world_size(world_size)
    bcast = _binomial_broadcast_steps(n, 0)
    return Schedule("all_reduce", "reduce_broadcast", n, 1, tuple(_transpose(bcast, True) + bcast),
                    ((0,),) * n, ((0,),) * n, "binomial reduce to rank 0, then binomial broadcast")


def reduce_broadcast_all_reduce_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """``M`` up for every non-root rank plus ``M x`` its binomial children on the way down."""
    return binomial_reduce_bytes(world_size, numel, itemsize) + binomial_broadcast_bytes(world_size, numel, itemsize)


# --- NCCL's double binary tree ----------------------------------------------------------------

def nccl_btree_parent(world_size: int, rank: int) -> int:
    """Parent of ``rank`` in NCCL's binary tree rooted at 0 (``ncclGetBtree``), -1 for the root.

    Let ``bit`` be the lowest set bit of rank; the parent is ``(rank ^ bit) | (bit << 1)``, or
    ``rank ^ bit`` when that is out of range.
    """
    if rank == 0:
        return -1
    bit = rank & -rank
    up = (rank ^ bit) | (bit << 1)
    return up if up < world_size else rank ^ bit


def double_binary_tree_parents(world_size: int) -> tuple[list[int], list[int]]:
    """Parents of every rank in NCCL's two trees (``ncclGetDtree``); -1 marks each root.

    Tree 1 is tree 0 mirrored (``r -> N - 1 - r``) for even N, shifted by one rank for odd N.
    """
    n = _check_world_size(world_size)
    tree0 = [nccl_btree_parent(n, r) for r in range(n)]
    if n % 2 == 0:
        tree1 = [-1 if (u := nccl_btree_parent(n, n - 1 - r)) < 0 else n - 1 - u for r in range(n)]
    else:
        tree1 = [-1 if (u := nccl_btree_parent(n, (r - 1) % n)) < 0 else (u + 1) % n for r in range(n)]
    return tree0, tree1


def _shape(parent: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(children count, subtree height, depth) of every rank of a tree given by parents."""
    n = len(parent)
    depth = np.zeros(n, dtype=np.int64)
    for r in range(n):
        u = r
        while parent[u] >= 0:
            u, depth[r] = parent[u], depth[r] + 1
    height = np.zeros(n, dtype=np.int64)
    for r in np.argsort(-depth, kind="stable"):  # deepest first: children before parents
        if parent[r] >= 0:
            height[parent[r]] = max(height[parent[r]], height[r] + 1)
    children = np.bincount([p for p in parent if p >= 0], minlength=n).astype(np.int64)
    return children, height, depth


def double_binary_tree_all_reduce(world_size: int, pipeline_chunks: int = 1) -> Schedule:
    """NCCL-style double binary tree all-reduce; each tree reduces and broadcasts half of the message.

    The message is cut into ``2 * pipeline_chunks`` chunks: tree 0 carries chunks ``0 .. k-1``, tree 1
    chunks ``k .. 2k-1``. Steps: ``2H + k - 1`` with H the trees' height (0 for N = 1).
    Raises ValueError for ``pipeline_chunks < 1``.
    """
    n = _check_world_size(world_size)
    if isinstance(pipeline_chunks, bool) or not isinstance(pipeline_chunks, (int, np.integer)) or pipeline_chunks < 1:
        raise ValueError(f"pipeline_chunks must be an int >= 1, got {pipeline_chunks!r}")
    k = int(pipeline_chunks)
    num_steps = 0 if n == 1 else double_binary_tree_steps(n, k)
    steps: list[list[Transfer]] = [[] for _ in range(num_steps)]
    for t, parent in enumerate(double_binary_tree_parents(n)):
        _, height, depth = _shape(parent)
        top = int(height.max())
        for j in range(k):
            chunk = t * k + j
            for r in range(n):  # ascending rank: a parent folds its children in rank order
                if parent[r] >= 0:
                    steps[height[r] + j].append(Transfer(r, parent[r], chunk, True))
                    steps[top + j + depth[r] - 1].append(Transfer(parent[r], r, chunk, False))
    every = tuple(range(2 * k))
    return Schedule("all_reduce", "double_binary_tree", n, 2 * k, tuple(tuple(s) for s in steps),
                    (every,) * n, (every,) * n,
                    f"NCCL double binary tree, each tree half of the message, {k} pipeline chunk(s) per tree")


def double_binary_tree_steps(world_size: int, pipeline_chunks: int = 1) -> int:
    """``2H + k - 1`` steps (0 for N = 1), H = height of NCCL's binary tree over N ranks."""
    n = _check_world_size(world_size)
    if n == 1:
        return 0
    _, height, _ = _shape(double_binary_tree_parents(n)[0])
    return 2 * int(height.max()) + int(pipeline_chunks) - 1


def double_binary_tree_all_reduce_bytes(world_size: int, numel: int, itemsize: int,
                                        pipeline_chunks: int = 1) -> np.ndarray:
    """Per tree t carrying ``S_t`` elements, a rank sends ``S_t`` up (unless it is t's root) and ``S_t``
    to each child: ``sum_t S_t (has_parent_t + children_t)``. Independent of pipelining."""
    n = _check_world_size(world_size)
    itemsize = _check_itemsize(itemsize)
    k = int(pipeline_chunks)
    c = chunk_sizes(numel, 2 * k)
    out = np.zeros(n, dtype=np.int64)
    for t, parent in enumerate(double_binary_tree_parents(n)):
        children, _, _ = _shape(parent)
        out += int(c[t * k:(t + 1) * k].sum()) * ((np.array(parent) >= 0) + children)
    return out * itemsize
