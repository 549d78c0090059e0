"""The compiled plans: final values go to the output once, transients to recycled scratch."""

import numpy as np
import pytest

from ringlab.collectives import ring_all_reduce
from ringlab.collectives.registry import ALGORITHMS, get_schedule
from ringlab.sim.executor import _OUTPUT, compile_schedule


def _output_writes(plan):
    counts = {}
    for rounds in plan.steps:
        for ops in rounds:
            for op in ops:
                if op.dst_view == _OUTPUT:
                    for r, c in op.dst_at.tolist():
                        key = (op.size_class, r, c)
                        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("collective, algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 12])
def test_every_output_chunk_is_written_at_most_once(collective, algorithm, n):
    plan = compile_schedule(get_schedule(collective, algorithm, n), 4 * n + 3)
    assert all(v == 1 for v in _output_writes(plan).values())


@pytest.mark.parametrize("n", [3, 8, 64])
def test_ring_keeps_partial_sums_in_two_small_blocks(n):
    plan = compile_schedule(ring_all_reduce(n), 10 * n)  # one size class of 10 elements per chunk
    assert plan.blocks == ((0, n),) * min(2, n - 2)  # at most two steps' worth of chunks, reused round the ring
    # each reduce-scatter step but the last writes a block; the last writes the owners' final chunks
    dst_views = [ops[0].dst_view for (ops,) in plan.steps[: n - 1]]
    assert dst_views[-1] == _OUTPUT and all(v >= 2 for v in dst_views[:-1])


@pytest.mark.parametrize("n", [2, 5, 16])
def test_ring_steps_run_as_strided_views(n):
    plan = compile_schedule(ring_all_reduce(n), 7 * n + 2)
    ops = [op for rounds in plan.steps for r in rounds for op in r]
    assert all(op.segments is not None and len(op.segments) <= 3 for op in ops)


def test_reading_a_chunk_a_rank_does_not_hold_is_refused():
    from ringlab.collectives import Schedule, Transfer

    bad = Schedule("all_gather", "bad", 2, 2, ((Transfer(0, 1, 1, False),),), ((0,), (1,)), ((0, 1),) * 2)
    with pytest.raises(ValueError, match="holds no data"):
        compile_schedule(bad, 4)


def test_values_match_direct_sum_after_recycling_blocks():
    import ringlab

    x = np.random.default_rng(1).integers(-9, 9, size=(6, 1001)).astype(np.int64)
    assert (ringlab.ring_allreduce(x).outputs == x.sum(0)).all()
