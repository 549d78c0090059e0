"""The grader's verdict: a plain object that prints as text and renders as HTML in Jupyter."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from ringlab.course import topic_of_exercise

NOT_ATTEMPTED, WRONG, PASSED = "not attempted", "wrong", "passed"


@dataclass
class TrafficRow:
    """Bytes one rank sent: what the grader expects and what the learner's code reported."""

    rank: int
    expected: int
    reported: int | None

    @property
    def ok(self) -> bool:
        return self.reported == self.expected


@dataclass(repr=False)
class GradeResult:
    """Outcome of grading one exercise function.

    Attributes:
        exercise: exercise id, e.g. ``"01a"``.
        function: name of the graded function.
        status: ``"not attempted"``, ``"wrong"`` or ``"passed"``.
        message: the first failing case in words (or a summary when passed).
        inputs: the arguments that reproduce the failing case (empty when passed).
        traffic: per-rank bytes table of the failing (or last) case, when the exercise reports bytes.
        cases: number of cases run.
    """

    exercise: str
    function: str
    status: str
    message: str
    inputs: dict = field(default_factory=dict)
    traffic: list[TrafficRow] = field(default_factory=list)
    cases: int = 0

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    @property
    def next_step(self) -> str:
        """For a ``not attempted`` verdict: the file to write the exercise in and the command that grades it
        (``""`` otherwise, or for an id that is not registered)."""
        if self.status != NOT_ATTEMPTED:
            return ""
        try:
            topic = topic_of_exercise(self.exercise)
        except ValueError:
            return ""
        where = next((ex.file for ex in topic.exercises if ex.id == self.exercise and ex.file), topic.exercise_file)
        return (f"to attempt it: write {self.function} in {where}, save, and grade it with "
                f"`ringlab check {self.exercise}` (in a notebook: grade(\"{self.exercise}\"))")

    def __str__(self) -> str:
        lines = [f"{self.exercise} {self.function}: {self.status.upper()}{self._cases_text()}", self.message]
        if self.next_step:
            lines.append(self.next_step)
        if self.inputs:
            lines.append("reproduce with: " + ", ".join(f"{k}={_short(v)}" for k, v in self.inputs.items()))
        if self.traffic:
            lines.append(f"{'rank':>6} {'expected bytes':>15} {'reported':>10}")
            for row in self.traffic:
                rep = "-" if row.reported is None else str(row.reported)
                lines.append(f"{row.rank:>6} {row.expected:>15} {rep:>10}{'' if row.ok else '  <-'}")
        return "\n".join(lines)

    __repr__ = __str__

    def _cases_text(self) -> str:
        if self.status == NOT_ATTEMPTED:
            return ""
        return f" ({self.cases} case{'' if self.cases == 1 else 's'} run)"

    def _repr_html_(self) -> str:
        colour = {PASSED: "#1a7f37", WRONG: "#cf222e", NOT_ATTEMPTED: "#9a6700"}[self.status]
        parts = [f'<div class="ringlab-grade"><b style="color:{colour}">{html.escape(self.exercise)} '
                 f"{html.escape(self.function)}: {self.status}</b>"
                 f"<span>{self._cases_text()}</span><br>{html.escape(self.message)}"]
        if self.next_step:
            parts.append(f"<br>{html.escape(self.next_step)}")
        if self.inputs:
            items = "".join(f"<li><code>{html.escape(k)} = {html.escape(_short(v))}</code></li>"
                            for k, v in self.inputs.items())
            parts.append(f"<details><summary>inputs to reproduce</summary><ul>{items}</ul></details>")
        if self.traffic:
            bad = ' style="color:#cf222e"'
            rows = "".join(
                f"<tr{'' if r.ok else bad}><td>{r.rank}</td><td>{r.expected}</td>"
                f"<td>{'-' if r.reported is None else r.reported}</td></tr>" for r in self.traffic)
            parts.append("<table><tr><th>rank</th><th>expected bytes</th><th>reported</th></tr>"
                         f"{rows}</table>")
        return "".join(parts) + "</div>"


def _short(value, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
