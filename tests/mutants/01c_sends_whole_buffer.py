"""Right values, but sends the whole buffer every step (N times the traffic)."""

# words the grader's first failure message must contain
EXPECT = ['rank', 'bytes in total', 'expected']
import numpy as np


def ring_reduce_scatter_rank(rank, world_size, data, exchange):
    work = np.array(data, copy=True)
    bounds = np.cumsum([0] + [len(c) for c in np.array_split(work, world_size)])
    for step in range(world_size - 1):
        received = exchange(work)
        c = (rank - step - 1) % world_size
        work[bounds[c]:bounds[c + 1]] += received[bounds[c]:bounds[c + 1]]
    owned = (rank + 1) % world_size
    return owned, work[bounds[owned]:bounds[owned + 1]]
