"""Subtracts the whole backward from the whole communication: an all_reduce cannot overlap compute that ran
before its bucket was complete."""

EXPECT = ["behind all of the backward"]  # 0 on the first case, like "all hidden": the other cases tell them apart


def exposed_comm(backward_s, allreduce_s):
    return max(0.0, sum(allreduce_s) - sum(backward_s))
