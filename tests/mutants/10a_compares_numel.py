"""Compares shapes by their number of elements: (2, 3) and (3, 2) look the same, yet the collective is wrong."""

# words the grader's first failure message must contain
EXPECT = ["rank 1", "shape", "did not report"]
import math

FIELDS = ("seq", "op", "shape", "dtype", "device")


def _key(name, value):
    return math.prod(value) if name == "shape" and value is not None else value


def diff_fingerprints(fingerprints):
    result = {}
    for name in FIELDS:
        values = [_key(name, fp[name]) for fp in fingerprints]
        reference = max(values, key=values.count)
        for rank, value in enumerate(values):
            if value != reference:
                result.setdefault(rank, []).append(name)
    return dict(sorted(result.items()))
