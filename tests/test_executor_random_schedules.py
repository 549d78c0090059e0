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

from ringlab.collectives import Schedule, Transfer
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
    """Each transfer applied one at a time: sends read start-of-step values, reduces add in order.

    Chunks come straight from ``numpy.array_split`` (the layout's definition). Returns the final
    value of every output slot."""
    value = {(r, ch): np.array_split(x[r], schedule.num_chunks)[ch].copy()
             for r, chunks in enumerate(schedule.inputs) for ch in chunks}
    for step in schedule.steps:
        before = dict(value)
        for t in step:
            sent = before[(t.src, t.chunk)]
            value[(t.dst, t.chunk)] = value[(t.dst, t.chunk)] + sent if t.reduce else sent.copy()
    return {(r, ch): value[(r, ch)] for r, chunks in enumerate(schedule.outputs) for ch in chunks}


def _same(out, want: dict, num_chunks: int) -> None:
    for (r, ch), v in want.items():
        assert (np.array_split(np.asarray(out[r]), num_chunks)[ch] == v).all(), (r, ch)


@settings(max_examples=300, deadline=None)
@given(schedule=schedules(), numel=st.integers(0, 40), seed=st.integers(0, 2**16))
def test_compiled_plan_matches_the_one_transfer_at_a_time_meaning(schedule, numel, seed):
    x = np.random.default_rng(seed).integers(-50, 50, size=(schedule.world_size, numel), dtype=np.int64)
    out = np.empty_like(x)
    sent, received, events = execute(compile_schedule(schedule, numel), x, out, np.add, trace=True)
    _same(out, _interpret(schedule, x), schedule.num_chunks)
    sizes = np.array([len(a) for a in np.array_split(np.empty(numel), schedule.num_chunks)]) * 8
    want_sent = np.zeros_like(sent)
    want_received = np.zeros_like(received)
    for s, step in enumerate(schedule.steps):
        for t in step:
            want_sent[s, t.src] += sizes[t.chunk]
            want_received[s, t.dst] += sizes[t.chunk]
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
    out = torch.empty(n, 23, dtype=torch.int64)
    execute(compile_schedule(schedule, 23), torch.from_numpy(x), out, np.add)
    _same(out.numpy(), _interpret(schedule, x), c)
