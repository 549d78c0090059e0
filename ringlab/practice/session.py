"""A practice session: cards one after another, each on a visible clock, numbers drawn fresh and checked.

Per card: the question (a parametrised card's numbers drawn from a generator seeded by the session
seed and the card number, so ``--seed S`` replays a session and ``--seed S 05`` replays one card of
it); then each number the card asks for, typed with its unit and checked (:mod:`ringlab.practice.units`);
at any prompt ``h`` shows the next hint (they go from a nudge to the method), ``s`` shows the answer,
``q`` ends the session. Then the worked answer, the rubric (items tied to a typed number are marked
from it, the others by the learner, y/n), and the follow-ups. Every finished card is saved to the
state file at once (:mod:`ringlab.practice.state`); end-of-input and Ctrl-C end the session cleanly
with what was done saved.

In a mock interview (``mock=True``) the budget is a limit: once it is spent the card stops taking
answers and moves to the reveal; the summary names the score, the time per card and the mistakes.

All I/O goes through ``read(prompt) -> str`` and ``write(text)`` and time through ``clock()``, so tests
and the notebook widget drive a session without a terminal.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ringlab import cli_args
from ringlab.check.cards import Card, draw_params, load_card, split_rubric
from ringlab.practice import state as state_file
from ringlab.practice.units import check_answer, expected_value, format_value

ANSWER_MAX = 100  # characters per typed line: no answer is longer
COMMANDS = "h hint · s show the answer · q quit"
UNIT_NAMES = {"1": "number"}  # how a prompt names an ask's unit when it has no ``show``


class Quit(Exception):
    """The learner ended the session (``q``, end of input or Ctrl-C)."""


def card_rng(seed: int, card_id: str):
    """The generator a card's numbers are drawn from: a function of the session seed and the card only."""
    import numpy as np

    return np.random.default_rng([seed, int(card_id)])


def prepare(card_id: str, seed: int | None) -> Card:
    """Card ``card_id`` with numbers drawn for ``seed`` (the fixed card of PROBLEMS.md when ``seed`` is None)."""
    params = draw_params(card_id, card_rng(seed, card_id)) if seed is not None else {}
    return load_card(card_id, params)


def other_answers(card: Card, ask) -> dict[str, float]:
    """The card's other asks, label -> worked value (base unit): typing one of them for ``ask`` is named."""
    return {a.label: expected_value(a, card.expected[a.key]) for a in card.asks if a.key != ask.key}


def clock_text(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}"


@dataclass
class CardResult:
    """What happened on one card. ``marks`` pairs each rubric item with True/False (None: not marked)."""

    card_id: str
    title: str
    params: dict
    budget_s: float
    seconds: float = 0.0
    answers: list = field(default_factory=list)  # (ask key, typed text, Verdict)
    hints_used: int = 0
    marks: list = field(default_factory=list)
    finished: bool = False
    timed_out: bool = False

    @property
    def score(self) -> float | None:
        """Share of rubric points earned; without a rubric the share of right numbers; None if neither."""
        marked = [m for _, m in self.marks if m is not None]
        if marked:
            return sum(marked) / len(marked)
        if self.answers:
            return sum(v.correct for _, _, v in self.answers) / len(self.answers)
        return None

    @property
    def mistakes(self) -> list[dict]:
        return [{"ask": key, "answer": text, "mistake": v.mistake, "expected": v.expected}
                for key, text, v in self.answers if not v.correct]


