"""The in-process ring that grades 01c: ranks as threads, one ``exchange`` per step. Calls that do not match
across ranks are named from the counts, never found by a timeout (so a busy machine cannot fake a hang)."""

from __future__ import annotations

import numpy as np
import pytest

from ringlab.check.engine import CaseFailure
from ringlab.check.graders.ring_allreduce import run_per_rank


def _arrays(n):
    return [np.arange(4, dtype=np.float64) + r for r in range(n)]


@pytest.mark.parametrize("world_size", [2, 3, 5])
@pytest.mark.parametrize("extra_rank", [0, -1])
def test_one_rank_calling_once_more_is_named_not_timed_out(world_size, extra_rank):
    extra_rank %= world_size

    def fn(rank, n, data, exchange):
        for _ in range(n - 1 + (rank == extra_rank)):
            data = exchange(data)
        return data

    with pytest.raises(CaseFailure, match="different numbers of times") as info:
        run_per_rank(fn, world_size, _arrays(world_size), timeout=3600)  # only the counts can end this
    assert f"rank {extra_rank}: {world_size}" in str(info.value)


@pytest.mark.parametrize("world_size", [2, 4])
def test_one_rank_returning_early_is_named(world_size):
    def fn(rank, n, data, exchange):
        for _ in range(0 if rank == 1 else n - 1):
            data = exchange(data)
        return data

    with pytest.raises(CaseFailure, match="rank 1: 0"):
        run_per_rank(fn, world_size, _arrays(world_size), timeout=3600)


@pytest.mark.parametrize("world_size", [1, 2, 3, 7])
def test_matched_calls_pass_the_left_neighbours_data(world_size):
    def fn(rank, n, data, exchange):
        return exchange(data) if n > 1 else data

    results, ring = run_per_rank(fn, world_size, _arrays(world_size), timeout=3600)
    for r in range(world_size):
        np.testing.assert_array_equal(results[r], _arrays(world_size)[(r - 1) % world_size])
    assert len(set(ring.calls)) == 1
