"""The compiled executor against the one-transfer-at-a-time interpreter (ringlab.sim.interpret), on random schedules.

Random valid schedules mix explicit steps (copies and reduces, several transfers into one slot,
blocks of chunks, values forwarded after they became final) with ring phases placed between them,
so that every path of the plan runs: carry reads from the input and from ``out``, stored and
elided ring writes, gathered steps, steps applied slice by slice (``DIRECT_CHUNK`` lowered so
small chunks take it), empty chunks, and ``inputs=None``. Values, per-step bytes and events
must equal the interpreter's.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.collectives import RingPhase, Schedule, Step, Transfer, chunk_bounds
from ringlab.sim import plan as plan_module
from ringlab.sim.executor import execute
from ringlab.sim.interpret import interpret
from ringlab.sim.plan import RingPlan, compile_schedule


@st.composite
def schedules(draw):
    """A schedule whose every transfer reads a chunk its sender holds and reduces into one the receiver holds."""
    n = draw(st.integers(2, 6))
    ring = draw(st.booleans())  # ring phases need num_chunks == world_size
    c = n if ring else draw(st.integers(1, 6))
    inputs = tuple(tuple(sorted(draw(st.sets(st.integers(0, c - 1), max_size=c)))) for _ in range(n))
    if ring:  # a ring phase reads every chain's first holder: start with everything held
        inputs = (tuple(range(c)),) * n
    held = {(r, ch) for r, chunks in enumerate(inputs) for ch in chunks}
    if not held:
        held.add((0, 0))
        inputs = ((0,),) + inputs[1:]
    steps = []
    for _ in range(draw(st.integers(1, 5))):
        if ring and draw(st.booleans()):
            phase = RingPhase(draw(st.integers(1, n - 1)), draw(st.integers(-n, n)), draw(st.booleans()))
            steps.append(phase)
            continue
        start = sorted(held)
        step = []
        for _ in range(draw(st.integers(1, 2 * n))):
            src, ch = draw(st.sampled_from(start))
            dst = draw(st.sampled_from([r for r in range(n) if r != src]))
            reduce = (dst, ch) in held and draw(st.booleans())
            step.append(Transfer(src, dst, ch, reduce))
            held.add((dst, ch))
        steps.append(tuple(step))
    by_rank = [sorted(ch for r, ch in held if r == rank) for rank in range(n)]
    outputs = tuple(tuple(sorted(draw(st.sets(st.sampled_from(chs), max_size=len(chs))))) if chs else ()
                    for chs in by_rank)
    return Schedule("random", "random", n, c, steps, inputs, outputs)


def _check(schedule, x, out, counts, events, ufunc=np.add):
    want, sent, received = interpret(schedule, x, ufunc)
    bounds = chunk_bounds(x.shape[1], schedule.num_chunks)
    for (r, ch), v in want.items():
        assert np.array_equal(np.asarray(out[r])[bounds[ch]:bounds[ch + 1]], v), (r, ch)
    assert np.array_equal(counts.per_step_sent, sent) and np.array_equal(counts.per_step_received, received)
    assert np.array_equal(counts.bytes_sent, sent.sum(0))
    assert np.array_equal(counts.step_total, sent.sum(1))
    assert np.array_equal(counts.step_max_sent, sent.max(1, initial=0))
    if events is not None:
        assert len(events.step) == sum(len(step) for step in schedule.steps)
        assert np.array_equal(np.bincount(events.step, events.nbytes, minlength=len(sent)), sent.sum(1))


@settings(max_examples=300, deadline=None)
@given(schedule=schedules(), numel=st.integers(0, 40), seed=st.integers(0, 2**16), direct=st.booleans(),
       op=st.sampled_from([np.add, np.maximum]))
def test_compiled_plan_matches_the_one_transfer_at_a_time_meaning(schedule, numel, seed, direct, op):
    x = np.random.default_rng(seed).integers(-50, 50, size=(schedule.world_size, numel), dtype=np.int64)
    out = np.full_like(x, 12345)
    old = plan_module.DIRECT_CHUNK
    plan_module.DIRECT_CHUNK = 1 if direct else old  # force slice-by-slice steps on small chunks too
    try:
        plan = compile_schedule(schedule, numel)
    finally:
        plan_module.DIRECT_CHUNK = old
    counts, events = execute(plan, x, out, op, trace=True)
    _check(schedule, x, out, counts, events, op)


@settings(max_examples=100, deadline=None)
@given(schedule=schedules(), numel=st.integers(0, 30), seed=st.integers(0, 2**16))
def test_output_buffer_holding_the_inputs_gives_the_same_result(schedule, numel, seed):
    """``inputs=None`` (all-gather's path): ``out`` starts as the input and is read where nothing wrote yet."""
    x = np.random.default_rng(seed).integers(-50, 50, size=(schedule.world_size, numel), dtype=np.int64)
    out = x.copy()
    counts, _ = execute(compile_schedule(schedule, numel), None, out, np.add)
    _check(schedule, x, out, counts, None)


def test_every_plan_path_is_reached():
    """The strategy above reaches each path: ring phases storing and eliding, carries from out, both step kinds."""
    n = 4
    every = (tuple(range(n)),) * n
    steps = [(Transfer(0, 1, 2, True), Transfer(3, 1, 2, True)), RingPhase(2, 1, True), RingPhase(3, 0, False),
             Step([1, 2], [0, 3], [0, 1], [False, True], [2, 1])]
    schedule = Schedule("random", "mixed", n, n, steps, every, every)
    plan = compile_schedule(schedule, 4 * 1000)
    rings = [p for p in plan.phases if isinstance(p, RingPlan)]
    segs = [seg for ring in rings for step in ring.steps for seg in step]
    assert any(s.store for s in segs) and any(not s.store for s in segs)
    assert any(s.from_out for ring in rings for s in ring.init)
    x = np.random.default_rng(0).integers(-9, 9, size=(n, 4000))
    out = np.empty_like(x)
    counts, events = execute(plan, x, out, np.add, trace=True)
    _check(schedule, x, out, counts, events)


@pytest.mark.parametrize("seed", range(3))
def test_torch_tensors_run_the_same_random_plans(seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    n = 5
    # a fixed schedule with every feature: two reduces into one slot, forwarded finals, blocks, a ring between
    steps = (
        (Transfer(0, 1, 0, True), Transfer(2, 1, 0, True), Transfer(3, 2, 1, True)),
        RingPhase(3, 2, True),
        (Transfer(1, 3, 0, True), Transfer(2, 0, 1, False)),
        Step([3, 0], [0, 1], [0, 1], [False, False], [1, 3]),
        RingPhase(4, 0, False),
        (Transfer(0, 1, 0, False), Transfer(1, 2, 1, True)),
    )
    schedule = Schedule("random", "fixed", n, n, steps, ((0, 1, 2, 3, 4),) * n,
                        ((0, 1), (0, 1), (0, 1), (0,), (2, 3)))
    for numel in (23, 2):
        x = rng.integers(-50, 50, size=(n, numel), dtype=np.int64)
        out = torch.empty(n, numel, dtype=torch.int64)
        counts, _ = execute(compile_schedule(schedule, numel), torch.from_numpy(x), out, np.add)
        _check(schedule, x, out.numpy(), counts, None)
