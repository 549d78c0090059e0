"""ex04 (P12): the recursive-doubling all-gather schedule for a power-of-two world size.

Grade it: ``ringlab check ex04``. The grader replays your schedule: every rank must end with every
chunk, each copied from the rank that owns it, in log2(N) steps of pairwise exchanges, sending
(N - 1) / N of the gathered message per rank.
"""


def recursive_doubling_all_gather(world_size):
    """The steps of recursive-doubling all-gather; rank r starts with chunk r only.

    Args:
        world_size: number of ranks N, a power of two (1, 2, 4, 8, ...).

    Returns:
        a list of steps; each step is a list of transfers ``(src, dst, chunk)``: rank ``src`` sends its
        copy of chunk ``chunk`` (0 .. N-1, chunk c is rank c's contribution) to rank ``dst``, which
        stores it. Within a step every send reads what its source held at the start of the step.
        Ranks exchange with one partner per step; after the last step every rank holds all N chunks.
    """
    raise NotImplementedError("ex04: replace this line with your code")
