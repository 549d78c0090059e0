"""Lets the backlog drain during the compute of the bucket before, not the one after: bucket i's all_reduce
is taken to overlap backward_s[i - 1], which ran before bucket i was even complete."""

EXPECT = ["previous bucket"]


def exposed_comm(backward_s, allreduce_s):
    lag, before = 0.0, 0.0
    for compute, comm in zip(backward_s, allreduce_s):
        lag = comm + max(0.0, lag - before)
        before = compute
    return lag
