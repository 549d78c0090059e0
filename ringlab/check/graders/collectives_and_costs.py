"""Graders for topic 02, collectives and their costs (card 02).

* 02a ``recursive_doubling_all_gather(world_size) -> steps``: the learner's transfers become a
  :class:`~ringlab.collectives.Schedule` that is replayed symbolically: pairwise exchanges, no rank
  sends a chunk before it holds it, every rank ends with every chunk copied from its owner, log2 N
  steps and (N - 1) / N x M bytes per rank. Any order of the distances passes (the exchanges are the
  dimensions of a hypercube).
* 02b ``collective_traffic(collective, world_size, message_bytes) -> (bytes, busbw_factor)``:
  against closed forms written out here, not taken from the library (Thakur, Rabenseifner & Gropp
  2005 for the ring / pairwise volumes; nccl-tests ``doc/PERFORMANCE.md`` for the busbw factors).
"""

from __future__ import annotations

import math
import numpy as np
from ringlab.collectives import Schedule, Transfer, replay
from ..engine import CaseFailure, run_grader
from ..exercise import Exercise
from ..result import TrafficRow

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64, 128)


ITEMSIZE = 4  # float32 elements in the byte check


def _transfers(fn, world_size: int) -> list[list[tuple[int, int, int]]]:
    """Call the learner's function and validate the shape of what it returns."""
    steps = fn(world_size)
    if not isinstance(steps, (list, tuple)):
        raise CaseFailure(f"recursive_doubling_all_gather should return a list of steps, got {type(steps).__name__}")
    out = []
    for s, step in enumerate(steps):
        if not isinstance(step, (list, tuple)):
            raise CaseFailure(f"step {s} should be a list of (src, dst, chunk) transfers, got {type(step).__name__}")
        rows = []
        for t in step:
            if (not isinstance(t, (list, tuple)) or len(t) != 3
                    or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in t)):
                raise CaseFailure(f"step {s} holds {t!r}; each transfer should be a tuple of three ints "
                                  "(src, dst, chunk)")
            src, dst, chunk = (int(v) for v in t)
            if not (0 <= src < world_size and 0 <= dst < world_size and 0 <= chunk < world_size):
                raise CaseFailure(f"step {s} holds {(src, dst, chunk)}: ranks and chunks are numbered "
                                  f"0..{world_size - 1}")
            if src == dst:
                raise CaseFailure(f"at step {s} rank {src} sends chunk {chunk} to itself")
            rows.append((src, dst, chunk))
        out.append(rows)
    return out


def _check_pairwise(step: list[tuple[int, int, int]], s: int, world_size: int) -> None:
    """Recursive doubling: in each step every rank swaps data with exactly one partner."""
    sends = [set() for _ in range(world_size)]
    receives = [set() for _ in range(world_size)]
    for src, dst, _ in step:
        sends[src].add(dst)
        receives[dst].add(src)
    for r in range(world_size):
        if len(sends[r]) != 1 or sends[r] != receives[r]:
            to = sorted(sends[r]) or "nobody"
            frm = sorted(receives[r]) or "nobody"
            raise CaseFailure(f"at step {s} rank {r} sends to {to} and receives from {frm}: in recursive doubling "
                              "each rank exchanges with a single partner per step, the same one both ways")


def check_recursive_doubling_all_gather(fn, world_size: int, chunk_numel: int) -> None:
    """02a: replay the learner's schedule on ``world_size`` ranks, ``chunk_numel`` float32 per chunk."""
    n = world_size
    steps = _transfers(fn, n)
    log2n = n.bit_length() - 1
    if len(steps) != log2n:
        raise CaseFailure(f"the schedule has {len(steps)} steps; recursive doubling takes log2({n}) = {log2n}")
    for s, step in enumerate(steps):
        _check_pairwise(step, s, n)
    sched = Schedule("all_gather", "learner", n, n,
                     tuple(tuple(Transfer(src, dst, c, False) for src, dst, c in step) for step in steps),
                     tuple((r,) for r in range(n)), (tuple(range(n)),) * n)
    states = list(replay(sched))
    for s, step in enumerate(steps):
        for src, dst, c in step:
            if states[s][src, c, c] != 1:
                raise CaseFailure(f"at step {s} rank {src} sends chunk {c} to rank {dst}, but it does not hold "
                                  f"chunk {c} yet")
    final = states[-1]
    owner = np.eye(n, dtype=np.int64)  # chunk c must be exactly rank c's data
    for r in range(n):
        missing = [c for c in range(n) if not np.array_equal(final[r, c], owner[c])]
        if missing:
            raise CaseFailure(f"after the last step rank {r} lacks chunks {missing} (each must be a copy of its "
                              "owner's data)")
    numel = chunk_numel * n
    want = (n - 1) * chunk_numel * ITEMSIZE  # (N - 1) / N of the gathered message, independent of the schedule
    sent = sched.bytes_sent(numel, ITEMSIZE)
    table = [TrafficRow(r, want, int(sent[r])) for r in range(n)]
    bad = [row for row in table if not row.ok]
    if bad:
        raise CaseFailure(f"rank {bad[0].rank} sends {bad[0].reported} bytes for a gathered message of "
                          f"{numel * ITEMSIZE} bytes; expected (N - 1) / N of it = {want}", table)


