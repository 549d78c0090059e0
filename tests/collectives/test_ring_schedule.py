"""The ring schedules as data: rotation, step counts, symbolic correctness, closed-form bytes."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.collectives import (
    Schedule,
    Transfer,
    chunk_bounds,
    chunk_sizes,
    replay,
    ring_all_gather_schedule,
    ring_all_gather_bytes,
    ring_all_reduce_schedule,
    ring_all_reduce_bytes,
    ring_reduce_scatter_schedule,
    ring_busiest_bytes,
    ring_reduce_scatter_bytes,
)

WORLD_SIZES = [1, 2, 3, 4, 5, 7, 8, 13, 16]


def test_chunk_sizes_follow_array_split():
    for numel in [0, 1, 6, 7, 8, 1_000_003]:
        for n in [1, 2, 3, 7, 8]:
            expected = [len(part) for part in np.array_split(np.arange(numel), n)]
            assert chunk_sizes(numel, n).tolist() == expected
            parts = np.array_split(np.arange(numel), n)  # chunk k starts at its first element's index
            bounds = chunk_bounds(numel, n)
            assert all(p.tolist() == list(range(bounds[k], bounds[k + 1])) for k, p in enumerate(parts))
            assert bounds[-1] == numel and all(isinstance(b, int) for b in bounds)


@pytest.mark.parametrize("bad", [(-1, 2), (4, 0)])
def test_chunk_sizes_refuses_bad_arguments(bad):
    with pytest.raises(ValueError):
        chunk_sizes(*bad)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_reduce_rotation_is_the_documented_one(n):
    sched = ring_all_reduce_schedule(n)
    assert sched.num_steps == 2 * (n - 1)
    for s, step in enumerate(sched.steps):
        assert len(step) == n  # every link busy every step
        for t in step:
            assert t.dst == (t.src + 1) % n
            if s < n - 1:
                assert t.reduce and t.chunk == (t.src - s) % n
            else:
                assert not t.reduce and t.chunk == (t.src + 1 - (s - (n - 1))) % n


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_all_reduce_replay_folds_every_rank_exactly_once(n):
    *_, final = replay(ring_all_reduce_schedule(n))
    assert (final == 1).all()


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_reduce_scatter_and_all_gather_placement(n):
    *_, rs = replay(ring_reduce_scatter_schedule(n))
    for r in range(n):
        assert (rs[r, r] == 1).all()  # rank r owns the reduced chunk r, as in torch.distributed
    *_, ag = replay(ring_all_gather_schedule(n))
    for r in range(n):
        for c in range(n):
            assert ag[r, c].tolist() == [int(k == c) for k in range(n)]  # chunk c came from rank c


def test_after_reduce_scatter_phase_rank_r_holds_chunk_r_plus_1():
    n = 6
    states = list(replay(ring_all_reduce_schedule(n)))
    mid = states[n - 1]
    for r in range(n):
        assert (mid[r, (r + 1) % n] == 1).all()


def _bytes_by_enumeration(n, numel, itemsize, chunk_rule, steps):
    """Walk the rotation rule step by step, independently of ring.py's formula."""
    sizes = [len(p) for p in np.array_split(np.arange(numel), n)]
    return [itemsize * sum(sizes[chunk_rule(r, s)] for s in range(steps)) for r in range(n)]


@given(n=st.integers(1, 40), numel=st.integers(0, 500), itemsize=st.sampled_from([1, 2, 4, 8]))
def test_closed_forms_match_enumeration(n, numel, itemsize):
    def ar(r, s):
        return (r - s) % n if s < n - 1 else (r + 1 - (s - n + 1)) % n

    assert ring_all_reduce_bytes(n, numel, itemsize).tolist() == _bytes_by_enumeration(n, numel, itemsize, ar, 2 * (n - 1))
    assert ring_reduce_scatter_bytes(n, numel, itemsize).tolist() == _bytes_by_enumeration(
        n, numel, itemsize, lambda r, s: (r - 1 - s) % n, n - 1)
    assert ring_all_gather_bytes(n, numel, itemsize).tolist() == _bytes_by_enumeration(
        n, numel, itemsize, lambda r, s: (r - s) % n, n - 1)
    assert ring_all_reduce_bytes(n, numel, itemsize).sum() == 2 * (n - 1) * numel * itemsize


@given(n=st.integers(1, 64), per_rank=st.integers(0, 50), itemsize=st.sampled_from([1, 2, 4]))
def test_all_reduce_bytes_reach_the_bound_when_n_divides_numel(n, per_rank, itemsize):
    numel = n * per_rank
    nbytes = numel * itemsize
    assert (ring_all_reduce_bytes(n, numel, itemsize) * n == 2 * (n - 1) * nbytes).all()


@pytest.mark.parametrize("n", [1, 3, 8])
def test_schedule_bytes_agree_with_closed_form(n):
    for numel in [0, 1, n + 1, 1000]:
        assert ring_all_reduce_schedule(n).bytes_sent(numel, 4).tolist() == ring_all_reduce_bytes(n, numel, 4).tolist()


@pytest.mark.parametrize("bad", [0, -3])
def test_world_size_must_be_positive(bad):
    with pytest.raises(ValueError, match="world_size"):
        ring_all_reduce_schedule(bad)


@pytest.mark.parametrize("bad", [2.0, "4", True])
def test_world_size_must_be_an_int(bad):
    with pytest.raises(TypeError, match="world_size"):
        ring_all_reduce_schedule(bad)


def test_schedule_rejects_out_of_range_transfers():
    with pytest.raises(ValueError, match="invalid transfer"):
        Schedule("all_reduce", "bad", 2, 2, ((Transfer(0, 2, 0, True),),), ((0, 1),) * 2, ((0, 1),) * 2)


@settings(max_examples=300, deadline=None)
@given(collective=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather"]), n=st.integers(1, 200),
       numel=st.integers(0, 5000), itemsize=st.sampled_from([1, 2, 4, 8]))
def test_ring_busiest_bytes_is_the_max_of_the_per_rank_closed_form(collective, n, numel, itemsize):
    per_rank = {"all_reduce": ring_all_reduce_bytes, "reduce_scatter": ring_reduce_scatter_bytes,
                "all_gather": ring_all_gather_bytes}[collective](n, numel, itemsize)
    assert ring_busiest_bytes(collective, n, numel, itemsize) == int(per_rank.max())


def test_ring_busiest_bytes_refuses_other_collectives_and_negative_sizes():
    with pytest.raises(ValueError, match="collective must be one of all_reduce"):
        ring_busiest_bytes("broadcast", 4, 10, 1)
    with pytest.raises(ValueError, match="numel"):
        ring_busiest_bytes("all_gather", 4, -1, 1)
