"""Counts every all_reduce as exposed, as if none overlapped the backward."""

EXPECT = ["every all_reduce in full"]


def exposed_comm(backward_s, allreduce_s):
    return float(sum(allreduce_s))
