"""A practice card in a notebook: the question with fresh numbers, one box per number asked, hints, check.

    from ringlab.viz.practice import practice_widget
    w = practice_widget("08", seed=0)     # w.boxes["ideal"].value = "0.44"; w.check.click(); w.feedback.value

The widget is the session of :mod:`ringlab.practice.session` without a terminal: the same drawn numbers
for the same seed and card (``card_rng``), the same checks (:func:`ringlab.practice.units.check_answer`).
It keeps no record; ``ringlab practice --session`` does.
"""

from __future__ import annotations

import html

from ringlab.check.cards import split_rubric
from ringlab.practice.session import other_answers, prepare
from ringlab.practice.units import check_answer, expected_value, format_value
from ringlab.viz._mpl import widgets


class PracticeWidget:
    """Card ``card_id`` drawn for ``seed``. Parts: ``question`` (HTML), ``boxes`` (ask key -> Text),
    ``check``, ``hint``, ``reveal`` and ``new`` (Buttons), ``feedback`` (HTML), ``box`` (the VBox shown)."""

    def __init__(self, card_id: str, seed: int = 0):
        w = widgets()
        self.card_id, self.seed = card_id, seed
        self.question = w.HTML()
        self.feedback = w.HTML()
        self.check = w.Button(description="Check", button_style="primary")
        self.hint = w.Button(description="Hint")
        self.reveal = w.Button(description="Show answer")
        self.new = w.Button(description="New numbers")
        self.boxes: dict = {}
        self._fields = w.VBox()
        self.check.on_click(lambda _: self._check())
        self.hint.on_click(lambda _: self._hint())
        self.reveal.on_click(lambda _: self._reveal())
        self.new.on_click(lambda _: self._draw(self.seed + 1))
        self.box = w.VBox([self.question, self._fields, w.HBox([self.check, self.hint, self.reveal, self.new]),
                           self.feedback])
        self._draw(seed)

    def _draw(self, seed: int) -> None:
        w = widgets()
        self.seed, self.card = seed, prepare(self.card_id, seed)
        self.hints_shown = 0
        self.question.value = (f"<b>{html.escape(self.card.id)}. {html.escape(self.card.title)}</b> "
                               f"(seed {seed})<pre style='white-space:pre-wrap'>{html.escape(self.card.question)}</pre>")
        self.boxes = {a.key: w.Text(description="", placeholder=f"{a.label} [{a.show or a.unit}]",
                                    layout=w.Layout(width="32em")) for a in self.card.asks}
        self._fields.children = tuple(self.boxes.values())
        self.feedback.value = ""

    def _check(self) -> None:
        values = self.card.values
        lines = []
        for ask in self.card.asks:
            text = self.boxes[ask.key].value.strip()
            if not text:
                lines.append(f"{ask.label}: (no answer yet)")
                continue
            try:
                verdict = check_answer(ask, self.card.expected[ask.key], text, values, other_answers(self.card, ask))
                lines.append(f"{ask.label}: {verdict.message}")
            except (ValueError, TypeError) as exc:
                lines.append(f"{ask.label}: not read: {exc}")
        self.feedback.value = "<br>".join(html.escape(line) for line in lines) or "this card asks for no numbers"

    def _hint(self) -> None:
        hints = self.card.hints
        self.hints_shown = min(self.hints_shown + 1, len(hints))
        shown = [f"hint {i + 1}/{len(hints)}: {h}" for i, h in enumerate(hints[:self.hints_shown])]
        self.feedback.value = "<br>".join(html.escape(s) for s in shown) or "this card has no hints"

    def _reveal(self) -> None:
        worked = [f"{a.label}: {format_value(expected_value(a, self.card.expected[a.key]), a.unit, a.show)}"
                  for a in self.card.asks]
        rubric = [f"[ ] {split_rubric(item)[1]}" for item in self.card.rubric]
        text = "\n".join(worked + ["", self.card.answer, "", "RUBRIC", *rubric])
        self.feedback.value = f"<pre style='white-space:pre-wrap'>{html.escape(text)}</pre>"

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)


def practice_widget(card_id: str = "05", seed: int = 0) -> PracticeWidget:
    """A :class:`PracticeWidget` for card ``card_id`` (number, or old id) with numbers drawn for ``seed``.
    Raises ValueError for an unknown card; ImportError naming the extra when ipywidgets is missing."""
    return PracticeWidget(card_id, seed)
