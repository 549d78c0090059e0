"""Calls exchange one time too few on rank 0: real processes would hang."""

# words the grader's first failure message must contain
EXPECT = ['exchange', 'hang']
import numpy as np


def ring_reduce_scatter_rank(rank, world_size, data, exchange):
    chunks = [c.copy() for c in np.array_split(np.asarray(data), world_size)]
    steps = world_size - 1 - (1 if rank == 0 and world_size > 1 else 0)
    for step in range(steps):
        received = exchange(chunks[(rank - step) % world_size])
        target = (rank - step - 1) % world_size
        chunks[target] = chunks[target] + received
    return (rank + 1) % world_size, chunks[(rank + 1) % world_size]
