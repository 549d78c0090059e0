"""ex01 (P1): ring all-reduce on a list of numpy arrays, with the bytes every rank sends.

Grade it: ``ringlab check ex01`` or, in a notebook, ``ringlab.check.grade("ex01")``.
Hints: ``ringlab.check.hint("ex01", 1)`` (2 and 3 say more).
"""

import numpy as np


def ring_allreduce(arrays):
    """Sum N equal-length 1-D arrays (one per rank) with the ring algorithm.

    Split every rank's array into N chunks with ``np.array_split`` (chunk sizes may differ by one).
    Ranks form a ring: rank r only ever sends to rank (r + 1) % N.

    * Reduce-scatter, steps s = 0 .. N-2: rank r sends chunk (r - s) % N of its working copy;
      the receiver adds it into its own copy of that chunk.
    * All-gather, steps s = 0 .. N-2: rank r sends chunk (r + 1 - s) % N; the receiver stores it.

    All sends of a step happen at once: a rank sends what it held at the start of the step.

    Args:
        arrays: list of N one-dimensional numpy arrays of equal length and dtype.

    Returns:
        ``(outputs, sent)``: ``outputs`` is a list of N arrays, every rank's result (the
        element-wise sum); ``sent`` is a list of 2 * (N - 1) steps, each a list of N ints: the bytes
        rank r sent at that step (``chunk.nbytes``).
    """
    ### BEGIN SOLUTION
    n = len(arrays)
    work = [np.array_split(np.array(a, copy=True), n) for a in arrays]
    sent = []
    for s in range(n - 1):
        outgoing = [work[r][(r - s) % n].copy() for r in range(n)]
        for r in range(n):
            dst, c = (r + 1) % n, (r - s) % n
            work[dst][c] = work[dst][c] + outgoing[r]
        sent.append([int(chunk.nbytes) for chunk in outgoing])
    for s in range(n - 1):
        outgoing = [work[r][(r + 1 - s) % n].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][(r + 1 - s) % n] = outgoing[r]
        sent.append([int(chunk.nbytes) for chunk in outgoing])
    outputs = [np.concatenate(chunks) if chunks else np.zeros(0) for chunks in work]
    return outputs, sent
    ### END SOLUTION
