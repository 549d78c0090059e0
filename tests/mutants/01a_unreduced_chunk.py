"""Forwards its ORIGINAL chunk at every reduce-scatter step instead of the running partial sum."""

# words the grader's first failure message must contain
EXPECT = ['rank', 'element', 'expected', 'original chunk']
import numpy as np


def ring_allreduce(arrays):
    n = len(arrays)
    original = [np.array_split(np.array(a), n) for a in arrays]
    work = [[c.copy() for c in parts] for parts in original]
    sent = []
    for s in range(n - 1):
        outgoing = [original[r][(r - s) % n].copy() for r in range(n)]  # bug: not work[r]
        for r in range(n):
            c = (r - s) % n
            work[(r + 1) % n][c] = work[(r + 1) % n][c] + outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    for s in range(n - 1):
        outgoing = [work[r][(r + 1 - s) % n].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][(r + 1 - s) % n] = outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    return [np.concatenate(w) for w in work], sent
