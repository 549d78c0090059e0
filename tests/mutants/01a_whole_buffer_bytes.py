"""Correct values, but counts the bytes of the whole buffer at every step."""

# words the grader's first failure message must contain
EXPECT = ['rank', 'bytes at step', 'expected']
import numpy as np


def ring_allreduce(arrays):
    n = len(arrays)
    work = [np.array_split(np.array(a), n) for a in arrays]
    nbytes = np.asarray(arrays[0]).nbytes
    sent = []
    for s in range(n - 1):
        outgoing = [work[r][(r - s) % n].copy() for r in range(n)]
        for r in range(n):
            c = (r - s) % n
            work[(r + 1) % n][c] = work[(r + 1) % n][c] + outgoing[r]
        sent.append([nbytes] * n)  # bug
    for s in range(n - 1):
        outgoing = [work[r][(r + 1 - s) % n].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][(r + 1 - s) % n] = outgoing[r]
        sent.append([nbytes] * n)
    return [np.concatenate(w) for w in work], sent
