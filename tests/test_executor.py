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
def test_ring_keeps_partial_sums_in_one_block_and_forwards_finals_from_it(n):
    plan = compile_schedule(ring_all_reduce(n), 10 * n)  # one size class of 10 elements per chunk
    assert plan.blocks == ((0, n),)  # one row per chunk, reused round the ring
    ops = [list(ops) for (ops,) in plan.steps]
    rs, ag = ops[: n - 1], ops[n - 1:]
    # the first step fills the block; later ones add into the row of the partial they receive
    assert len(rs[0]) == 1 and rs[0][0].dst_view == 2
    for step in rs[1:]:
        op = step[0]
        assert op.reduce and op.src_view == op.dst_view == 2 and (op.src_at == op.dst_at).all()
    # the last one also copies each owner's final chunk into the output, locally (no traffic)
    assert [op.local for op in rs[-1]] == [False, True] and rs[-1][1].dst_view == _OUTPUT
    assert all(len(step) == 1 and not op.local for step in rs[:-1] for op in step)
    # all-gather forwards every chunk from its row in the block and writes only the output
    for (op,) in ag:
        assert not op.reduce and op.src_view == 2 and op.dst_view == _OUTPUT


def test_local_copies_move_no_bytes_and_leave_no_events():
    import ringlab

    x = np.arange(5 * 12, dtype=np.float64).reshape(5, 12)
    res = ringlab.ring_allreduce(x, trace=True)
    assert int(res.traffic.bytes_sent.sum()) == 2 * 4 * x[0].nbytes  # 2(N-1) messages of M/N bytes each
    assert len(res.events.step) == 2 * 4 * 5  # one event per transfer: N per step
    assert (res.outputs == x.sum(0)).all()


@pytest.mark.parametrize("collective, algorithm", sorted(ALGORITHMS))
@pytest.mark.parametrize("n", [3, 6, 8])
def test_in_place_rows_have_no_other_reader_in_their_round(collective, algorithm, n):
    """An op that writes a scratch row it reads must be that row's only reader in its round.

    (A later round of the same step may read it: that is the schedule's own order. So may the
    local copy of a final value into the output, which runs right after it.)"""
    plan = compile_schedule(get_schedule(collective, algorithm, n), 4 * n + 3)
    for ops in (ops for rounds in plan.steps for ops in rounds):
        for op in ops:
            if op.dst_view < 2 or op.dst_view != op.src_view:
                continue
            mine = {(op.size_class, tuple(at)) for at in op.dst_at.tolist()}
            assert len(mine) == len(op.dst_at)
            for other in ops:
                reads = [(other.src_view, other.src_at)] + ([(other.base_view, other.base_at)] if other.reduce else [])
                for view, at in reads:
                    if view == op.dst_view and other is not op and mine & {(other.size_class, tuple(a))
                                                                            for a in at.tolist()}:
                        # only the local copy of a final value into the output, run after it
                        order = [id(o) for o in ops]
                        assert other.local and order.index(id(other)) > order.index(id(op))


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


def _layouts():
    """The same (5, 37) float32 message held in memory six different ways."""
    x = np.random.default_rng(7).standard_normal((5, 37)).astype(np.float32)
    big = np.zeros((9, 80), dtype=np.float32)
    big[2:7, 5:42] = x
    readonly = x.copy()
    readonly.flags.writeable = False
    return x, {
        "contiguous": x,
        "slice of a larger array": big[2:7, 5:42],  # a view at an offset inside its owner
        "fortran order": np.asfortranarray(x),
        "every other column": np.repeat(x, 2, axis=1)[:, ::2],
        "read only": readonly,
        "transposed twice": x.T.copy().T,
    }


@pytest.mark.parametrize("layout", list(_layouts()[1]))
@pytest.mark.parametrize("collective, algorithm", [("all_reduce", "ring"), ("all_reduce", "double_binary_tree"),
                                                   ("reduce_scatter", "recursive_halving")])
def test_every_memory_layout_gives_the_contiguous_result_bit_for_bit(layout, collective, algorithm):
    from ringlab.sim.collectives import run_collective

    x, layouts = _layouts()
    want = run_collective(collective, algorithm, x)
    got = run_collective(collective, algorithm, layouts[layout])
    bits = [np.concatenate([np.ravel(a) for a in res.outputs]).view(np.uint32) for res in (got, want)]
    assert np.array_equal(*bits)
    assert (got.traffic.bytes_sent == want.traffic.bytes_sent).all()
    reduced = want.outputs if collective == "all_reduce" else np.concatenate(want.outputs)  # rank r: chunk r
    assert np.allclose(reduced, x.astype(np.float64).sum(0), atol=1e-5)
