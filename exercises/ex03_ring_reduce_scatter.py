"""ex03 (P9 without torch): ring reduce-scatter written as the loop each rank runs.

The grader starts one thread per rank and gives each an ``exchange`` function that behaves like
``dist.batch_isend_irecv`` with one send to the next rank and one receive from the previous one.
Grade it: ``ringlab check ex03``.
"""

import numpy as np


def ring_reduce_scatter_rank(rank, world_size, data, exchange):
    """Run ring reduce-scatter on one rank.

    Args:
        rank: this rank, 0 .. world_size - 1.
        world_size: number of ranks N.
        data: this rank's 1-D numpy array; split it into N chunks with ``np.array_split``.
        exchange: ``exchange(chunk) -> received``: sends the 1-D array ``chunk`` to rank
            (rank + 1) % N and returns the array rank (rank - 1) % N sent at the same step.
            Every rank must call it exactly N - 1 times.

    Returns:
        ``(chunk_index, values)``: the chunk this rank ends up owning and its fully reduced values
        (the sum over all ranks of that chunk). Every chunk must end on exactly one rank.
    """
    raise NotImplementedError("ex03: replace this line with your code")
