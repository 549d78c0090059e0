"""The course map shown by ``notebooks/00_start_here.ipynb`` and the progress ``ringlab check --all`` prints.

Both read the topic registry (:mod:`ringlab.course.registry`): topics in the recommended order with
their number, title, what each teaches, prerequisites, time estimate and optional dependencies, and
each exercise's grade from :func:`ringlab.check.grade` on the learner's files.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from ringlab.course import RECOMMENDED_ORDER, Topic, get_topic

from . import grade
from .exercise import Exercise
from .registry import EXERCISES
from .result import GradeResult


@dataclass
class Progress:
    """Each registered exercise with its grade, in id order: the rows of ``ringlab check --all``."""

    rows: list[tuple[Exercise, GradeResult]]

    @property
    def passed(self) -> int:
        return sum(res.passed for _, res in self.rows)

    def status(self, exercise_id: str) -> str:
        """Status of one exercise ("not attempted" / "wrong" / "passed"); "unknown" if not registered."""
        return next((res.status for ex, res in self.rows if ex.id == exercise_id), "unknown")

    def __str__(self) -> str:
        lines = [f"{'id':<4} {'topic':<26} {'status':<14} title"]
        lines += [f"{ex.id:<4} {ex.topic.slug:<26} {res.status:<14} {ex.title}" for ex, res in self.rows]
        lines.append(f"{self.passed}/{len(self.rows)} passed")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{ex.id}</td><td>{ex.topic.slug}</td><td>{_badge(res.status)}</td>"
                       f"<td style='text-align:left'>{html.escape(ex.title)}</td></tr>" for ex, res in self.rows)
        return ("<table><tr><th>id</th><th>topic</th><th>status</th><th style='text-align:left'>title</th></tr>"
                f"{rows}</table><p>{self.passed}/{len(self.rows)} passed</p>")


def progress() -> Progress:
    """Grade every registered exercise from the learner's files (never raises; see :func:`grade`)."""
    return Progress([(ex, grade(ex_id)) for ex_id, ex in EXERCISES.items()])


_COLOURS = {"passed": "#1a7f37", "wrong": "#cf222e", "not attempted": "#9a6700"}


def _badge(status: str, label: str = "") -> str:
    text = f"{label} {status}" if label else status
    return f"<span style='color:{_COLOURS.get(status, '#57606a')}'>{html.escape(text)}</span>"


def _needs(topic: Topic) -> str:
    return f"; needs {', '.join(topic.needs)}" if topic.needs else ""


def _after(topic: Topic) -> str:
    return f"after {', '.join(topic.prerequisites)}" if topic.prerequisites else "no prerequisites"


@dataclass
class CourseMap:
    """The start page: topics in the recommended order, with links, what each teaches, prerequisites,
    minutes and each exercise's status."""

    topics: list[Topic]
    progress: Progress

    def __str__(self) -> str:
        lines = []
        for t in self.topics:
            done = ", ".join(f"{ex.id} {self.progress.status(ex.id)}" for ex in t.exercises) or "no exercises"
            lines += [f"{t.id} {t.title} ({t.stem}.ipynb)", f"    {t.teaches}",
                      f"    ~{t.minutes} min, {_after(t)}{_needs(t)}", f"    {done}"]
        lines.append(f"{self.progress.passed}/{len(self.progress.rows)} exercises passed")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        rows = []
        for t in self.topics:
            done = "<br>".join(_badge(self.progress.status(ex.id), ex.id) for ex in t.exercises) or "&ndash;"
            rows.append(f"<tr><td>{t.id}</td><td style='text-align:left'><a href='{html.escape(t.stem)}.ipynb'>"
                        f"{html.escape(t.title)}</a></td><td style='text-align:left'>{html.escape(t.teaches)}</td>"
                        f"<td style='text-align:left;white-space:nowrap'>~{t.minutes} min<br>{_after(t)}"
                        f"{html.escape(_needs(t))}</td><td style='text-align:left;white-space:nowrap'>{done}</td></tr>")
        return ("<table><tr><th>#</th><th style='text-align:left'>notebook</th><th style='text-align:left'>what it "
                "teaches</th><th style='text-align:left'>time, order</th><th style='text-align:left'>exercises</th>"
                "</tr>" + "".join(rows) + "</table>"
                f"<p>{self.progress.passed}/{len(self.progress.rows)} exercises passed</p>")


def start_here() -> CourseMap:
    """The course map: every registered topic in :data:`~ringlab.course.RECOMMENDED_ORDER`, with current grades."""
    return CourseMap([get_topic(i) for i in RECOMMENDED_ORDER], progress())
