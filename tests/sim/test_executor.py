"""The compiled plans: a ring's partial sums stay in the carry, each output chunk is written once."""

import numpy as np
import pytest

from ringlab.collectives import ring_all_reduce_schedule
from ringlab.collectives.registry import ALGORITHMS, get_schedule
from ringlab.sim.plan import RingPlan, compile_schedule


def _stored_slots(plan, n):
    slots = []
    for ring in (p for p in plan.phases if isinstance(p, RingPlan)):
        for j, segs in enumerate(ring.steps, start=1):
            for seg in segs:
                if seg.store:
                    k = np.arange(seg.k0, seg.k0 + seg.length) + plan.classes[seg.cls].first
                    slots += list(zip(((k - ring.phase.offset + j) % n).tolist(), k.tolist()))
    return slots


@pytest.mark.parametrize("n", [2, 3, 8, 64])
@pytest.mark.parametrize("extra", [0, 1])
def test_ring_all_reduce_writes_every_output_chunk_exactly_once(n, extra):
    plan = compile_schedule(ring_all_reduce_schedule(n), 10 * n + extra)  # extra: two size classes
    slots = _stored_slots(plan, n)
    assert len(slots) == len(set(slots)) == n * n  # no partial sum ever reaches the output array
    rs, ag = plan.phases
    assert all(not seg.store for step in rs.steps[:-1] for seg in step)  # partial sums stay in the carry
    assert all(seg.store for seg in rs.steps[-1]) and all(seg.store for step in ag.steps for seg in step)
    assert not any(seg.from_out for seg in rs.init) and all(seg.from_out for seg in ag.init)


@pytest.mark.parametrize("n", [2, 5, 16, 1000])
def test_ring_steps_are_a_few_strided_runs(n):
    """A ring step is at most two runs per size class (the diagonal wraps once): O(1) numpy calls per step."""
    plan = compile_schedule(ring_all_reduce_schedule(n), 7 * n + 2)
    assert all(len(step) <= 4 for ring in plan.phases for step in ring.steps)


def test_trace_has_one_event_per_transfer():
    import ringlab

    x = np.arange(5 * 12, dtype=np.float64).reshape(5, 12)
    res = ringlab.ring_allreduce(x, trace=True)
    assert int(res.traffic.bytes_sent.sum()) == 2 * 4 * x[0].nbytes  # 2(N-1) messages of M/N bytes each
    assert len(res.events.step) == 2 * 4 * 5  # one event per transfer: N per step
    assert (res.outputs == x.sum(0)).all()


def test_reading_a_chunk_a_rank_does_not_hold_is_refused():
    from ringlab.collectives import Schedule, Transfer

    bad = Schedule("all_gather", "bad", 2, 2, ((Transfer(0, 1, 1, False),),), ((0,), (1,)), ((0, 1),) * 2)
    with pytest.raises(ValueError, match="holds no data"):
        compile_schedule(bad, 4)


@pytest.mark.parametrize("collective, algorithm", sorted(ALGORITHMS))
def test_compile_refuses_nothing_the_registry_builds(collective, algorithm):
    for n in (1, 2, 3, 7, 8):
        for numel in (0, 1, n + 1):
            compile_schedule(get_schedule(collective, algorithm, n), numel)


def test_values_match_direct_sum_with_two_size_classes():
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
    from ringlab.sim.runner import run_collective

    x, layouts = _layouts()
    want = run_collective(collective, algorithm, x)
    got = run_collective(collective, algorithm, layouts[layout])
    bits = [np.concatenate([np.ravel(a) for a in res.outputs]).view(np.uint32) for res in (got, want)]
    assert np.array_equal(*bits)
    assert (got.traffic.bytes_sent == want.traffic.bytes_sent).all()
    reduced = want.outputs if collective == "all_reduce" else np.concatenate(want.outputs)  # rank r: chunk r
    assert np.allclose(reduced, x.astype(np.float64).sum(0), atol=1e-5)


def test_large_blocks_run_as_slices_and_swaps_read_a_snapshot():
    from ringlab.sim.plan import DIRECT_CHUNK, ExplicitStep

    n = 8
    plan = compile_schedule(get_schedule("all_reduce", "recursive_doubling", n), 2 * DIRECT_CHUNK)
    steps = [p for p in plan.phases if isinstance(p, ExplicitStep)]
    assert all(st.slices and not st.groups for st in steps)
    # ranks swap whole messages in pairs; the second of each pair sends what the first already overwrote
    assert all(len(st.snapshots) == n // 2 and sum(sl.snap >= 0 for sl in st.slices) == n // 2 for st in steps)
    halving = compile_schedule(get_schedule("reduce_scatter", "recursive_halving", n), n * DIRECT_CHUNK)
    first = next(p for p in halving.phases if isinstance(p, ExplicitStep))
    assert len(first.slices) == n and not first.snapshots  # one block of N/2 chunks per rank, no overlap
    x = np.random.default_rng(2).integers(-9, 9, size=(n, 2 * DIRECT_CHUNK))
    from ringlab.sim.runner import run_collective

    assert (run_collective("all_reduce", "recursive_doubling", x).outputs == x.sum(0)).all()
