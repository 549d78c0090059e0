"""The :class:`Exercise` record every topic's graders module registers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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
