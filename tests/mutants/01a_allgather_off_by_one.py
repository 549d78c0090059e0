"""All-gather starts one chunk too early: rank r forwards chunk (r - s) instead of (r + 1 - s)."""

# words the grader's first failure message must contain
EXPECT = ['rank', 'element', 'expected', 'one chunk early']
import numpy as np


def ring_allreduce(arrays):
    n = len(arrays)
    work = [np.array_split(np.array(a), n) for a in arrays]
    sent = []
    for s in range(n - 1):
        outgoing = [work[r][(r - s) % n].copy() for r in range(n)]
        for r in range(n):
            c = (r - s) % n
            work[(r + 1) % n][c] = work[(r + 1) % n][c] + outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    for s in range(n - 1):
        outgoing = [work[r][(r - s) % n].copy() for r in range(n)]  # bug: off by one
        for r in range(n):
            work[(r + 1) % n][(r - s) % n] = outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    return [np.concatenate(w) for w in work], sent
