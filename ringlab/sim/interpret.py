"""What a schedule means, one transfer at a time: the definition every fast executor is tested against.

State: ``value[(rank, chunk)]`` is the array rank ``rank`` currently holds for ``chunk``. It starts
with the chunks each rank lists in ``schedule.inputs``, cut from its row by ``numpy.array_split``.

A step is a set of transfers that happen at once. So every send reads the value its sender held
*before* the step began (a snapshot), and only then do the receivers update, in the order the
transfers are listed: ``reduce=True`` combines the incoming chunk into the receiver's copy with the
collective's operator (``own = op(own, incoming)``), ``reduce=False`` overwrites it. Reading a chunk
a rank does not hold is an error in the schedule.

The result is every rank's value of each chunk it lists in ``schedule.outputs``. Bytes are counted
per transfer: the chunk's size in bytes, charged to the sender and to the receiver.

This is slow on purpose (a Python loop per transfer); ``ringlab.sim.executor`` runs the same
meaning with a few numpy calls per step.
"""

from __future__ import annotations

import numpy as np

from ringlab.collectives import Schedule


def interpret(schedule: Schedule, x: np.ndarray, ufunc=np.add):
    """Run ``schedule`` on ``x`` (``(world_size, numel)`` numpy array), one transfer at a time.

    ``ufunc`` is the reduction (np.add, np.multiply, np.maximum, np.minimum; None for schedules
    that only copy). Returns ``(outputs, sent, received)``: a dict ``{(rank, chunk): array}`` of
    the output chunks, and int64 ``(num_steps, world_size)`` byte counts.
    Raises ValueError when a transfer reads a chunk its rank does not hold.
    """
    n, c = schedule.world_size, schedule.num_chunks
    pieces = [np.array_split(row, c) for row in x]
    value = {(r, ch): pieces[r][ch].copy() for r in range(n) for ch in schedule.inputs[r]}
    sent = np.zeros((schedule.num_steps, n), dtype=np.int64)
    received = np.zeros_like(sent)
    for s, step in enumerate(schedule.steps):
        before = dict(value)  # the snapshot every send of this step reads
        for t in step:
            if (t.src, t.chunk) not in before or (t.reduce and (t.dst, t.chunk) not in value):
                raise ValueError(f"step {s}: {t} reads a chunk its rank does not hold")
            incoming = before[(t.src, t.chunk)]
            own = value.get((t.dst, t.chunk))
            value[(t.dst, t.chunk)] = ufunc(own, incoming) if t.reduce else incoming.copy()
            sent[s, t.src] += incoming.nbytes
            received[s, t.dst] += incoming.nbytes
    outputs = {}
    for r in range(n):
        for ch in schedule.outputs[r]:
            if (r, ch) not in value:
                raise ValueError(f"rank {r} is to return chunk {ch} but never held it")
            outputs[(r, ch)] = value[(r, ch)]
    return outputs, sent, received
