"""Chunks of numel // N elements: the remainder elements at the end are never reduced."""

# words the grader's first failure message must contain
EXPECT = ['rank', 'element', 'expected']
import numpy as np


def ring_allreduce(arrays):
    n = len(arrays)
    size = len(arrays[0]) // n  # bug: integer division drops numel % n elements
    work = [np.array(a, copy=True) for a in arrays]

    def chunk(c):
        return slice(c * size, (c + 1) * size)

    sent = []
    for s in range(n - 1):
        outgoing = [work[r][chunk((r - s) % n)].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][chunk((r - s) % n)] += outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    for s in range(n - 1):
        outgoing = [work[r][chunk((r + 1 - s) % n)].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][chunk((r + 1 - s) % n)] = outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    return work, sent
