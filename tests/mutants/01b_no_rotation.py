"""The chunk index ignores the step."""

# words the grader's first failure message must contain
EXPECT = ['step', 'chunk']


def ring_chunk_to_send(rank, step, world_size, phase):
    return rank % world_size if phase == "reduce_scatter" else (rank + 1) % world_size
