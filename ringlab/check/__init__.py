"""Exercises and graders: ``grade("ex01", fn)`` returns a result that never raises.

Typical notebook cell::

    from ringlab.check import grade, load
    grade("ex01", load("ex01"))
"""

from __future__ import annotations

from .registry import EXERCISES, Exercise, get_exercise
from .result import GradeResult


def grade(exercise_id: str, fn=None) -> GradeResult:
    """Grade ``fn`` (default: the function in the learner's exercise file) for ``exercise_id``.

    Never raises: an unknown id, a missing file or a broken import become a ``wrong`` or
    ``not attempted`` result with the reason in ``message``.
    """
    from .loader import load
    from .result import NOT_ATTEMPTED, WRONG

    try:
        ex = get_exercise(exercise_id)
    except ValueError as exc:
        return GradeResult(exercise_id, "?", WRONG, str(exc))
    if fn is None:
        try:
            fn = load(exercise_id)
        except FileNotFoundError as exc:
            return GradeResult(ex.id, ex.function, NOT_ATTEMPTED, str(exc))
        except Exception as exc:  # a syntax error in the learner's file, for instance
            return GradeResult(ex.id, ex.function, WRONG, f"could not import your file: {type(exc).__name__}: {exc}")
    return ex.grader(fn)


def hint(exercise_id: str, n: int = 1) -> str:
    """Hint ``n`` (1 = gentlest) for an exercise. Raises ValueError for unknown ids or numbers."""
    hints = get_exercise(exercise_id).hints
    if not 1 <= n <= len(hints):
        raise ValueError(f"{exercise_id} has hints 1..{len(hints)}, got {n}")
    return f"{exercise_id} hint {n}/{len(hints)}: {hints[n - 1]}"


def load(exercise_id: str, file=None):
    """Import the learner's function for ``exercise_id``; see :func:`ringlab.check.loader.load`."""
    from .loader import load as _load

    return _load(exercise_id, file)


__all__ = ["EXERCISES", "Exercise", "GradeResult", "get_exercise", "grade", "hint", "load"]
