"""Rotates the wrong way: the chunk a rank receives is not the one it forwards next."""

# words the grader's first failure message must contain
EXPECT = ['reduce-scatter', 'chunk']


def ring_chunk_to_send(rank, step, world_size, phase):
    if phase == "reduce_scatter":
        return (rank + step) % world_size
    return (rank + 1 + step) % world_size
