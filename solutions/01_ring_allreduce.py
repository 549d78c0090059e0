"""Topic 01, Ring all-reduce: exercises 01a, 01b, 01c.

01a: ring all-reduce on a list of numpy arrays, with the bytes every rank sends.
Grade it: ``ringlab check 01a`` or, in a notebook, ``ringlab.check.grade("01a")``.
Hints: ``ringlab.check.hint("01a", 1)`` (2 and 3 say more).

01b: the ring rotation: which chunk each rank sends at each step.
Grade it: ``ringlab check 01b``. Any rotation that gives a correct ring all-reduce passes.

01c: ring reduce-scatter written as the loop each rank runs.
The grader starts one thread per rank and gives each an ``exchange`` function that behaves like
``dist.batch_isend_irecv`` with one send to the next rank and one receive from the previous one.
Grade it: ``ringlab check 01c``.
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


def ring_chunk_to_send(rank, step, world_size, phase):
    """Index of the chunk ``rank`` sends to rank (rank + 1) % world_size at ``step`` of ``phase``.

    Args:
        rank: 0 .. world_size - 1.
        step: 0 .. world_size - 2, counted from the start of the phase.
        world_size: number of ranks N (the message is cut into N chunks).
        phase: ``"reduce_scatter"`` (the receiver adds the chunk into its copy) or
            ``"all_gather"`` (the receiver stores it).

    Returns:
        an int in 0 .. world_size - 1.
    """
    ### BEGIN SOLUTION
    if phase == "reduce_scatter":
        return (rank - step) % world_size
    return (rank + 1 - step) % world_size
    ### END SOLUTION


def ring_reduce_scatter_rank(rank, world_size, data, exchange):
    """Run ring reduce-scatter on one rank.

    Args:
        rank: this rank, 0 .. world_size - 1.
        world_size: number of ranks N.
        data: this rank's 1-D numpy array; split it into N chunks with ``np.array_split``.
        exchange: ``exchange(chunk) -> received``: sends the 1-D array ``chunk`` to rank
            (rank + 1) % N and returns the array rank (rank - 1) % N sent at the same step.
            Every rank must call it exactly N - 1 times.

    Returns:
        ``(chunk_index, values)``: the chunk this rank ends up owning and its fully reduced values
        (the sum over all ranks of that chunk). Every chunk must end on exactly one rank.
    """
    ### BEGIN SOLUTION
    chunks = [c.copy() for c in np.array_split(np.asarray(data), world_size)]
    for step in range(world_size - 1):
        received = exchange(chunks[(rank - step) % world_size])
        target = (rank - step - 1) % world_size
        chunks[target] = chunks[target] + received
    owned = (rank + 1) % world_size
    return owned, chunks[owned]
    ### END SOLUTION
