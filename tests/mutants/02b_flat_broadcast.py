"""Counts broadcast as the root sending the whole message to each of the N - 1 others ((N-1) x M):
that is the flat, one-to-all broadcast; a pipelined chain (or a ring) puts M on each link once."""

# words the grader's first failure message must contain
EXPECT = ["broadcast", "busiest rank sends"]


def collective_traffic(collective, world_size, message_bytes):
    n, m = world_size, message_bytes
    share = (n - 1) / n
    if collective == "all_reduce":
        return 2 * share * m, 2 * share
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):
        return share * m, share
    if collective == "broadcast":
        return (n - 1) * m, 1.0
    return (m if n > 1 else 0), 1.0
