"""Topic 02, Collectives and their costs: ring vs tree vs halving-doubling: exercises 02a, 02b.

02a: the recursive-doubling all-gather schedule for a power-of-two world size.
Grade it: ``ringlab check 02a``. The grader replays your schedule: every rank must end with every
chunk, each copied from the rank that owns it, in log2(N) steps of pairwise exchanges, sending
(N - 1) / N of the gathered message per rank.

02b: bytes per rank of each primitive, and nccl-tests' busbw factor.
Grade it: ``ringlab check 02b``. Expected values come from the closed forms for the algorithms named
below, checked for several world sizes and message sizes.
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
    ### BEGIN SOLUTION
    steps = []
    distance = 1
    while distance < world_size:
        step = []
        for rank in range(world_size):
            # after the steps so far, rank holds the aligned block of `distance` chunks around it
            start = rank - rank % distance
            partner = rank ^ distance
            step.extend((rank, partner, chunk) for chunk in range(start, start + distance))
        steps.append(step)
        distance *= 2
    return steps
    ### END SOLUTION


def collective_traffic(collective, world_size, message_bytes):
    """Bytes the busiest rank sends in ``collective``, and the busbw factor nccl-tests reports.

    Algorithms (the bandwidth-optimal ones NCCL-style libraries run for large messages):
    all_reduce, reduce_scatter, all_gather: ring; broadcast and reduce: a pipelined chain (ring order
    from / towards the root, every link carries the whole message once); all_to_all: pairwise exchange.

    Args:
        collective: ``"all_reduce" | "reduce_scatter" | "all_gather" | "broadcast" | "reduce" |
            "all_to_all"`` (torch.distributed names).
        world_size: number of ranks N >= 1.
        message_bytes: S as nccl-tests defines it, in bytes: the all_reduce / broadcast / reduce
            buffer, the whole array for reduce_scatter (input) and all_gather (output), each rank's
            send buffer for all_to_all. N divides it.

    Returns:
        ``(bytes_sent_by_busiest_rank, busbw_factor)`` as two numbers (floats are fine), where
        ``busbw = algbw * busbw_factor`` and ``algbw = message_bytes / time``.
    """
    ### BEGIN SOLUTION
    n, m = world_size, message_bytes
    share = (n - 1) / n  # every rank passes on all the chunks but one
    if collective == "all_reduce":
        return 2 * share * m, 2 * share
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return share * m, share
    if collective in ("broadcast", "reduce"):
        return (m if n > 1 else 0), 1.0
    raise ValueError(f"unknown collective {collective!r}")
    ### END SOLUTION
