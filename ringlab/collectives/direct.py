"""Naive direct all-reduce: every rank sends its whole message to every other rank in one step.

Each rank then holds all N inputs and reduces them itself: ``(N - 1) M`` bytes sent per rank, N times
the ring's volume for large N, in a single step (the lowest latency of all). Within the step the
incoming messages are folded into the receiver's own copy in ascending source rank, so rank r
computes ``((x_r + x_0) + x_1) + ...`` (skipping r).

Bit-identity: because every rank starts its sum from its own value, the ranks add in different
orders. Integer sum/prod (modular) and max/min agree exactly everywhere, but for floats ranks 0 and
1 agree (``x_1 + x_0 == x_0 + x_1``) while ranks >= 2 can differ from them in the last bits, so
replicas updated from such a gradient drift apart. Every other all-reduce here computes each
element once, in one place, and copies it: that is why they end bit-identical.
"""

from __future__ import annotations

import numpy as np

from .schedule import Holdings, Schedule, Step, check_itemsize, check_world_size, chunk_sizes


def direct_all_reduce_schedule(world_size: int) -> Schedule:
    """One step of ``N (N - 1)`` whole-message transfers, reduced at each receiver in ascending source rank.

    Transfers are listed source-major, so each receiver folds its incoming messages in source order.
    """
    n = check_world_size(world_size)
    src = np.repeat(np.arange(n, dtype=np.int64), n - 1)
    dst = np.tile(np.arange(n - 1, dtype=np.int64), n)
    dst += dst >= src  # skip the sender itself
    steps = [Step(src, dst, np.zeros_like(src), True)] if n > 1 else []
    return Schedule("all_reduce", "direct", n, 1, steps, Holdings.every(n, 1), Holdings.every(n, 1),
                    "every rank sends its message to every other rank; receivers fold in source-rank order")


def direct_all_reduce_bytes(world_size: int, numel: int, itemsize: int) -> np.ndarray:
    """``(N - 1) * numel * itemsize`` for every rank."""
    n = check_world_size(world_size)
    return np.full(n, (n - 1) * int(chunk_sizes(numel, 1)[0]) * check_itemsize(itemsize), dtype=np.int64)
