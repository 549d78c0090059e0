"""ex05 (P12): bytes per rank of each primitive, and nccl-tests' busbw factor.

Grade it: ``ringlab check ex05``. Expected values come from the closed forms for the algorithms named
below, checked for several world sizes and message sizes.
"""


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
    raise NotImplementedError("ex05: replace this line with your code")
