"""18a: the exposed communication of DDP's gradient buckets.

Grade it: ``ringlab check 18a`` or, in a notebook, ``ringlab.check.grade("18a")``.
Hints: ``ringlab.check.hint("18a", 1)`` (2 and 3 say more).
"""


def exposed_comm(backward_s, allreduce_s):
    """Seconds of all_reduce left after the backward pass ends, for DDP's buckets on one NCCL stream.

    The backward pass produces the buckets one after another: bucket i is complete once
    ``backward_s[0] + ... + backward_s[i]`` seconds of backward have run. Its all_reduce, lasting
    ``allreduce_s[i]`` seconds, starts as soon as the bucket is complete and the all_reduce before
    it has finished (one NCCL stream: one collective at a time, in bucket order). Compute never
    waits for communication, and the two do not slow each other.

    Args:
        backward_s: backward compute per bucket, in launch order (seconds, floats >= 0, at least one).
        allreduce_s: all_reduce time of each bucket, same order and length (seconds, floats >= 0).

    Returns:
        The exposed communication: seconds from the end of the backward pass to the end of the
        last all_reduce (a float >= 0).
    """
    raise NotImplementedError("18a: replace this line with your code")
