"""``grade(id)`` on the worked solutions, once per test session and exercise.

Two tests ask for the same grading of the same file: ``tests/check/graders/test_graders.py`` (every solution
passes) and ``tests/test_notebooks.py`` (each notebook's grader cell, ``grade("NN")``, passes when the
solutions are swapped in). Grading 03a or 11a starts six torch processes (10-25 s on a busy 2-core machine),
so the first of the two to run grades and the second reads its result. Only a grading of the solution file
itself (``RINGLAB_USE_SOLUTIONS=1``, no function given) is shared, keyed by the file's path and modification
time: the same exercise, grader and input give the same result.
"""

from __future__ import annotations

import os

from ringlab.check import grade, loader

_RESULTS: dict = {}


def graded_solution(exercise_id: str, fn=None):
    """``ringlab.check.grade(exercise_id, fn)``, the solution's result shared when ``fn`` is None and
    ``RINGLAB_USE_SOLUTIONS=1``; any other call is passed through (a GradeResult either way)."""
    if fn is not None or os.environ.get("RINGLAB_USE_SOLUTIONS") != "1":
        return grade(exercise_id, fn)
    try:
        path = loader.exercise_path(exercise_id).resolve()
        key = (exercise_id, path, path.stat().st_mtime_ns)
    except (ValueError, OSError):  # unknown id or no file: grade says so, nothing worth sharing
        return grade(exercise_id)
    if key not in _RESULTS:
        _RESULTS[key] = grade(exercise_id)
    return _RESULTS[key]
