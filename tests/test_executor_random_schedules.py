"""The compiled executor against a one-transfer-at-a-time interpreter, on random valid schedules.

The compiler reorders transfers into vectorised groups, reduces in place into scratch rows,
lets final copies alias the row they were copied from, and recycles scratch blocks. Random
schedules (copies and reduces, several transfers into one slot per step, values forwarded after
they became final) check all of that against the schedule's plain meaning.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.collectives import Schedule, Transfer, chunk_sizes
from ringlab.sim.executor import compile_schedule, execute


@st.composite
def schedules(draw):
    """A schedule whose every transfer reads a chunk its sender holds and reduces into one the receiver holds."""
    n = draw(st.integers(2, 6))
    c = draw(st.integers(1, 6))
    inputs = tuple(tuple(sorted(draw(st.sets(st.integers(0, c - 1), max_size=c)))) for _ in range(n))
    held = {(r, ch) for r, chunks in enumerate(inputs) for ch in chunks}
    if not held:
        held.add((0, 0))
        inputs = ((0,),) + inputs[1:]
    steps = []
    for _ in range(draw(st.integers(1, 6))):
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
    return Schedule("random", "random", n, c, tuple(steps), inputs, outputs)


def _interpret(schedule: Schedule, x: np.ndarray) -> dict:
    """Each transfer applied one at a time: sends read start-of-step values, reduces add in order."""
    bounds = np.concatenate([[0], np.cumsum(chunk_sizes(x.shape[1], schedule.num_chunks))])
    value = {(r, ch): x[r, bounds[ch]:bounds[ch + 1]].copy() for r, chunks in enumerate(schedule.inputs)
             for ch in chunks}
    for step in schedule.steps:
        before = dict(value)
        for t in step:
            sent = before[(t.src, t.chunk)]
            value[(t.dst, t.chunk)] = value[(t.dst, t.chunk)] + sent if t.reduce else sent.copy()
    return {(r, ch): value[(r, ch)] for r, chunks in enumerate(schedule.outputs) for ch in chunks}, bounds


@settings(max_examples=300, deadline=None)
@given(schedule=schedules(), numel=st.integers(0, 40), seed=st.integers(0, 2**16))
def test_compiled_plan_matches_the_one_transfer_at_a_time_meaning(schedule, numel, seed):
    x = np.random.default_rng(seed).integers(-50, 50, size=(schedule.world_size, numel), dtype=np.int64)
    want, bounds = _interpret(schedule, x)
    out = np.empty_like(x)
    sent, received, events = execute(compile_schedule(schedule, numel), x, out, np.add, trace=True)
    for (r, ch), v in want.items():
        assert (out[r, bounds[ch]:bounds[ch + 1]] == v).all(), (r, ch)
    want_sent, want_received = schedule.bytes_per_step(numel, 8)
    assert (sent == want_sent).all() and (received == want_received).all()
    assert len(events.step) == sum(len(step) for step in schedule.steps)  # local copies leave no events


@pytest.mark.parametrize("seed", range(3))
def test_torch_tensors_run_the_same_random_plans(seed):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    n, c = 4, 5
    # a fixed schedule with every feature: in-place reduces, two reduces into one slot, forwarded finals
    steps = (
        (Transfer(0, 1, 0, True), Transfer(2, 1, 0, True), Transfer(3, 2, 1, True)),
        (Transfer(1, 3, 0, True), Transfer(2, 0, 1, False)),
        (Transfer(3, 0, 0, False), Transfer(0, 1, 1, False), Transfer(3, 2, 0, False)),
        (Transfer(0, 1, 0, False), Transfer(1, 2, 1, True)),
    )
    schedule = Schedule("random", "fixed", n, c, steps, ((0, 1, 2, 3, 4),) * n, ((0, 1), (0, 1), (0, 1), (0,)))
    x = rng.integers(-50, 50, size=(n, 23), dtype=np.int64)
    want, bounds = _interpret(schedule, x)
    plan = compile_schedule(schedule, 23)
    out = torch.empty(n, 23, dtype=torch.int64)
    execute(plan, torch.from_numpy(x), out, np.add)
    for (r, ch), v in want.items():
        assert (out[r, bounds[ch]:bounds[ch + 1]].numpy() == v).all(), (r, ch)
