"""A practice card in a notebook: the question with fresh numbers, one box per number asked, hints, check.

    from ringlab.viz.practice import practice_widget
    w = practice_widget("08", seed=0)     # w.boxes["ideal"].value = "0.44"; w.check.click(); w.feedback.value

The widget is the session of :mod:`ringlab.practice.session` without a terminal: the same drawn numbers
for the same seed and card (``card_rng``), the same checks (:func:`ringlab.practice.session.check`), the
same second try: a wrong number is told its named slip, or how far off it is and the next hint about
it, and its answer is shown only after a second wrong try (or on "Show answer"). Hints follow the
first number not yet settled. It keeps no record; ``ringlab practice --session`` does.
"""

from __future__ import annotations

import html

from ringlab.check.cards import split_rubric
from ringlab.practice.session import TRIES, check, prepare
from ringlab.practice.units import AskAgain, expected_value, format_value
from ringlab.viz._mpl import widgets


class PracticeWidget:
    """Card ``card_id`` drawn for ``seed``. Parts: ``question`` (HTML), ``boxes`` (ask key -> Text),
    ``check``, ``hint``, ``reveal`` and ``new`` (Buttons), ``feedback`` (HTML), ``box`` (the VBox shown).
    ``tries`` maps each ask key to the tries it has used, ``settled`` to its final line once it is right or
    its answer was shown."""

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
        self.hints_shown: dict = {}  # ask key (None: the whole question) -> hints shown
        self.tries: dict = {a.key: 0 for a in self.card.asks}
        self.settled: dict = {}
        self._last: dict = {}  # ask key -> (text checked, its line): an unchanged box is not checked again
        self.question.value = (f"<b>{html.escape(self.card.id)}. {html.escape(self.card.title)}</b> "
                               f"(seed {seed})<pre style='white-space:pre-wrap'>{html.escape(self.card.question)}</pre>")
        # Synced when the box loses focus (pressing Check does that) or on Enter, not per keystroke: the front end
        # holds back a value update while an earlier one is unanswered but sends a click at once, so with
        # per-keystroke updates a quick Check could be judged against the first characters typed.
        self.boxes = {a.key: w.Text(description="", placeholder=f"{a.label} [{a.show or a.unit}]",
                                    continuous_update=False, layout=w.Layout(width="32em"))
                      for a in self.card.asks}
        self._fields.children = tuple(self.boxes.values())
        self.feedback.value = ""
        # ipykernel may handle a Check click before the value update the front end sent just ahead of it, so
        # the click would judge the old text. Once Check has been pressed, a box whose new text arrives is
        # judged then: the answer on screen is the one judged, whatever order the two messages took.
        self._checked = False
        for box in self.boxes.values():
            box.observe(lambda _: self._checked and self._check(), names="value")

    def _worked(self, ask) -> str:
        return format_value(expected_value(ask, self.card.expected[ask.key]), ask.unit, ask.show)

    def _check_one(self, ask) -> str:
        """The feedback line for one box; spends a try only on a readable answer that was not checked before."""
        text = self.boxes[ask.key].value.strip()
        if ask.key in self.settled:
            return self.settled[ask.key]
        if not text:
            return f"{ask.label}: (no answer yet)"
        if self._last.get(ask.key, (None,))[0] == text:
            return self._last[ask.key][1]
        try:
            verdict = check(self.card, ask, text)
        except AskAgain as exc:
            return f"{ask.label}: {exc}"
        except (ValueError, TypeError) as exc:
            return f"{ask.label}: not read: {exc}"
        self.tries[ask.key] += 1
        if verdict.correct or self.tries[ask.key] >= TRIES:
            self.settled[ask.key] = f"{ask.label}: {verdict.message}"
            return self.settled[ask.key]
        line = f"{ask.label}: {verdict.feedback}. Edit it and check again (second try)"
        if not verdict.named:
            hint = self._next_hint(ask.key)
            line += f"\n  {hint}" if hint else ""
        self._last[ask.key] = (text, line)
        return line

    def _check(self) -> None:
        self._checked = True
        lines = [self._check_one(ask) for ask in self.card.asks]
        self.feedback.value = self._html(lines) or "this card asks for no numbers"

    def _next_hint(self, key: str | None) -> str | None:
        hints = self.card.hints_for(key)
        shown = self.hints_shown.get(key, 0)
        if shown >= len(hints):
            return None
        self.hints_shown[key] = shown + 1
        return f"hint {shown + 1}/{len(hints)}: {hints[shown]}"

    def _hint(self) -> None:
        """The next hint about the first number not yet settled (about the whole question when none is left)."""
        ask = next((a for a in self.card.asks if a.key not in self.settled), None)
        key = ask.key if ask else None
        hint = self._next_hint(key)
        about = f"{ask.label}: " if ask else ""
        hints = self.card.hints_for(key)
        shown = [f"{about}hint {i + 1}/{len(hints)}: {h}" for i, h in enumerate(hints[:self.hints_shown.get(key, 0)])]
        if not hints:
            shown = ["this card has no hints"]
        elif hint is None:
            shown.append("no more hints; 'Show answer' shows it")
        self.feedback.value = self._html(shown)

    def _reveal(self) -> None:
        worked = [f"{a.label}: {self._worked(a)}" for a in self.card.asks]
        for a in self.card.asks:
            self.settled.setdefault(a.key, f"{a.label}: shown: {self._worked(a)}")
        rubric = [f"[ ] {split_rubric(item)[1]}" for item in self.card.rubric]
        text = "\n".join(worked + ["", self.card.answer, "", "RUBRIC", *rubric])
        self.feedback.value = f"<pre style='white-space:pre-wrap'>{html.escape(text)}</pre>"

    @staticmethod
    def _html(lines: list[str]) -> str:
        return "<br>".join(html.escape(line).replace("\n", "<br>") for line in lines)

    def _ipython_display_(self):
        from IPython.display import display

        display(self.box)


def practice_widget(card_id: str = "05", seed: int = 0) -> PracticeWidget:
    """A :class:`PracticeWidget` for card ``card_id`` (number, or old id) with numbers drawn for ``seed``.
    Raises ValueError for an unknown card; ImportError naming the extra when ipywidgets is missing."""
    return PracticeWidget(card_id, seed)
