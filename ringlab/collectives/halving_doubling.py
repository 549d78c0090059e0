"""Recursive doubling and recursive halving schedules (Thakur, Rabenseifner & Gropp 2005).

Source: R. Thakur, R. Rabenseifner, W. Gropp, "Optimization of Collective Communication
Operations in MPICH", IJHPCA 19(1), 2005, sections 4.3-4.5 (the algorithms MPICH ships).

Power-of-two world sizes ``p``:

* **recursive doubling all-reduce**: at step ``k`` rank ``i`` swaps its whole (partially reduced)
  message with ``i ^ 2**k`` and both reduce; ``log2 p`` steps, ``M log2 p`` bytes sent per rank.
  Every rank computes ``a + b`` where its partner computes ``b + a``, so results are bit-identical.
* **recursive halving reduce-scatter** (distance halving): at step ``k`` rank ``i`` pairs with
  ``i ^ (p / 2**(k+1))``; of the aligned block of chunks it still reduces, it sends the half that
  holds its partner's chunks and keeps its own half. Rank ``i`` ends with chunk ``i``.
* **recursive doubling all-gather**: the mirror image, partner ``i ^ 2**k`` at step ``k``, sending
  the aligned block of ``2**k`` chunks it has gathered so far.
* **Rabenseifner all-reduce**: recursive halving reduce-scatter then recursive doubling all-gather
  on ``p`` chunks; ``2 log2 p`` steps and ``2 (p - 1) / p * M`` bytes per rank, the ring's volume.
  (MPICH's all-reduce pairs by distance doubling in its reduce-scatter, which leaves chunks in
  bit-reversed order; distance halving sends the same volume per step and keeps chunk ``i`` on
  rank ``i``.)

Other world sizes ``n`` fold the extra ranks first, as MPICH does: with ``p`` the largest power of
two <= n and ``rem = n - p``, each even rank ``2i < 2 rem`` sends its whole message to ``2i + 1``,
which reduces it and acts as *new rank* ``i``; ranks ``r >= 2 rem`` act as new rank ``r - rem``.
The ``p`` new ranks run the power-of-two algorithm, then each odd rank ``2i + 1`` hands the
result back to ``2i``. For reduce-scatter and all-gather the message stays cut into ``n`` chunks
(rank ``r`` owns chunk ``r``) and new rank ``i < rem`` stands for the two chunks ``2i, 2i + 1``.
All byte functions return int64 arrays of shape ``(world_size,)`` that are exact for any numel
(chunks follow :func:`~ringlab.collectives.chunk_sizes`).
"""

from __future__ import annotations

import numpy as np

from .schedule import Holdings, Schedule, Step, check_itemsize, check_world_size, chunk_sizes


def fold(world_size: int) -> tuple[int, int, np.ndarray]:
    """MPICH's fold of a non-power-of-two world: ``(p, rem, real)``.

    ``p`` is the largest power of two <= world_size, ``rem = world_size - p`` and ``real[i]`` (int64
    ``(p,)``) is the rank that plays new rank ``i``: ``2i + 1`` for ``i < rem``, else ``i + rem``.
    """
    n = check_world_size(world_size)
    p = 1 << (n.bit_length() - 1)
    rem = n - p
    i = np.arange(p, dtype=np.int64)
    return p, rem, np.where(i < rem, 2 * i + 1, i + rem)


class _Groups:
    """The chunks each new rank owns, as consecutive ranges: new rank i owns ``[lo[i], lo[i] + size[i])``.

    Consecutive new ranks own consecutive ranges, so an aligned block of new ranks is one block of chunks.
    """

    def __init__(self, lo: np.ndarray, size: np.ndarray):
        self.lo, self.size = lo, size

    def block(self, start: np.ndarray, mask: int) -> tuple[np.ndarray, np.ndarray]:
        """(first chunk, chunk count) of the groups of new ranks ``start .. start + mask - 1``."""
        last = start + mask - 1
        return self.lo[start], self.lo[last] + self.size[last] - self.lo[start]


def _aligned(i: np.ndarray, size: int) -> np.ndarray:
    """Start of the aligned block of ``size`` new ranks (a power of two) that contains new rank i."""
    return i - i % size


def _halving_steps(real: np.ndarray, groups: _Groups) -> list[Step]:
    """Reduce-scatter by distance halving over new ranks; new rank i ends owning its group."""
    p, steps, mask = len(real), [], len(real) // 2
    i = np.arange(p, dtype=np.int64)
    while mask:
        lo, span = groups.block(_aligned(i ^ mask, mask), mask)  # the half that holds the partner's chunks
        steps.append(Step(real[i], real[i ^ mask], lo, True, span))
        mask //= 2
    return steps


