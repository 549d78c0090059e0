"""All-gather starts with the chunk the rank has not finished."""

# words the grader's first failure message must contain
EXPECT = ['all-gather', 'rank']


def ring_chunk_to_send(rank, step, world_size, phase):
    return (rank - step) % world_size
