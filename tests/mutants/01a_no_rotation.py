"""The chunk index does not rotate with the step: every rank sends chunk r at every step."""

# words the grader's first failure message must contain
EXPECT = ['rank', 'element', 'expected']
import numpy as np


def ring_allreduce(arrays):
    n = len(arrays)
    work = [np.array_split(np.array(a), n) for a in arrays]
    sent = []
    for _ in range(n - 1):
        outgoing = [work[r][r].copy() for r in range(n)]  # bug: no "- s"
        for r in range(n):
            work[(r + 1) % n][r] = work[(r + 1) % n][r] + outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    for _ in range(n - 1):
        outgoing = [work[r][(r + 1) % n].copy() for r in range(n)]
        for r in range(n):
            work[(r + 1) % n][(r + 1) % n] = outgoing[r]
        sent.append([int(x.nbytes) for x in outgoing])
    return [np.concatenate(w) for w in work], sent
