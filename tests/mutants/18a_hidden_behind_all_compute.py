"""Subtracts the whole backward from the whole communication: an all_reduce cannot overlap compute that ran
before its bucket was complete."""

EXPECT = ["its all_reduce always shows"]  # the first case: 4 ms of comm under 8 ms of backward gives 0


def exposed_comm(backward_s, allreduce_s):
    return max(0.0, sum(allreduce_s) - sum(backward_s))
