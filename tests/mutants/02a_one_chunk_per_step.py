"""Sends only its own chunk at every step instead of everything gathered so far: rank r ends with
the chunks of r ^ 2**k only, log2 N of the N - 1 it needs."""

# words the grader's first failure message must contain
EXPECT = ["lacks chunks", "[3]"]


def recursive_doubling_all_gather(world_size):
    steps = []
    distance = 1
    while distance < world_size:
        steps.append([(rank, rank ^ distance, rank) for rank in range(world_size)])
        distance *= 2
    return steps
