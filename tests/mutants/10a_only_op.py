"""Compares only the op name: a broadcast of int64 [1] against all_reduce of float32 [25] is reported as op only."""

# words the grader's first failure message must contain
EXPECT = ["did not report", "shape", "dtype"]


def diff_fingerprints(fingerprints):
    ops = [fp["op"] for fp in fingerprints]
    reference = max(ops, key=ops.count)
    return {rank: ["op"] for rank, op in enumerate(ops) if op != reference}
