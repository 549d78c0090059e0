"""Mismatched collectives: the reproducer on 4 real gloo processes, torch's DETAIL report, the guard.

One launch of 4 processes runs every multi-process case (start-up dominates: ~10-25 s on 2 cores);
each case's gloo group has a 1.5 s timeout and the launch has its own deadline.
"""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ringlab.labs.mismatch import (FIELDS, CollectiveMismatchError, Fingerprint, compare_fingerprints,
                                   describe_mismatch, run_scenarios)

pytestmark = pytest.mark.slow  # process groups that run into their timeouts: seconds each

pytest.importorskip("torch")
TIMEOUT = 1.5
CASES = [("broadcast_vs_all_reduce", "plain"), ("broadcast_vs_all_reduce", "detail"),
         ("int64_broadcast_vs_float32_all_reduce", "guard"), ("skip_barrier", "plain"), ("skip_barrier", "guard")]


@pytest.fixture(scope="module")
def outcomes():
    return run_scenarios(CASES, world_size=4, timeout=TIMEOUT)


def test_plain_mismatch_hangs_on_every_rank_until_the_timeout(outcomes):
    for scenario in ("broadcast_vs_all_reduce", "skip_barrier"):
        ranks = outcomes[(scenario, "plain")]
        assert [o.rank for o in ranks] == [0, 1, 2, 3]
        for o in ranks:
            assert o.status == "hung", (scenario, o)
            assert o.values is None and o.correct is None
            assert o.seconds >= 0.5 * TIMEOUT  # it did wait for the group's timeout ...
            assert o.seconds < 10 * TIMEOUT  # ... and not forever


def test_detail_names_the_broadcasting_rank_and_both_ops(outcomes):
    for o in outcomes[("broadcast_vs_all_reduce", "detail")]:
        assert o.status == "error"
        assert "Detected mismatch between collectives" in o.error
        assert "rank 2 BROADCAST" in o.summary and "ALLREDUCE" in o.summary


def test_guard_names_rank_2_the_ops_shape_and_dtype_on_every_rank(outcomes):
    ranks = outcomes[("int64_broadcast_vs_float32_all_reduce", "guard")]
    messages = {o.error for o in ranks}
    assert len(messages) == 1  # every rank raises the same error
    message = messages.pop()
    assert message.startswith("CollectiveMismatchError")
    assert "rank 2 differs in op, shape, dtype" in message
    assert "ALLREDUCE on ranks 0, 1, 3 vs BROADCAST on rank 2" in message
    assert "[25] on ranks 0, 1, 3 vs [1] on rank 2" in message
    assert "float32 on ranks 0, 1, 3 vs int64 on rank 2" in message


def test_guard_turns_the_skipped_barrier_into_an_error_naming_rank_3(outcomes):
    for o in outcomes[("skip_barrier", "guard")]:
        assert o.status == "error"
        assert "rank 3 differs in op" in o.error
        assert "BARRIER on ranks 0, 1, 2 vs ALLREDUCE on rank 3" in o.error


def _fp(op="ALLREDUCE", shape=(25,), dtype="float32", device="cpu", seq=0):
    return Fingerprint(seq, op, shape, dtype, device)


def test_two_ranks_tie_goes_to_rank_0_and_the_message_shows_both_values():
    fps = [_fp(), _fp("BROADCAST", (1,), "int64")]
    assert compare_fingerprints(fps) == {1: ("op", "shape", "dtype")}
    text = describe_mismatch(fps)
    assert "op: ALLREDUCE on rank 0 vs BROADCAST on rank 1" in text
    assert "shape: [25] on rank 0 vs [1] on rank 1" in text
    assert str(CollectiveMismatchError(fps)) == text


def test_odd_rank_0_is_named_not_the_majority():
    assert compare_fingerprints([_fp("BROADCAST"), _fp(), _fp(), _fp()]) == {0: ("op",)}


def test_same_numel_different_shape_and_mappings_are_accepted():
    fps = [_fp(shape=(2, 3)).as_dict(), _fp(shape=(3, 2)).as_dict(), _fp(shape=(2, 3)).as_dict()]
    assert compare_fingerprints(fps) == {1: ("shape",)}


def test_fingerprint_of_rejects_unknown_ops():
    with pytest.raises(ValueError, match="ALLREDUCE"):
        Fingerprint.of(0, "all_reduce")


def test_run_scenarios_rejects_bad_arguments():
    with pytest.raises(ValueError, match="scenario"):
        run_scenarios([("nope", "plain")])
    with pytest.raises(ValueError, match="mode"):
        run_scenarios([("skip_barrier", "loud")])
    with pytest.raises(ValueError, match="world_size"):
        run_scenarios([("skip_barrier", "plain")], world_size=1)


values = st.sampled_from(["ALLREDUCE", "BROADCAST"])


@given(st.lists(st.tuples(values, st.sampled_from([(1,), (25,)])), min_size=1, max_size=7))
def test_agreeing_ranks_are_never_named_and_the_majority_is_never_named(pairs):
    fps = [_fp(op, shape) for op, shape in pairs]
    diffs = compare_fingerprints(fps)
    for name in ("op", "shape"):
        held = [getattr(fp, name) for fp in fps]
        named = {r for r, fields in diffs.items() if name in fields}
        top = max(held.count(v) for v in held)
        assert len(named) == len(held) - top  # exactly the ranks outside the reference group
        assert all(held.count(held[r]) <= top for r in named)
    assert all(set(fields) <= set(FIELDS) for fields in diffs.values())


def test_a_skipped_collective_is_named_with_its_number_and_a_hint():
    fps = [_fp("BARRIER", None, None, None, seq=3)] * 3 + [_fp(seq=3)]
    text = describe_mismatch(fps)
    assert ("rank 3 is at collective #3 (ALLREDUCE) while ranks 0, 1, 2 are at collective #3 (BARRIER)" in text)
    assert "rank 3 probably skipped a BARRIER" in text


class _FakeDevice:
    def __init__(self, text):
        self.type = text.split(":")[0]
        self._text = text

    def __str__(self):
        return self._text


class _FakeTensor:
    def __init__(self, device, shape=(4,), dtype="torch.float32"):
        self.device, self.shape, self.dtype = _FakeDevice(device), shape, dtype


def test_ranks_on_different_gpus_agree_but_cpu_against_cuda_differs():
    """Rank r drives cuda:r, so the device index is not compared; the device type is (as torch's check does)."""
    gpus = [Fingerprint.of(0, "ALLREDUCE", _FakeTensor(f"cuda:{r}")) for r in range(4)]
    assert {fp.device for fp in gpus} == {"cuda"} and compare_fingerprints(gpus) == {}
    mixed = gpus[:3] + [Fingerprint.of(0, "ALLREDUCE", _FakeTensor("cpu"))]
    assert compare_fingerprints(mixed) == {3: ("device",)}
    assert "device: cuda on ranks 0, 1, 2 vs cpu on rank 3" in describe_mismatch(mixed)