def _doubling_steps(real: np.ndarray, groups: _Groups) -> list[Step]:
    """All-gather by distance doubling: new rank i sends the aligned block of groups it holds."""
    p, steps, mask = len(real), [], 1
    i = np.arange(p, dtype=np.int64)
    while mask < p:
        lo, span = groups.block(_aligned(i, mask), mask)
        steps.append(Step(real[i], real[i ^ mask], lo, False, span))
        mask *= 2
    return steps


def _doubling_sent(group_numel: np.ndarray) -> np.ndarray:
    """Elements new rank i sends in the doubling all-gather: the sum, over ``k < log2 p``, of the
    aligned block of ``2**k`` groups containing i."""
    p = len(group_numel)
    prefix = np.concatenate([[0], np.cumsum(group_numel)])
    i = np.arange(p)
    total = np.zeros(p, dtype=np.int64)
    size = 1
    while size < p:
        start = i & ~(size - 1)  # p is a power of two
        total += prefix[start + size] - prefix[start]
        size *= 2
    return total


def _pairs(rem: int) -> np.ndarray:
    return np.arange(rem, dtype=np.int64)


def _fold_in(rem: int, lo: int, span: int) -> list[Step]:
    """Each even rank 2i < 2 rem sends chunks ``lo .. lo + span - 1`` to 2i + 1, which reduces them."""
    i = _pairs(rem)
    return [Step(2 * i, 2 * i + 1, np.full(rem, lo), True, np.full(rem, span))] if rem else []


def _fold_out(rem: int, lo: np.ndarray, span: np.ndarray, pair: np.ndarray | None = None) -> list[Step]:
    """Odd ranks hand results back: row j sends chunks ``lo[j] ..`` from ``2 pair[j] + 1`` to ``2 pair[j]``."""
    if not rem:
        return []
    pair = _pairs(rem) if pair is None else pair
    return [Step(2 * pair + 1, 2 * pair, lo, False, span)]


def _pair_groups(world_size: int) -> tuple[int, np.ndarray, _Groups]:
    """For reduce-scatter/all-gather on n chunks: (rem, real, groups) with new rank i < rem owning 2i, 2i+1."""
    p, rem, real = fold(world_size)
    i = np.arange(p, dtype=np.int64)
    return rem, real, _Groups(np.where(i < rem, 2 * i, i + rem), np.where(i < rem, 2, 1))


def _scatter_to_ranks(n: int, real: np.ndarray, per_new: np.ndarray) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    out[real] = per_new
    return out


# --- all-reduce -------------------------------------------------------------------------------

def recursive_doubling_all_reduce_schedule(world_size: int) -> Schedule:
    """Recursive doubling all-reduce of the whole message (one chunk), MPICH fold for non-powers of two.

    Steps: ``log2 p`` plus 2 when ``world_size`` is not a power of two (p = largest power of two <= N).
    """
    n = check_world_size(world_size)
    p, rem, real = fold(n)
    steps = _fold_in(rem, 0, 1)
    i, mask = np.arange(p, dtype=np.int64), 1
    while mask < p:
        steps.append(Step(real[i], real[i ^ mask], np.zeros(p, dtype=np.int64), True))
        mask *= 2
    steps += _fold_out(rem, np.zeros(rem, dtype=np.int64), np.ones(rem, dtype=np.int64))
    return Schedule("all_reduce", "recursive_doubling", n, 1, steps, Holdings.every(n, 1), Holdings.every(n, 1),
                    "new rank i swaps the whole message with i ^ 2**k at step k and both reduce")


def recursive_doubling_all_reduce_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """Bytes each rank sends: ``M log2 p`` for the p new ranks, ``+ M`` for the odd ranks below ``2 rem``
    (they hand the result back), and ``M`` for the folded even ranks. ``M = numel * itemsize``."""
    n = check_world_size(world_size)
    m = int(chunk_sizes(numel, 1)[0]) * check_itemsize(itemsize)
    p, rem, real = fold(n)
    out = _scatter_to_ranks(n, real, np.full(p, m * (p.bit_length() - 1), dtype=np.int64))
    out[1:2 * rem:2] += m
    out[0:2 * rem:2] = m
    return out


def rabenseifner_all_reduce_schedule(world_size: int) -> Schedule:
    """Rabenseifner all-reduce: recursive halving reduce-scatter + recursive doubling all-gather on ``p`` chunks.

    ``p`` = largest power of two <= N; MPICH's fold adds one step before and one after when N is not
    a power of two. Steps: ``2 log2 p`` (+2).
    """
    n = check_world_size(world_size)
    p, rem, real = fold(n)
    groups = _Groups(np.arange(p, dtype=np.int64), np.ones(p, dtype=np.int64))
    steps = _fold_in(rem, 0, p) + _halving_steps(real, groups) + _doubling_steps(real, groups)
    steps += _fold_out(rem, np.zeros(rem, dtype=np.int64), np.full(rem, p))
    return Schedule("all_reduce", "rabenseifner", n, p, steps, Holdings.every(n, p), Holdings.every(n, p),
                    "recursive halving reduce-scatter (new rank i keeps chunk i) then recursive doubling all-gather")


