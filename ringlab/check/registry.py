"""The exercises: which file and function each one is, how it is graded, and its hints.

Every topic adds its exercises here. ``grade(exercise_id, fn)`` and ``hint(exercise_id, n)``
are the public entry points (re-exported by :mod:`ringlab.check`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import ring_graders as ring
from .engine import run_grader
from .result import GradeResult


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``exercises/<module>.py`` defines ``function``; ``grader(fn)`` returns a GradeResult."""

    id: str
    module: str
    function: str
    title: str
    problem: str  # the problem-set card it belongs to, e.g. "P1"
    grader: Callable[[Callable | None], GradeResult]
    hints: tuple[str, ...] = field(default=())


def _ring_allreduce(fn):
    return run_grader("ex01", "ring_allreduce", fn, ring.check_ring_allreduce, ring.edge_cases(),
                      ring.case_strategy(), "every rank holds the sum and every step's bytes match the rotation")


def _ring_schedule(fn):
    return run_grader("ex02", "ring_chunk_to_send", fn, ring.check_ring_schedule, ring.schedule_cases(),
                      passed_message="your rotation gives a correct ring all-reduce at every world size tried")


def _reduce_scatter_rank(fn):
    return run_grader("ex03", "ring_reduce_scatter_rank", fn, ring.check_reduce_scatter_rank, ring.edge_cases(),
                      ring.case_strategy(max_world_size=8, max_numel=40),
                      "every rank ends with one fully reduced chunk and sent every other chunk once")


EXERCISES: dict[str, Exercise] = {
    ex.id: ex
    for ex in (
        Exercise("ex01", "ex01_ring_allreduce", "ring_allreduce", "Ring all-reduce with byte counts", "P1",
                 _ring_allreduce, (
                     "Split with np.array_split(a, N): chunk sizes differ by one when N does not divide numel, "
                     "and numel // N drops the remainder.",
                     "In the reduce-scatter phase a rank forwards its running partial sum, not its original "
                     "chunk: the receiver adds what arrived to its own copy and sends that sum on the next step.",
                     "Keep a per-step list of bytes: at each step rank r sends exactly one chunk, "
                     "chunk (r - s) % N in reduce-scatter and (r + 1 - s) % N in all-gather; count its nbytes.",
                 )),
        Exercise("ex02", "ex02_ring_schedule", "ring_chunk_to_send", "The ring rotation", "P1", _ring_schedule, (
            "Every rank sends one chunk per step and the chunk index must change with the step; "
            "otherwise the same chunk travels and the others never move.",
            "Follow one chunk: if rank r sends chunk c at step s, rank r + 1 should send the same chunk c "
            "(now with two contributions) at step s + 1.",
            "After N - 1 reduce-scatter steps rank r holds the finished chunk it received last; in the "
            "all-gather phase it must send that chunk first.",
        )),
        Exercise("ex03", "ex03_ring_reduce_scatter", "ring_reduce_scatter_rank",
                 "Ring reduce-scatter as a per-rank loop (P9 without torch)", "P9", _reduce_scatter_rank, (
                     "Each rank calls exchange exactly world_size - 1 times; exchange sends to rank + 1 and "
                     "returns what rank - 1 sent in the same step.",
                     "The widely copied version sends the original chunk every step and only adds when the "
                     "received index equals its rank: for N > 2 most contributions never reach their owner.",
                     "Send chunk (rank - step) % N from your working copy, add what you receive into chunk "
                     "(rank - step - 1) % N of your working copy; you end owning chunk (rank + 1) % N.",
                 )),
    )
}


def get_exercise(exercise_id: str) -> Exercise:
    """The :class:`Exercise` for ``exercise_id``; ValueError listing the known ids otherwise."""
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        raise ValueError(f"unknown exercise {exercise_id!r}; known: {', '.join(sorted(EXERCISES))}") from None
