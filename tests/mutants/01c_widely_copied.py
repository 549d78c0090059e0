"""The widely copied wrong version: every step sends the ORIGINAL chunk (never a partial sum)
and adds what it receives only when the received chunk index equals its rank. Right for N = 2,
wrong for N > 2."""

# words the grader's first failure message must contain
EXPECT = ['rank', 'element', 'expected', 'original chunk']
import numpy as np


def ring_reduce_scatter_rank(rank, world_size, data, exchange):
    chunks = np.array_split(np.asarray(data), world_size)
    acc = chunks[rank].copy()
    for step in range(world_size - 1):
        received = exchange(chunks[(rank - step - 1) % world_size])  # original, never reduced
        if (rank - step - 2) % world_size == rank:  # index of the chunk rank - 1 sent
            acc = acc + received
    return rank, acc
