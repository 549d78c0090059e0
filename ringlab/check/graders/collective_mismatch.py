"""Grader for topic 10, mismatched collectives (card 10).

* 10a ``diff_fingerprints(fingerprints) -> {rank: [field, ...]}``: expected answers from a
  direct count of each field's values.
"""

from __future__ import annotations

from ..engine import CaseFailure, run_grader
from ..exercise import Exercise

FP_FIELDS = ("seq", "op", "shape", "dtype", "device")


def _fp(op="ALLREDUCE", shape=(4,), dtype="float32", device="cpu", seq=0):
    return {"seq": seq, "op": op, "shape": shape, "dtype": dtype, "device": device}


BARRIER = _fp("BARRIER", None, None, None)


FP_CASES = (
    [_fp(), _fp(), _fp("BROADCAST"), _fp()],                                  # card 10: rank 2 broadcasts
    [_fp(shape=(25,)), _fp(shape=(25,)), _fp("BROADCAST", (1,), "int64"), _fp(shape=(25,))],
    [_fp(shape=(25,)), _fp("BROADCAST", (1,), "int64")],                      # two ranks: a tie, rank 0 wins
    [BARRIER, BARRIER, BARRIER, _fp()],                                       # rank 3 skipped the barrier
    [_fp()] * 4,
    [_fp()],
    [_fp("BROADCAST"), _fp(), _fp(), _fp()],                                  # rank 0 is the odd one out
    [_fp(shape=(2, 3)), _fp(shape=(3, 2)), _fp(shape=(2, 3))],                # same numel, other shape
    [_fp(device="cuda:0"), _fp(device="cuda:1"), _fp(device="cuda:0"), _fp(device="cuda:0")],
    [_fp(seq=5), _fp(seq=5), _fp(seq=4), _fp(seq=5), _fp(seq=6)],
    [_fp(dtype="bfloat16"), _fp(dtype="float32"), _fp(dtype="bfloat16"), _fp(dtype="float32")],  # 2-2 tie
    [_fp(), _fp("REDUCE", (8,)), _fp("ALLGATHER", dtype="float16"), _fp(), _fp()],
)


def expected_diff(fingerprints: list[dict]) -> dict[int, list[str]]:
    """Direct count per field: the reference is the most held value, ties to the lowest rank."""
    out: dict[int, list[str]] = {}
    for name in FP_FIELDS:
        values = [fp[name] for fp in fingerprints]
        best_rank, best_count = 0, -1
        for rank, value in enumerate(values):
            count = sum(1 for other in values if other == value)
            if count > best_count:  # strict: an equal count later does not replace an earlier value
                best_rank, best_count = rank, count
        for rank, value in enumerate(values):
            if value != values[best_rank]:
                out.setdefault(rank, []).append(name)
    return {rank: out[rank] for rank in sorted(out)}


def fp_strategy():
    from hypothesis import strategies as st

    fingerprint = st.builds(_fp, st.sampled_from(("ALLREDUCE", "BROADCAST", "BARRIER")),
                            st.sampled_from(((4,), (25,), (1,), (2, 3), None)),
                            st.sampled_from(("float32", "int64", None)), st.sampled_from(("cpu", "cuda:0")),
                            st.integers(0, 2))
    return st.fixed_dictionaries({"fingerprints": st.lists(fingerprint, min_size=1, max_size=6)})


def check_diff(fn, fingerprints: list[dict]) -> None:
    """10a: the learner's {rank: fields} equals the direct count's."""
    expected = expected_diff(fingerprints)
    got = fn([dict(fp) for fp in fingerprints])
    if not isinstance(got, dict):
        raise CaseFailure(f"should return a dict {{rank: [field, ...]}}, got {type(got).__name__}")
    try:
        got = {int(r): list(f) for r, f in got.items()}
    except (TypeError, ValueError):
        raise CaseFailure(f"should map int ranks to lists of field names, got {got!r}") from None
    if got == expected:
        return
    ranks = sorted(set(got) | set(expected))
    for rank in ranks:  # a wrongly accused rank first: it says the reference itself is off
        extra = [f for f in got.get(rank, []) if f not in expected.get(rank, [])]
        if extra:
            raise CaseFailure(f"you report rank {rank} as differing in {extra}, but it holds the majority value "
                              f"there (expected {expected})")
    for rank in ranks:
        want, have = expected.get(rank, []), got.get(rank, [])
        absent = [f for f in want if f not in have]
        if absent:
            raise CaseFailure(f"rank {rank} differs from the majority in {absent}, you did not report it "
                              f"(expected {expected}, got {got})")
    raise CaseFailure(f"fields should be listed in the order {list(FP_FIELDS)}: expected {expected}, got {got}")


def _fingerprints(fn):
    return run_grader("10a", "diff_fingerprints", fn, check_diff, [{"fingerprints": c} for c in FP_CASES],
                      fp_strategy(), "every differing rank and field found, nothing more")


EXERCISES = (
    Exercise("10a", "diff_fingerprints", "Who is running a different collective?", _fingerprints, (
                 "Treat each field on its own: the reference value of a field is the one most ranks hold.",
                 "Comparing everything with rank 0 fails when rank 0 is the odd one out: then every other "
                 "rank looks wrong.",
                 "Shapes (2, 3) and (3, 2) have the same number of elements and still differ; compare the "
                 "tuples. On a tie, take the value of the lowest rank among the tied ones.",
             )),
)
