"""Off by one in the block: at distance d it sends the aligned block of 2d chunks (what it will hold
after the step) instead of the d chunks it holds now, so it forwards chunks it has not received."""

# words the grader's first failure message must contain
EXPECT = ["step 0", "does not hold"]


def recursive_doubling_all_gather(world_size):
    steps = []
    distance = 1
    while distance < world_size:
        step = []
        for rank in range(world_size):
            start = rank - rank % (2 * distance)
            step.extend((rank, rank ^ distance, chunk) for chunk in range(start, start + 2 * distance))
        steps.append(step)
        distance *= 2
    return steps
