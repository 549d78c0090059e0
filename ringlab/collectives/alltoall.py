"""Pairwise-exchange all-to-all, written in the ``(src, dst, chunk, reduce)`` model.

Layout ("shift" layout): each rank's buffer of ``numel`` elements is cut into N chunks
(:func:`~ringlab.collectives.chunk_sizes`). On rank r, chunk ``k`` holds, before the collective, the
block r sends to rank ``(r + k) % N``, and afterwards the block it received from rank ``(r - k) % N``.
The block travelling from s to d therefore has the same index ``k = (d - s) % N`` on both ends, so a
transfer ``(s, d, k, reduce=False)`` moves it; chunk 0 is each rank's block to itself and never moves.
The buffer stays ``numel`` elements per rank (an ``N x N`` block layout would need N times more).

Schedule (MPICH's pairwise exchange for any N, Thakur, Rabenseifner & Gropp 2005 sec. 3): at step
``k = 1 .. N-1`` rank r sends chunk k to ``(r + k) % N`` and receives chunk k from ``(r - k) % N``.
Every rank sends ``numel - c[0]`` elements, ``(N - 1) / N`` of its buffer when N divides numel.

When N does not divide numel the block from s to d has ``c[(d - s) % N]`` elements: this is
``all_to_all_single`` with input split sizes ``np.roll(c, s)`` on rank s and output split sizes
``np.roll(c, d)`` on rank d (every rank still sends and receives ``numel`` elements in total).
"""

from __future__ import annotations

import numpy as np

from .schedule import Holdings, Schedule, Step, check_itemsize, check_world_size, chunk_sizes


def pairwise_all_to_all_schedule(world_size: int) -> Schedule:
    """Pairwise exchange: ``N - 1`` steps; at step k rank r sends chunk k (shift layout) to ``(r + k) % N``."""
    n = check_world_size(world_size)
    r = np.arange(n, dtype=np.int64)
    steps = [Step(r, (r + k) % n, np.full(n, k), False) for k in range(1, n)]
    return Schedule("all_to_all", "pairwise", n, n, steps, Holdings.every(n, n), Holdings.every(n, n),
                    "chunk k of rank r: block for rank r + k before, block from rank r - k after")


def pairwise_all_to_all_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """``(numel - c[0]) * itemsize`` for every rank (everything but the block a rank keeps)."""
    n = check_world_size(world_size)
    c = chunk_sizes(numel, n)
    return np.full(n, (int(numel) - int(c[0])) * check_itemsize(itemsize), dtype=np.int64)
