"""Schedules stored as arrays and rules: the readable face, traffic without data, and cluster sizes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ringlab
from ringlab.collectives import (
    ALGORITHMS,
    MAX_TABLE_CELLS,
    Holdings,
    RingPhase,
    Schedule,
    Step,
    Transfer,
    chunk_sizes,
    ring_all_reduce_schedule,
    ring_all_reduce_bytes,
)


def test_a_step_reads_back_as_transfers_one_per_chunk():
    step = Step([0, 2], [1, 0], [3, 0], [True, False], span=[1, 3])
    assert list(step) == [Transfer(0, 1, 3, True), Transfer(2, 0, 0, False), Transfer(2, 0, 1, False),
                          Transfer(2, 0, 2, False)]
    assert len(step) == 4 and step[1] == Transfer(2, 0, 0, False)
    assert step == (Transfer(0, 1, 3, True), Transfer(2, 0, 0, False), Transfer(2, 0, 1, False),
                    Transfer(2, 0, 2, False))


def test_ring_steps_are_made_on_demand_from_the_rule():
    n = 131_072
    sched = ring_all_reduce_schedule(n)  # 34 billion transfers, stored as two rules
    assert sched.num_steps == 2 * (n - 1) and len(sched.steps) == 2 * (n - 1)
    step = sched.steps[5]  # reduce-scatter step 5: rank r sends chunk (r - 5) % N
    assert isinstance(step, Step) and len(step) == n
    assert step.dst.tolist()[:3] == [1, 2, 3] and step.chunk[:3].tolist() == [(0 - 5) % n, (1 - 5) % n, (2 - 5) % n]
    last = sched.steps[-1]  # all-gather step N - 2: rank r sends chunk (r + 1 - (N - 2)) % N
    assert not last.reduce.any() and last.chunk[0] == (1 - (n - 2)) % n


def test_step_list_indexing_matches_iteration():
    sched = ALGORITHMS[("broadcast", "scatter_allgather")](7, 3)
    as_list = list(sched.steps)
    assert [list(sched.steps[i]) for i in range(len(as_list))] == [list(s) for s in as_list]
    assert [list(s) for s in sched.steps[2:5]] == [list(s) for s in as_list[2:5]]
    assert list(sched.steps[-1]) == list(as_list[-1])
    with pytest.raises(IndexError):
        sched.steps[len(as_list)]


def test_holdings_patterns_equal_the_tuples_they_stand_for():
    assert Holdings.every(3, 2) == ((0, 1),) * 3
    assert Holdings.own(4, 4, 1) == ((1,), (2,), (3,), (0,))
    assert Holdings.root(3, 2, 1) == ((), (0, 1), ())
    explicit = Holdings.explicit(3, 4, ((0, 2), (), (3,)))
    assert explicit == ((0, 2), (), (3,))
    assert explicit.contains(np.array([0, 0, 2]), np.array([2, 1, 3])).tolist() == [True, False, True]
    assert Holdings.own(5, 5).mask().sum() == 5
    with pytest.raises(ValueError, match="outside"):
        Holdings.explicit(2, 2, ((0, 2), ()))


@pytest.mark.parametrize("bad, words", [
    (Step([0], [3], [0], [True]), "invalid transfer"),
    (Step([1], [1], [0], [True]), "invalid transfer"),
    (Step([0], [1], [1], [True], span=[2]), "invalid transfer"),
    (RingPhase(3, 0, True), "ring phase"),
])
def test_invalid_steps_are_refused_with_the_offending_transfer(bad, words):
    with pytest.raises(ValueError, match=words):
        Schedule("all_reduce", "bad", 3, 2, [bad], Holdings.every(3, 2), Holdings.every(3, 2))


def test_step_arrays_must_be_integers_of_equal_length():
    with pytest.raises(TypeError, match="integers"):
        Step([0.5], [1], [0], [True])
    with pytest.raises(ValueError, match="differ in length"):
        Step([0, 1], [1], [0], [True])


@settings(max_examples=60, deadline=None)
@given(key=st.sampled_from(sorted(ALGORITHMS)), n=st.integers(1, 3000), numel=st.integers(0, 10**12),
       itemsize=st.sampled_from([1, 2, 4, 8]))
def test_counted_traffic_equals_the_closed_form_at_any_size(key, n, numel, itemsize):
    algo = ALGORITHMS[key]
    if key == ("all_reduce", "direct") and n > 300:
        n = 300  # one step of N (N - 1) transfers
    root = n // 2 if algo.rooted else 0
    sched = algo(n, root)
    assert np.array_equal(sched.bytes_sent(numel, itemsize), algo.bytes_sent(n, numel, itemsize, root))
    assert sched.bytes_received(numel, itemsize).sum() == sched.bytes_sent(numel, itemsize).sum()
    assert sched.num_steps == algo.num_steps(n)


@pytest.mark.parametrize("key", sorted(ALGORITHMS))
def test_step_bytes_agree_with_the_per_step_table(key):
    algo = ALGORITHMS[key]
    for n in (1, 2, 5, 8, 13):
        sched = algo(n, n - 1) if algo.rooted else algo(n)
        for numel in (0, 3, 4 * n + 1):
            sent, received = sched.bytes_per_step(numel, 4)
            per = sched.step_bytes(numel, 4)
            assert np.array_equal(per.total, sent.sum(1))
            assert np.array_equal(per.max_sent, sent.max(1, initial=0))
            assert np.array_equal(per.max_received, received.max(1, initial=0))


def test_per_step_tables_are_refused_past_their_cap_but_step_bytes_work():
    n = 4096
    sched = ring_all_reduce_schedule(n)
    assert sched.num_steps * n > MAX_TABLE_CELLS
    with pytest.raises(ValueError, match="step_bytes"):
        sched.bytes_per_step(n, 4)
    per = sched.step_bytes(10 * n + 3, 4)
    assert (per.total == (10 * n + 3) * 4).all() and (per.max_sent == 11 * 4).all()


def test_ring_at_cluster_scale_moves_exact_sums_and_bytes():
    n, numel = 2048, 2048 + 5  # a chunk of one or two elements per rank
    x = np.random.default_rng(3).integers(-1000, 1000, size=(n, numel)).astype(np.int64)
    res = ringlab.ring_allreduce(x)
    assert (res.outputs == x.sum(axis=0)).all()  # integers: exact whatever the order
    assert np.array_equal(res.traffic.bytes_sent, ring_all_reduce_bytes(n, numel, 8))
    assert res.traffic.per_step_sent is None  # (steps x ranks) table not kept at this size
    assert (res.traffic.step_total == numel * 8).all()
    assert (res.traffic.step_max_sent == chunk_sizes(numel, n).max() * 8).all()


def test_fewer_elements_than_ranks_moves_only_the_nonempty_chunks():
    n, numel = 1000, 37
    x = np.random.default_rng(4).integers(-9, 9, size=(n, numel)).astype(np.int32)
    res = ringlab.ring_allreduce(x)
    assert (res.outputs == x.sum(axis=0, dtype=np.int32)).all()
    assert np.array_equal(res.traffic.bytes_sent, ring_all_reduce_bytes(n, numel, 4))