def rabenseifner_all_reduce_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """Bytes each rank sends in :func:`rabenseifner_all_reduce_schedule`, exact for any numel.

    With ``c = chunk_sizes(numel, p)``, new rank i sends ``numel - c[i]`` in the reduce-scatter and
    ``sum_k S_k(i)`` in the all-gather (``S_k(i)``: elements of the aligned block of ``2**k`` chunks
    holding chunk i); odd ranks below ``2 rem`` add ``numel``, folded even ranks send ``numel`` only.
    For N a power of two dividing numel every rank sends ``2 (N - 1) / N * M``.
    """
    n = check_world_size(world_size)
    itemsize = check_itemsize(itemsize)
    p, rem, real = fold(n)
    c = chunk_sizes(numel, p)
    out = _scatter_to_ranks(n, real, int(numel) - c + _doubling_sent(c))
    out[1:2 * rem:2] += int(numel)
    out[0:2 * rem:2] = int(numel)
    return out * itemsize


# --- reduce-scatter and all-gather ------------------------------------------------------------

def _group_numel(groups: _Groups, numel: int, n: int) -> np.ndarray:
    offsets = np.concatenate([[0], np.cumsum(chunk_sizes(numel, n))])
    return offsets[groups.lo + groups.size] - offsets[groups.lo]


def recursive_halving_reduce_scatter_schedule(world_size: int) -> Schedule:
    """Recursive halving reduce-scatter on N chunks; rank r ends with the reduced chunk r (MPICH fold)."""
    n = check_world_size(world_size)
    rem, real, groups = _pair_groups(n)
    i = _pairs(rem)
    steps = _fold_in(rem, 0, n) + _halving_steps(real, groups) + _fold_out(rem, 2 * i, np.ones(rem, dtype=np.int64))
    return Schedule("reduce_scatter", "recursive_halving", n, n, steps, Holdings.every(n, n), Holdings.own(n, n),
                    "distance halving; rank r ends with chunk r")


def recursive_halving_reduce_scatter_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """Bytes each rank sends: new rank i sends ``numel - g[i]`` (``g[i]``: elements of the chunks it owns);
    odd ranks below ``2 rem`` add ``c[2i]`` (the even rank's chunk), folded even ranks send ``numel``."""
    n = check_world_size(world_size)
    itemsize = check_itemsize(itemsize)
    rem, real, groups = _pair_groups(n)
    c = chunk_sizes(numel, n)
    out = _scatter_to_ranks(n, real, int(numel) - _group_numel(groups, numel, n))
    out[1:2 * rem:2] += c[0:2 * rem:2]
    out[0:2 * rem:2] = int(numel)
    return out * itemsize


def recursive_doubling_all_gather_schedule(world_size: int) -> Schedule:
    """Recursive doubling all-gather on N chunks; rank r contributes chunk r (MPICH fold, mirrored)."""
    n = check_world_size(world_size)
    rem, real, groups = _pair_groups(n)
    i = _pairs(rem)
    steps = [Step(2 * i, 2 * i + 1, 2 * i, False)] if rem else []
    steps += _doubling_steps(real, groups)
    # each odd rank hands back every chunk but the even rank's own 2i: [0, 2i) and [2i + 1, n)
    pair = np.repeat(i, 2)
    lo = np.stack([np.zeros(rem, dtype=np.int64), 2 * i + 1], 1).reshape(-1)
    span = np.stack([2 * i, n - 2 * i - 1], 1).reshape(-1)
    keep = span > 0
    steps += _fold_out(rem, lo[keep], span[keep], pair[keep])
    return Schedule("all_gather", "recursive_doubling", n, n, steps, Holdings.own(n, n), Holdings.every(n, n),
                    "distance doubling; new rank i sends the aligned block of chunks it holds")


def recursive_doubling_all_gather_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """Bytes each rank sends (``numel``: the gathered message): new rank i sends ``sum_k S_k(i)`` over the
    aligned blocks of its groups; odd ranks below ``2 rem`` add ``numel - c[2i]``; folded even ranks ``c[2i]``."""
    n = check_world_size(world_size)
    itemsize = check_itemsize(itemsize)
    rem, real, groups = _pair_groups(n)
    c = chunk_sizes(numel, n)
    out = _scatter_to_ranks(n, real, _doubling_sent(_group_numel(groups, numel, n)))
    out[1:2 * rem:2] += int(numel) - c[0:2 * rem:2]
    out[0:2 * rem:2] = c[0:2 * rem:2]
    return out * itemsize