def _all_gather_cases() -> list[dict]:
    return [{"world_size": n, "chunk_numel": k} for n in POWERS_OF_TWO for k in (1, 1000)]


def expected_traffic(collective: str, world_size: int, message_bytes: int) -> tuple[float, float, str]:
    """(busiest rank's bytes, nccl-tests busbw factor, the formula in words) for the algorithms of 02b."""
    n, m = world_size, message_bytes
    if collective == "all_reduce":  # ring: reduce-scatter then all-gather, N - 1 chunks each
        return 2 * (n - 1) * m / n, 2 * (n - 1) / n, "2(N-1)/N x M"
    if collective in ("reduce_scatter", "all_gather", "all_to_all"):  # N - 1 chunks of M / N
        return (n - 1) * m / n, (n - 1) / n, "(N-1)/N x M"
    # pipelined chain: each link carries the whole message once; the last rank (broadcast) or the
    # root (reduce) sends nothing, and with N = 1 nobody sends
    return (m if n > 1 else 0), 1.0, "M for every rank but one"


COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all")


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise CaseFailure(f"{what} should be a number, got {value!r}")
    return float(value)


def check_collective_traffic(fn, world_size: int, message_bytes: int) -> None:
    """02b: every collective's busiest-rank bytes and busbw factor against the closed forms."""
    for coll in COLLECTIVES:
        got = fn(coll, world_size, message_bytes)
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            raise CaseFailure(f"collective_traffic({coll!r}, ...) should return (bytes, busbw_factor), got {got!r}")
        sent, factor = _number(got[0], f"{coll}: bytes"), _number(got[1], f"{coll}: busbw factor")
        want_sent, want_factor, words = expected_traffic(coll, world_size, message_bytes)
        if not math.isclose(sent, want_sent, rel_tol=1e-9, abs_tol=1e-9):
            raise CaseFailure(f"{coll}: you say the busiest rank sends {sent:,.6g} bytes, expected {want_sent:,.6g} "
                              f"({sent / message_bytes:.4g} x M instead of {want_sent / message_bytes:.4g} x M)")
        if not math.isclose(factor, want_factor, rel_tol=1e-9, abs_tol=1e-12):
            raise CaseFailure(f"{coll}: busbw factor {factor:.6g}, expected {want_factor:.6g} (nccl-tests)")


def _traffic_cases() -> list[dict]:
    return [{"world_size": n, "message_bytes": n * k} for n in (1, 2, 3, 4, 7, 8, 64, 1000)
            for k in (4, 2**20)]


def _traffic_strategy():
    from hypothesis import strategies as st

    return st.builds(lambda n, k: {"world_size": n, "message_bytes": n * k},
                     st.integers(1, 4096), st.integers(1, 2**30))


def _recursive_doubling(fn):
    return run_grader("02a", "recursive_doubling_all_gather", fn, check_recursive_doubling_all_gather,
                      _all_gather_cases(), passed_message="every rank gathers every chunk from its owner in "
                      "log2 N pairwise steps, sending (N - 1) / N x M")


def _collective_traffic(fn):
    return run_grader("02b", "collective_traffic", fn, check_collective_traffic, _traffic_cases(),
                      _traffic_strategy(), "bytes per rank and busbw factors match for every collective")


EXERCISES = (
    Exercise("02a", "recursive_doubling_all_gather",
             "Recursive-doubling all-gather schedule", _recursive_doubling, (
                 "At step k every rank swaps with the rank whose number differs in bit k: rank ^ 2**k "
                 "(not rank + 2**k, which is not symmetric).",
                 "Send everything you have gathered so far, not just your own chunk: 1, 2, 4, ... chunks, "
                 "so the amount doubles with the distance.",
                 "Before step k rank r holds the aligned block of 2**k chunks starting at r - r % 2**k; "
                 "send exactly those chunks to r ^ 2**k.",
             )),
    Exercise("02b", "collective_traffic",
             "What does each primitive cost? Bytes per rank and busbw", _collective_traffic, (
                 "Cut the message into N chunks: in a ring each rank passes on every chunk but one, so a "
                 "reduce-scatter or an all-gather costs (N-1)/N x M per rank.",
                 "all-reduce = reduce-scatter + all-gather; a pipelined broadcast or reduce moves the whole "
                 "message over each link once; a flat root sending to everyone would send (N-1) x M.",
                 "For N > 1, nccl-tests' busbw factor is exactly the busiest rank's bytes divided by S for these "
                 "algorithms: 2(N-1)/N, (N-1)/N, or 1 for broadcast and reduce.",
             )),
)
