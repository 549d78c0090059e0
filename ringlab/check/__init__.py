"""Exercises and graders: ``grade("ex01", fn)`` returns a result that never raises.

Typical notebook cell::

    from ringlab.check import grade, load
    grade("ex01", load("ex01"))
"""

from __future__ import annotations

import contextlib
import io

from .exercise import Exercise
from .registry import EXERCISES, get_exercise
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


class WorkedAnswer:
    """The reference solution of an exercise, shown collapsed in a notebook (``<details>``)."""

    def __init__(self, exercise_id: str, source: str):
        self.exercise_id, self.source = exercise_id, source

    def __repr__(self) -> str:
        return f"# worked answer for {self.exercise_id}\n{self.source}"

    def _repr_html_(self) -> str:
        import html

        return (f"<details><summary>Worked answer for {self.exercise_id} (click to open)</summary>"
                f"<pre>{html.escape(self.source)}</pre></details>")


class Reveal:
    """Text shown collapsed in a notebook (``<details>``) until the learner opens it; plain text elsewhere."""

    def __init__(self, text: str, title: str = "Worked answer: try it first, then click to open"):
        self.text, self.title = text, title

    def __repr__(self) -> str:
        return f"# {self.title}\n{self.text}"

    def _repr_html_(self) -> str:
        import html

        return f"<details><summary>{html.escape(self.title)}</summary><pre>{html.escape(self.text)}</pre></details>"


@contextlib.contextmanager
def revealed(title: str = "Worked answer: try it first, then click to open"):
    """Collect what the block prints and show it as one collapsed :class:`Reveal` (in a notebook: ``display``)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        yield
    shown = Reveal(buffer.getvalue().rstrip("\n"), title)
    try:
        from IPython.display import display
    except ImportError:
        print(repr(shown))
    else:
        display(shown)


def worked_answer(exercise_id: str) -> WorkedAnswer:
    """The solution file of ``exercise_id`` (from ``solutions/``), for a collapsible notebook cell.

    Raises ValueError for an unknown id and FileNotFoundError when solutions/ is not available.
    """
    from .loader import _find_dir

    path = _find_dir("solutions") / f"{get_exercise(exercise_id).module}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{exercise_id}: no worked answer at {path}")
    from .make_exercises import BEGIN, END

    lines = [line for line in path.read_text().splitlines(keepends=True) if line.strip() not in (BEGIN, END)]
    return WorkedAnswer(exercise_id, "".join(lines))


__all__ = ["EXERCISES", "Exercise", "GradeResult", "Reveal", "WorkedAnswer", "get_exercise", "grade", "hint", "load",
           "revealed", "worked_answer"]
