"""Run a learner's function over graded cases and turn the first failure into words.

A grader is a ``check(fn, **case)`` function that raises :class:`CaseFailure` with a
precise message when ``fn`` is wrong on ``case``, plus a list of fixed edge cases and,
optionally, a hypothesis strategy of further cases. Hypothesis shrinks a failure to the
smallest case it can find, so the learner sees e.g. ``world_size=3, numel=1`` rather than a
random large one. Nothing here raises: every outcome is a :class:`GradeResult`.
"""

from __future__ import annotations

import math
import numbers
import traceback
from collections.abc import Callable, Iterable

from .result import NOT_ATTEMPTED, PASSED, WRONG, GradeResult, TrafficRow

HYPOTHESIS_EXAMPLES = 60


def as_number(value, what: str, whole: bool = False) -> float:
    """The one rule every grader applies to a learner's number: an int or a float (numpy scalars too),
    never a bool, finite; int and float are interchangeable (37 and 37.0 are the same answer). A value
    documented as an int (``whole=True``) must be whole. Returns it as a float; raises CaseFailure naming ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CaseFailure(f"{what} should be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise CaseFailure(f"{what} should be a finite number, got {value!r}")
    if whole and not out.is_integer():
        raise CaseFailure(f"{what} should be a whole number, got {value!r}")
    return out


def as_bytes(value, what: str) -> float:
    """:func:`as_number` for a byte count, ``what`` labelled "(bytes)" in the message."""
    return as_number(value, f"{what} (bytes)")


def within_a_byte(got: float, want: float) -> bool:
    """Byte counts agree when they differ by less than one byte: float arithmetic such as
    2 * 63/64 * M is accepted, a real miscount is not."""
    return abs(got - want) < 1


REL_TOL = 1e-9  # relative tolerance of a float answer computed from a closed form


def close(got: float, want: float, rel_tol: float = REL_TOL) -> bool:
    """Whether a float answer equals the closed form up to rounding (``rel_tol``; exact zeros compare equal)."""
    return math.isclose(got, want, rel_tol=rel_tol, abs_tol=1e-300)


def named_mistake(got: float, known_wrong: dict[str, float]) -> str:
    """'; <explanation>' for the first known wrong formula whose value ``got`` equals (see :func:`close`), else ''."""
    for explanation, value in known_wrong.items():
        if close(got, value):
            return f"; {explanation}"
    return ""


def not_attempted_message(reason: str) -> str:
    """The message of a ``not attempted`` result whose stub raised ``NotImplementedError(reason)``."""
    return f"not attempted yet: {reason}"


class CaseFailure(Exception):
    """Raised by a check: ``message`` in words, the ``traffic`` table of the case if any."""

    def __init__(self, message: str, traffic: list[TrafficRow] | None = None):
        super().__init__(message)
        self.message = message
        self.traffic = traffic or []


def _run_case(check, fn, case: dict):
    """Return None if ``fn`` passes ``case``, else (status, message, traffic)."""
    try:
        check(fn, **case)
    except CaseFailure as failure:
        return WRONG, failure.message, failure.traffic
    except NotImplementedError as exc:
        return NOT_ATTEMPTED, not_attempted_message(str(exc)), []
    except Exception as exc:  # the learner's code may raise anything; report it, never propagate
        # raised in the sandbox's child (ringlab.check.wire): the learner's line travels with it
        filename, lineno = getattr(exc, "_ringlab_where", None) or traceback.extract_tb(exc.__traceback__)[-1][:2]
        where = f" (line {lineno} of {filename.rsplit('/', 1)[-1]})"
        return WRONG, f"raised {type(exc).__name__}: {exc}{where}", []
    return None


def _describe(case: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in case.items() if k != "seed")


def run_grader(exercise: str, function: str, fn: Callable | None, check: Callable, cases: Iterable[dict],
               strategy=None, passed_message: str = "all cases passed") -> GradeResult:
    """Grade ``fn`` with ``check`` on the fixed ``cases`` then on hypothesis-drawn ones.

    Returns a :class:`GradeResult`; never raises (a grader bug is reported as a wrong result
    naming the case, which the mutation tests would catch).
    """
    if fn is None:
        return GradeResult(exercise, function, NOT_ATTEMPTED, "no function given")
    count = 0
    for case in cases:
        count += 1
        failed = _run_case(check, fn, case)
        if failed:
            status, message, traffic = failed
            if status == NOT_ATTEMPTED:
                return GradeResult(exercise, function, status, message, {}, [], count)
            return GradeResult(exercise, function, status, f"{_describe(case)}: {message}", dict(case), traffic, count)
    if strategy is not None:
        found = _hypothesis_counterexample(check, fn, strategy)
        count += HYPOTHESIS_EXAMPLES
        if found is not None:
            case, (status, message, traffic) = found
            return GradeResult(exercise, function, status, f"{_describe(case)}: {message}", dict(case), traffic, count)
    return GradeResult(exercise, function, PASSED, passed_message, {}, [], count)


def _hypothesis_counterexample(check, fn, strategy):
    """Smallest drawn case on which ``fn`` fails, with its failure, or None."""
    try:
        from hypothesis import HealthCheck, find, settings
        from hypothesis.errors import NoSuchExample
    except ImportError:  # hypothesis is optional for learners; the fixed cases still ran
        return None
    quiet = settings(max_examples=HYPOTHESIS_EXAMPLES, database=None, deadline=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))
    try:
        case = find(strategy, lambda c: _run_case(check, fn, c) is not None, settings=quiet)
    except NoSuchExample:
        return None
    return case, _run_case(check, fn, case)
