"""The per-rank plan the torch.distributed executor runs: what each rank sends, receives, and where a receive lands."""

import numpy as np
import pytest

from ringlab.collectives import Schedule, Transfer, chunk_sizes, get_schedule
from ringlab.collectives.registry import ALGORITHMS

pytest.importorskip("torch")
from ringlab.dist.executor import _rank_steps  # noqa: E402


@pytest.mark.parametrize("key", sorted(ALGORITHMS))
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_every_transfer_is_one_send_and_one_receive(key, n):
    schedule = get_schedule(*key, n)
    sizes = chunk_sizes(4 * n + 1, schedule.num_chunks)
    plans = [_rank_steps(schedule, r, sizes)[0] for r in range(n)]
    for s, step in enumerate(schedule.steps):
        want_sends = {r: [] for r in range(n)}
        want_recvs = {r: [] for r in range(n)}
        for t in step:
            want_sends[t.src].append((t.chunk, t.dst))
            want_recvs[t.dst].append((t.chunk, t.src, t.reduce))
        for r in range(n):
            assert list(plans[r][s].sends) == want_sends[r]
            assert [(x.chunk, x.peer, x.reduce) for x in plans[r][s].recvs] == want_recvs[r]


def test_a_receive_lands_in_place_only_when_no_send_or_other_receive_needs_the_old_value():
    # rank 1 receives chunk 0 (copy) while sending chunk 0, chunk 1 (copy) alone, chunk 2 twice (reduce and copy)
    step = (Transfer(0, 1, 0, False), Transfer(1, 2, 0, False), Transfer(0, 1, 1, False),
            Transfer(2, 1, 2, True), Transfer(0, 1, 2, False))
    every = (tuple(range(3)),) * 3
    schedule = Schedule("all_reduce", "probe", 3, 3, (step,), every, every)
    sizes = np.array([5, 7, 3])
    (plan,), scratch = _rank_steps(schedule, 1, sizes)
    landing = {(x.chunk, x.peer): x.scratch for x in plan.recvs}
    assert landing[(1, 0)] is None  # overwrite, not sent, sole receiver: straight into the buffer
    assert landing[(0, 0)] is not None  # chunk 0 is also being sent: the send must read the old value
    assert landing[(2, 2)] is not None and landing[(2, 0)] is not None  # two receives into chunk 2
    assert plan.sends_first  # a received chunk (0) is sent in the same step: sends finish before writes
    assert scratch == 5 + 3 + 3  # chunk 0 once, chunk 2 twice, laid end to end
    offsets = sorted(x.scratch for x in plan.recvs if x.scratch is not None)
    assert offsets == [0, 5, 8]