class Session:
    """Run ``card_ids`` in order. ``seed`` None keeps the fixed cards; ``budget_s`` is the time per card.

    ``read``/``write``/``clock`` default to the terminal and ``time.monotonic``; ``state_path`` None means
    :func:`ringlab.practice.state.state_path`, and ``save=False`` keeps no record.
    """

    def __init__(self, card_ids: list[str], *, seed: int | None, budget_s: float = 300.0, mock: bool = False,
                 read: Callable[[str], str] = input, write: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic, state_path=None, save: bool = True):
        self.card_ids, self.seed, self.budget_s, self.mock = list(card_ids), seed, float(budget_s), mock
        self._read, self.write, self.clock = read, write, clock
        self.state_path, self.save = state_path, save
        self.results: list[CardResult] = []

    # -- input -------------------------------------------------------------------------------------------
    def read(self, prompt: str) -> str:
        """One line from the learner, checked as every CLI text is (no control characters, bounded length);
        end of input and Ctrl-C raise :class:`Quit`. A rejected line is reported and asked again."""
        while True:
            try:
                line = self._read(prompt)
            except (EOFError, KeyboardInterrupt):
                raise Quit from None
            if not line.strip():
                return ""
            try:
                return cli_args.check_text(line.strip(), max_len=ANSWER_MAX)
            except ValueError as exc:
                self.write(f"  not read: the answer {exc}")

    def _left(self, result: CardResult, started: float) -> float:
        return result.budget_s - (self.clock() - started)

    def _status(self, result: CardResult, started: float) -> str:
        left = self._left(result, started)
        return f"({clock_text(left)} left)" if left >= 0 else f"(over by {clock_text(-left)})"

    # -- one card ----------------------------------------------------------------------------------------
    def _hint(self, card: Card, result: CardResult) -> None:
        if result.hints_used < len(card.hints):
            result.hints_used += 1
            self.write(f"  hint {result.hints_used}/{len(card.hints)}: {card.hints[result.hints_used - 1]}")
        else:
            self.write("  no more hints; 's' shows the answer")

    def _ask_numbers(self, card: Card, result: CardResult, started: float, values: dict) -> None:
        for ask in card.asks:
            unit = ask.show or UNIT_NAMES.get(ask.unit, ask.unit)
            others = other_answers(card, ask)
            while True:
                if self.mock and self._left(result, started) < 0:
                    result.timed_out = True
                    self.write("  time is up for this card")
                    return
                line = self.read(f"{self._status(result, started)} {ask.label} [{unit}]> ")
                if line in ("h", "H"):
                    self._hint(card, result)
                    continue
                if line in ("q", "Q"):
                    raise Quit
                if line in ("s", "S", ""):
                    return
                try:
                    verdict = check_answer(ask, card.expected[ask.key], line, values, others)
                except (ValueError, TypeError) as exc:
                    self.write(f"  not read: {exc}")
                    continue
                result.answers.append((ask.key, line, verdict))
                self.write(f"  {verdict.message}")
                break

    def _think(self, card: Card, result: CardResult, started: float) -> None:
        while True:
            line = self.read(f"{self._status(result, started)} answer aloud or on paper; Enter shows the answer> ")
            if line in ("h", "H"):
                self._hint(card, result)
            elif line in ("q", "Q"):
                raise Quit
            else:
                return

    def _mark(self, card: Card, result: CardResult) -> None:
        verdicts = {key: v for key, _, v in result.answers}
        if card.rubric:
            self.write("\nRUBRIC (what an interviewer scores)")
        for item in card.rubric:
            key, text = split_rubric(item)
            if key:
                mark = key in verdicts and verdicts[key].correct
                self.write(f"  [{'x' if mark else ' '}] {text} (marked from your answer)")
            else:
                mark = None
                while mark is None:
                    line = self.read(f"  [?] {text} -- did you? [y/n, q to stop]> ").lower()
                    if line == "q":
                        raise Quit
                    mark = {"y": True, "yes": True, "n": False, "no": False}.get(line)
                    if mark is None:
                        self.write("  type y or n (q ends the session)")
            result.marks.append((text, mark))

    def run_card(self, card: Card, index: int) -> CardResult:
        result = CardResult(card.id, card.title, card.params, self.budget_s)
        self.results.append(result)
        drawn = f", seed {self.seed}" if self.seed is not None and card.params else ""
        limit = "limit" if self.mock else "budget"
        self.write(f"\n=== card {index + 1}/{len(self.card_ids)} · {card.id} {card.title} · "
                   f"{limit} {clock_text(self.budget_s)}{drawn} ===\n")
        self.write("QUESTION\n" + card.question + f"\n\n[{COMMANDS}]")
        started = self.clock()
        values = card.values
        try:
            if card.asks:
                self._ask_numbers(card, result, started, values)
            else:
                self._think(card, result, started)
        finally:
            result.seconds = self.clock() - started
        answered = {key for key, _, _ in result.answers}
        for ask in (a for a in card.asks if a.key not in answered):  # the verdicts showed the others
            worked = format_value(expected_value(ask, card.expected[ask.key]), ask.unit, ask.show)
            self.write(f"  {ask.label}: {worked}")
        self.write("\nANSWER\n" + card.answer)
        self._mark(card, result)
        self.write("\nFOLLOW-UPS\n" + card.followups)
        score = result.score
        self.write(f"\n{card.id}: " + (f"score {score:.0%}" if score is not None else "no score")
                   + f" · {clock_text(result.seconds)} of {clock_text(self.budget_s)}"
                   + (" (time ran out)" if result.timed_out else "") + f" · hints {result.hints_used}")
        result.finished = True
        return result

    # -- the session -------------------------------------------------------------------------------------
    def _record(self, data: dict, result: CardResult) -> None:
        right = sum(v.correct for _, _, v in result.answers)
        state_file.record_card(data, result.card_id, right, len(result.answers) - right,
                               result.score if result.finished else None, result.mistakes, self.seed)

    def run(self) -> list[CardResult]:
        """Run every card (until the learner quits); save each finished card; return the results."""
        data = state_file.load(self.state_path) if self.save else state_file.empty()
        if self.seed is not None:
            self.write(f"seed {self.seed} (replay this session with --seed {self.seed})")
        quit_early = False
        for i, cid in enumerate(self.card_ids):
            try:
                self.run_card(prepare(cid, self.seed), i)
            except Quit:
                quit_early = True
            last = self.results[-1] if self.results else None
            if last and (last.finished or last.answers):  # a card left before any answer is not an attempt
                self._record(data, last)
            if self.save and self.results:
                state_file.save(data, self.state_path)
            if quit_early:
                self.write("\nsession ended; what was done is saved" if self.save else "\nsession ended")
                break
        self.summary()
        if self.save:
            scores = [r.score for r in self.results if r.finished and r.score is not None]
            data["sessions"].append({"seed": self.seed, "cards": [r.card_id for r in self.results],
                                     "score": round(sum(scores) / len(scores), 4) if scores else None,
                                     "mock": self.mock, "at": state_file.now()})
            path = state_file.save(data, self.state_path)
            self.write(f"progress saved to {path}")
        return self.results

    def summary(self) -> None:
        done = [r for r in self.results if r.finished]
        if not self.results:
            return
        self.write(f"\n=== {'mock interview' if self.mock else 'session'} summary: {len(done)} of "
                   f"{len(self.card_ids)} cards ===")
        for r in self.results:
            score = f"{r.score:.0%}" if r.score is not None else "--"
            state = "" if r.finished else " (unfinished)"
            over = " over time" if r.seconds > r.budget_s else ""
            self.write(f"  {r.card_id} {r.title[:44]:<44} {score:>5}  {clock_text(r.seconds)}{over}{state}")
        scores = [r.score for r in done if r.score is not None]
        if scores:
            self.write(f"  score {sum(scores) / len(scores):.0%} over {len(scores)} scored cards; "
                       f"total time {clock_text(sum(r.seconds for r in self.results))}")
        mistakes = [(r.card_id, m) for r in self.results for m in r.mistakes]
        if mistakes:
            self.write("  mistakes:")
            for cid, m in mistakes:
                self.write(f"    {cid} {m['ask']}: {m['answer']!r}: {m['mistake']}")

