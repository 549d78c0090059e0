"""ex02 (P1): the ring rotation: which chunk each rank sends at each step.

Grade it: ``ringlab check ex02``. Any rotation that gives a correct ring all-reduce passes.
"""


def ring_chunk_to_send(rank, step, world_size, phase):
    """Index of the chunk ``rank`` sends to rank (rank + 1) % world_size at ``step`` of ``phase``.

    Args:
        rank: 0 .. world_size - 1.
        step: 0 .. world_size - 2, counted from the start of the phase.
        world_size: number of ranks N (the message is cut into N chunks).
        phase: ``"reduce_scatter"`` (the receiver adds the chunk into its copy) or
            ``"all_gather"`` (the receiver stores it).

    Returns:
        an int in 0 .. world_size - 1.
    """
    raise NotImplementedError("ex02: replace this line with your code")
