"""Pairs rank r with r + 2**k (mod N) instead of r ^ 2**k: the exchange is not symmetric, so a rank
sends to one neighbour and receives from another, and the blocks no longer line up."""

# words the grader's first failure message must contain
EXPECT = ["step 0", "single partner"]


def recursive_doubling_all_gather(world_size):
    steps = []
    distance = 1
    while distance < world_size:
        step = []
        for rank in range(world_size):
            start = rank - rank % distance
            partner = (rank + distance) % world_size
            step.extend((rank, partner, chunk) for chunk in range(start, start + distance))
        steps.append(step)
        distance *= 2
    return steps
