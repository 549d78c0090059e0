"""Ring reduce-scatter, all-gather and all-reduce schedules, with closed-form traffic.

Ranks form a ring ``r -> (r + 1) % N`` and the message is cut into N chunks. In every step
each rank sends one chunk to its successor, and the chunk index rotates by one per step, so
all N links carry one chunk at once (Patarasuk & Yuan, "Bandwidth optimal all-reduce
algorithms for clusters of workstations", JPDC 2009).

Rotation used for **all-reduce** (the standard one):

* reduce-scatter phase, step ``s = 0 .. N-2``: rank ``r`` sends chunk ``(r - s) % N``; the
  receiver adds it into its own copy. Afterwards rank ``r`` holds the complete chunk ``(r + 1) % N``.
* all-gather phase, step ``s = 0 .. N-2``: rank ``r`` sends chunk ``(r + 1 - s) % N``; the
  receiver stores it.

Rank ``r`` therefore sends every chunk but ``(r + 1) % N`` in the first phase and every chunk
but ``(r + 2) % N`` in the second, so with chunk sizes ``c`` (``numpy.array_split``)::

    bytes_sent[r] = itemsize * (2 * numel - c[(r + 1) % N] - c[(r + 2) % N])

which sums to ``2 (N - 1) * nbytes`` over the ranks and equals ``2 (N - 1) / N * nbytes``
for every rank when N divides numel.

The stand-alone **reduce-scatter** and **all-gather** follow torch.distributed's placement:
rank ``r`` ends with (reduce-scatter), or starts with (all-gather), chunk ``r``. Their rotations
are shifted by one: reduce-scatter sends chunk ``(r - 1 - s) % N`` and all-gather chunk
``(r - s) % N``, so each rank sends ``numel - c[r]`` and ``numel - c[(r + 1) % N]`` elements.
"""

from __future__ import annotations

import numpy as np

from .schedule import Holdings, RingPhase, Schedule, check_itemsize, check_world_size, chunk_sizes

RING_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")


def ring_reduce_scatter_phase(world_size: int, owner_shift: int) -> RingPhase:
    """The N-1 reduce-scatter steps after which rank r holds the reduced chunk ``(r + owner_shift) % N``.

    At step s rank r sends chunk ``(r + owner_shift - 1 - s) % N`` to ``(r + 1) % N``.
    """
    n = check_world_size(world_size)
    return RingPhase(n - 1, owner_shift - 1, True)


def ring_all_gather_phase(world_size: int, owner_shift: int) -> RingPhase:
    """The N-1 all-gather steps when rank r starts with the finished chunk ``(r + owner_shift) % N``.

    At step s rank r forwards chunk ``(r + owner_shift - s) % N`` to ``(r + 1) % N``.
    """
    n = check_world_size(world_size)
    return RingPhase(n - 1, owner_shift, False)


def _ring(collective: str, n: int, phases: list, owns_all_at_start: bool, owns_all_at_end: bool,
          description: str) -> Schedule:
    every, own = Holdings.every(n, n), Holdings.own(n, n)
    return Schedule(collective, "ring", n, n, phases, every if owns_all_at_start else own,
                    every if owns_all_at_end else own, description)


def ring_all_reduce_schedule(world_size: int) -> Schedule:
    """Ring all-reduce schedule: reduce-scatter then all-gather, ``2 (N - 1)`` steps of N transfers."""
    n = check_world_size(world_size)
    return _ring("all_reduce", n, [ring_reduce_scatter_phase(n, 1), ring_all_gather_phase(n, 1)], True, True,
                 "reduce-scatter: rank r sends chunk (r - s) % N; all-gather: rank r sends chunk (r + 1 - s) % N")


def ring_reduce_scatter_schedule(world_size: int) -> Schedule:
    """Ring reduce-scatter schedule; rank r ends with the reduced chunk r (torch.distributed placement)."""
    n = check_world_size(world_size)
    return _ring("reduce_scatter", n, [ring_reduce_scatter_phase(n, 0)], True, False,
                 "rank r sends chunk (r - 1 - s) % N and ends with chunk r")


def ring_all_gather_schedule(world_size: int) -> Schedule:
    """Ring all-gather schedule; rank r contributes chunk r and ends with all N chunks."""
    n = check_world_size(world_size)
    return _ring("all_gather", n, [ring_all_gather_phase(n, 0)], False, True,
                 "rank r sends chunk (r - s) % N, starting with its own chunk r")


def _ring_bytes(world_size: int, numel: int, itemsize: int, skipped_shifts: tuple[int, ...]) -> np.ndarray:
    n = check_world_size(world_size)
    itemsize = check_itemsize(itemsize)
    c = chunk_sizes(numel, n)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    elements = len(skipped_shifts) * int(numel) - sum(np.roll(c, -k) for k in skipped_shifts)  # c[(r + k) % n]
    return (elements * itemsize).astype(np.int64)


def ring_all_reduce_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """Closed-form bytes each rank sends (and receives) in ring all-reduce.

    ``itemsize * (2 * numel - c[(r + 1) % N] - c[(r + 2) % N])`` with ``c = chunk_sizes(numel, N)``;
    0 for N = 1. Returns int64, shape ``(world_size,)``. Patarasuk & Yuan (2009) show
    ``2 (N - 1) / N * nbytes`` per rank is the lower bound this reaches when N divides numel.
    """
    return _ring_bytes(world_size, numel, itemsize, (1, 2))


def ring_reduce_scatter_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """Closed-form bytes each rank sends in the stand-alone ring reduce-scatter: ``itemsize * (numel - c[r])``."""
    return _ring_bytes(world_size, numel, itemsize, (0,))


def ring_all_gather_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """Closed-form bytes each rank sends in the stand-alone ring all-gather: ``itemsize * (numel - c[(r + 1) % N])``.

    ``numel`` is the size of the gathered (full) message.
    """
    return _ring_bytes(world_size, numel, itemsize, (1,))


def ring_busiest_bytes(collective: str, world_size: int, numel: int, itemsize: int) -> int:
    """Bytes the busiest rank sends in one ring ``collective``: the max of its ``ring_*_bytes``, in O(1).

    With ``q, rem = divmod(numel, N)`` the chunks are ``q + 1`` (the first ``rem``) then ``q``, so the
    reduce-scatter / all-gather busiest rank skips one chunk of ``q`` (``numel - q`` elements) and the
    all-reduce busiest rank skips the smallest pair of cyclically adjacent chunks: ``2 q`` when at
    least two chunks have ``q`` elements, else ``2 q + 1``. 0 for N = 1. For calculators sized in
    billions of elements over thousands of ranks, where building the per-rank arrays would not pay.
    Raises ValueError for a collective other than all_reduce, reduce_scatter, all_gather.
    """
    if collective not in RING_COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(RING_COLLECTIVES)}, got {collective!r}")
    n, itemsize = check_world_size(world_size), check_itemsize(itemsize)
    if int(numel) < 0:
        raise ValueError(f"numel must be >= 0, got {numel}")
    if n == 1:
        return 0
    q, rem = divmod(int(numel), n)
    if collective != "all_reduce":
        return itemsize * (int(numel) - q)
    smallest_adjacent_pair = 2 * q if n - rem >= 2 else 2 * q + 1
    return itemsize * (2 * int(numel) - smallest_adjacent_pair)
