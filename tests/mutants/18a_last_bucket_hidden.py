"""Overlaps each bucket with the next bucket's compute but forgets the last bucket, which has none after it."""

EXPECT = ["leaves out the last bucket"]  # 0 on the first case, like "all hidden": the other cases tell them apart


def exposed_comm(backward_s, allreduce_s):
    lag = 0.0
    for i in range(len(backward_s) - 1):
        lag = max(0.0, allreduce_s[i] + lag - backward_s[i + 1])
    return lag
