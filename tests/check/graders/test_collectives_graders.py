"""02a / 02b graders: correct variants pass, and the grader's closed forms agree with counted bytes."""

import numpy as np
import pytest

from ringlab.check import grade
from ringlab.check.graders.collectives_and_costs import COLLECTIVES, expected_traffic
from ringlab.collectives import Schedule, Transfer, replay
from ringlab.collectives.cost import bus_factor
from ringlab.sim.runner import run_collective


def _held_so_far_descending(world_size):
    """Distance halving (N/2, N/4, ..., 1), each rank sending every chunk it holds: also correct."""
    held = [{r} for r in range(world_size)]
    steps, distance = [], world_size // 2
    while distance:
        step = [(r, r ^ distance, c) for r in range(world_size) for c in sorted(held[r])]
        for src, dst, c in step:
            held[dst].add(c)
        steps.append(step)
        distance //= 2
    return steps


def test_descending_distances_pass_when_sending_what_is_held():
    assert grade("02a", _held_so_far_descending).status == "passed"


def test_bruck_style_shift_is_not_pairwise():
    def bruck(n):  # log2 N steps, right bytes, but sends to r - 2**k and receives from r + 2**k
        held = [[r] for r in range(n)]
        steps, d = [], 1
        while d < n:
            step = [(r, (r - d) % n, c) for r in range(n) for c in held[r]]
            for src, dst, c in step:
                held[dst].append(c)
            steps.append(step)
            d *= 2
        return steps

    result = grade("02a", bruck)
    assert result.status == "wrong" and "single partner" in result.message


@pytest.mark.parametrize("bad, words", [
    (lambda n: None, "list of steps"),
    (lambda n: [[(0, 0, 0)]] if n > 1 else [], "to itself"),
    (lambda n: [[(0, 1)]] if n > 1 else [], "three ints"),
    (lambda n: [[(0, n, 0)]] if n > 1 else [], "numbered"),
    (lambda n: [[(r, r ^ 1, r) for r in range(n)]] * 5 if n > 1 else [], "log2"),
])
def test_malformed_schedules_are_explained(bad, words):
    result = grade("02a", bad)
    assert result.status == "wrong" and words in result.message, result.message


def test_resending_a_chunk_shows_a_traffic_table():
    def twice(n):  # correct, but re-sends its own chunk at every step after the first
        steps, d = [], 1
        while d < n:
            start = lambda r: r - r % d  # noqa: E731
            step = [(r, r ^ d, c) for r in range(n) for c in range(start(r), start(r) + d)]
            if d > 1:
                step += [(r, r ^ d, r) for r in range(n)]
            steps.append(step)
            d *= 2
        return steps

    result = grade("02a", twice)
    assert result.status == "wrong" and "expected (N - 1) / N" in result.message
    assert result.traffic and not all(row.ok for row in result.traffic)


@pytest.mark.parametrize("world_size", [1, 2, 3, 5, 8, 12])
@pytest.mark.parametrize("collective, algorithm", [("all_reduce", "ring"), ("reduce_scatter", "ring"),
                                                   ("all_gather", "ring"), ("all_to_all", "pairwise")])
def test_closed_forms_equal_the_simulators_counted_bytes(collective, algorithm, world_size):
    numel = 6 * world_size  # N divides the message, as the exercise assumes
    x = np.arange(world_size * numel, dtype=np.float32).reshape(world_size, numel)
    inputs = list(np.split(x.reshape(-1)[:numel], world_size)) if collective == "all_gather" else x
    counted = run_collective(collective, algorithm, inputs).traffic.bytes_sent
    want_bytes, want_factor, _ = expected_traffic(collective, world_size, numel * 4)
    assert int(counted.max()) == want_bytes
    assert want_factor == pytest.approx(bus_factor(collective, world_size))


def _chain(world_size, root, reduce):
    """Pipelined chain in ring order from the root (broadcast) or towards it (reduce), k pieces."""
    k, n = 3, world_size
    order = [(root + i) % n for i in range(n)]
    hops = list(zip(order, order[1:]))
    if reduce:
        hops = [(b, a) for a, b in reversed(hops)]
    steps = [tuple(Transfer(src, dst, piece, reduce) for h, (src, dst) in enumerate(hops)
                   for piece in range(k) if h + piece == s) for s in range(len(hops) + k - 1)]
    every = (tuple(range(k)),) * n
    return Schedule("reduce" if reduce else "broadcast", "chain", n, k, tuple(steps),
                    every if reduce else tuple(every[0] if r == root else () for r in range(n)), every)


@pytest.mark.parametrize("collective", ["broadcast", "reduce"])
@pytest.mark.parametrize("world_size", [1, 2, 5, 8])
def test_chain_broadcast_and_reduce_put_the_message_on_each_link_once(collective, world_size):
    root = world_size // 2
    sched = _chain(world_size, root, collective == "reduce")
    final = list(replay(sched))[-1]
    ranks = range(world_size) if collective == "broadcast" else [root]
    want_holds = np.zeros(world_size, np.int64)
    if collective == "broadcast":
        want_holds[root] = 1
    else:
        want_holds[:] = 1
    assert all((final[r, p] == want_holds).all() for r in ranks for p in range(3))
    m = 3 * 1000 * 4  # 3 pieces of 1000 float32
    sent = sched.bytes_sent(3 * 1000, 4)
    assert int(sent.max()) == expected_traffic(collective, world_size, m)[0]
    assert int((sent == m).sum()) == world_size - 1  # every rank but one sends M


def test_expected_traffic_covers_every_collective():
    assert set(COLLECTIVES) == {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all"}
    assert expected_traffic("broadcast", 1, 4) == (0, 1.0, "M for every rank but one")
