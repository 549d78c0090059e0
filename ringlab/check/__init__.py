"""Exercises and graders: ``grade("01a", fn)`` returns a result that never raises.

Exercise ids are a topic number and a letter (see :mod:`ringlab.course.registry`); old ids such as
``ex01`` still work and warn with the new id. Typical notebook cell::

    from ringlab.check import grade, load
    grade("01a", load("01a"))
"""

from __future__ import annotations

import ast
import contextlib
import html
import io

from ringlab.course.make_exercises import BEGIN, END, GO_BEGIN, GO_END

from . import loader
from .exercise import Exercise
from .registry import EXERCISES, get_exercise
from .result import NOT_ATTEMPTED, WRONG, GradeResult


def grade(exercise_id: str, fn=None) -> GradeResult:
    """Grade ``fn`` (default: the function in the learner's exercise file) for ``exercise_id``.

    Never raises: an unknown id, a missing file or a broken import become a ``wrong`` or
    ``not attempted`` result with the reason in ``message``.
    """
    try:
        ex = get_exercise(exercise_id)
    except ValueError as exc:
        return GradeResult(exercise_id, "?", WRONG, str(exc))
    if fn is None:
        try:
            fn = loader.load(exercise_id)
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
    return loader.load(exercise_id, file)


class WorkedAnswer:
    """The reference solution of an exercise, shown collapsed in a notebook (``<details>``)."""

    def __init__(self, exercise_id: str, source: str):
        self.exercise_id, self.source = exercise_id, source

    def __repr__(self) -> str:
        return f"# worked answer for {self.exercise_id}\n{self.source}"

    def _repr_html_(self) -> str:
        return (f"<details><summary>Worked answer for {self.exercise_id} (click to open)</summary>"
                f"<pre>{html.escape(self.source)}</pre></details>")


class Reveal:
    """Text shown collapsed in a notebook (``<details>``) until the learner opens it; plain text elsewhere."""

    def __init__(self, text: str, title: str = "Worked answer: try it first, then click to open"):
        self.text, self.title = text, title

    def __repr__(self) -> str:
        return f"# {self.title}\n{self.text}"

    def _repr_html_(self) -> str:
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
    """The worked solution of ``exercise_id`` (from ``solutions/``), for a collapsible notebook cell: the
    whole file for a topic with one exercise, else the exercise's own function or class.

    Raises ValueError for an unknown id and FileNotFoundError when solutions/ is not available.
    """
    ex = get_exercise(exercise_id)
    if ex.solution_file:  # in another language (19b, Go): the whole file, without its markers
        path = loader.find_project_dir("go").parent / ex.solution_file
        if not path.is_file():
            raise FileNotFoundError(f"{ex.id}: no worked answer at {path}")
        return WorkedAnswer(ex.id, "".join(line for line in path.read_text().splitlines(keepends=True)
                                           if line.strip() not in (GO_BEGIN, GO_END)))
    path = loader.find_project_dir("solutions") / f"{ex.module}.py"
    if not path.is_file():
        raise FileNotFoundError(f"{ex.id}: no worked answer at {path}")
    source = path.read_text()
    if len([e for e in ex.topic.exercises if not e.file]) > 1:  # several Python exercises share the file
        node = next(n for n in ast.parse(source).body if getattr(n, "name", None) == ex.function)
        source = ast.get_source_segment(source, node) + "\n"
    lines = [line for line in source.splitlines(keepends=True) if line.strip() not in (BEGIN, END)]
    return WorkedAnswer(ex.id, "".join(lines))


__all__ = ["EXERCISES", "Exercise", "GradeResult", "Reveal", "WorkedAnswer", "get_exercise", "grade", "hint", "load",
           "revealed", "worked_answer"]
