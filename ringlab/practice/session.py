"""A practice session: cards one after another, each on a visible clock, numbers drawn fresh and checked.

Per card: the question (a parametrised card's numbers drawn from a generator seeded by the session
seed and the card number, so ``--seed S`` replays a session and ``--seed S 05`` replays one card of
it); then each number the card asks for, typed with its unit and checked (:mod:`ringlab.practice.units`);
at any prompt ``h`` shows the next hint about that number (they go from a nudge to the method), ``s``
shows that number's answer and goes on to the next, ``q`` ends the session. A wrong number is told its named slip (or, when the slip is
not recognised, how far off it is and the next hint) and gets a second try before the answer is shown.
Then the worked answer, the rubric (items tied to a typed number are marked from it, the others by the
learner, y/n), and the follow-ups. Every finished card is saved to the state file at once, merged under
a lock with what other sessions saved (:mod:`ringlab.practice.state`); a record that cannot be written
is kept and saved at the end, or to a fallback file that the session names. End-of-input and Ctrl-C
end the session cleanly with what was done saved.

In a mock interview (``mock=True``) the budget is a limit: once it is spent the card stops taking
answers and moves to the reveal; the summary names the score, the time per card and the mistakes.

All I/O goes through ``read(prompt) -> str`` and ``write(text)`` and time through ``clock()``, so tests
and the notebook widget drive a session without a terminal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ringlab import cli_args
from ringlab.check.cards import Card, draw_params, load_card, split_rubric
from ringlab.practice import state as state_file
from ringlab.practice.units import AskAgain, check_answer, expected_value, format_value
from ringlab.textfmt import wrap_lines

ANSWER_MAX = 100  # characters per typed line: no answer is longer
TRIES = 2  # tries per number before the answer is shown: the first wrong one is told its slip or a hint
COMMANDS = "h hint · s show this answer · q quit"
UNIT_NAMES = {"1": "number"}  # how a prompt names an ask's unit when it has no ``show``


class Quit(Exception):
    """The learner ended the session (``q``, end of input or Ctrl-C)."""


def card_rng(seed: int, card_id: str):
    """The generator a card's numbers are drawn from: a function of the session seed and the card only."""
    return np.random.default_rng([seed, int(card_id)])


def prepare(card_id: str, seed: int | None) -> Card:
    """Card ``card_id`` with numbers drawn for ``seed`` (the card's fixed numbers when ``seed`` is None)."""
    params = draw_params(card_id, card_rng(seed, card_id)) if seed is not None else {}
    return load_card(card_id, params)


def other_answers(card: Card, ask) -> dict[str, float]:
    """The card's other asks, label -> worked value (base unit): typing one of them for ``ask`` is named."""
    return {a.label: expected_value(a, card.expected[a.key]) for a in card.asks if a.key != ask.key}


def named_slips(card: Card, ask) -> list[tuple[float, str]]:
    """The card's named slips for ``ask`` as (value in the base unit, sentence): what :func:`check_answer` names."""
    return [(expected_value(ask, s.value), s.says) for s in card.slips_for(ask.key)]


def check(card: Card, ask, text: str):
    """:func:`ringlab.practice.units.check_answer` of ``text`` for ``ask`` with everything the card knows: the
    world size in its values, its other asks' answers and its named slips."""
    return check_answer(ask, card.expected[ask.key], text, card.values, other_answers(card, ask),
                        named_slips(card, ask))


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
    answers: list = field(default_factory=list)  # (ask key, typed text, Verdict), every try
    hints_used: int = 0
    hints_by_ask: dict = field(default_factory=dict)  # ask key (None: the whole question) -> hints shown
    marks: list = field(default_factory=list)
    finished: bool = False
    timed_out: bool = False

    @property
    def final(self) -> dict:
        """Ask key -> the verdict of its last try."""
        return {key: v for key, _, v in self.answers}

    @property
    def score(self) -> float | None:
        """Share of rubric points earned; without a rubric the share of numbers right in the end; None if neither."""
        marked = [m for _, m in self.marks if m is not None]
        if marked:
            return sum(marked) / len(marked)
        if self.answers:
            return sum(v.correct for v in self.final.values()) / len(self.final)
        return None

    @property
    def mistakes(self) -> list[dict]:
        """Every wrong try, also one put right on the second try (the slip is worth reviewing)."""
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
    def _hint(self, card: Card, result: CardResult, key: str | None = None) -> bool:
        """Show the next hint about ask ``key`` (None: the whole question); False when none is left."""
        hints = card.hints_for(key)
        shown = result.hints_by_ask.get(key, 0)
        if shown >= len(hints):
            self.write("  no more hints; 's' shows this answer")
            return False
        result.hints_by_ask[key] = shown + 1
        result.hints_used += 1
        self.write(f"  hint {shown + 1}/{len(hints)}: {hints[shown]}")
        return True

    @staticmethod
    def _worked(card: Card, ask) -> str:
        return format_value(expected_value(ask, card.expected[ask.key]), ask.unit, ask.show)

    def _ask_numbers(self, card: Card, result: CardResult, started: float) -> set:
        """Ask each number, with a second try after a wrong one; returns the keys whose answer was shown."""
        shown = set()
        for ask in card.asks:
            unit = ask.show or UNIT_NAMES.get(ask.unit, ask.unit)
            tries = 0
            while True:
                if self.mock and self._left(result, started) < 0:
                    result.timed_out = True
                    self.write("  time is up for this card")
                    return shown
                again = " (second try)" if tries else ""
                line = self.read(f"{self._status(result, started)} {ask.label} [{unit}]{again}> ")
                if line in ("h", "H"):
                    self._hint(card, result, ask.key)
                    continue
                if line in ("q", "Q"):
                    raise Quit
                if line in ("s", "S", ""):
                    self.write(f"  {ask.label}: {self._worked(card, ask)}")
                    shown.add(ask.key)
                    break
                try:
                    verdict = check(card, ask, line)
                except AskAgain as exc:
                    self.write(f"  {exc}")
                    continue
                except (ValueError, TypeError) as exc:
                    self.write(f"  not read: {exc}")
                    continue
                tries += 1
                result.answers.append((ask.key, line, verdict))
                if verdict.correct or tries >= TRIES:
                    self.write(f"  {verdict.message}")
                    shown.add(ask.key)
                    break
                self.write(f"  {verdict.feedback}. Try again ('h' hint, 's' shows this answer)")
                if not verdict.named and result.hints_by_ask.get(ask.key, 0) < len(card.hints_for(ask.key)):
                    self._hint(card, result, ask.key)
        return shown

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
        verdicts = result.final
        tries = {key: sum(k == key for k, _, _ in result.answers) for key in verdicts}
        if card.rubric:
            self.write("\nRUBRIC (what an interviewer scores)")
        for item in card.rubric:
            key, text = split_rubric(item)
            if key:
                mark = key in verdicts and verdicts[key].correct
                how = " on the second try" if mark and tries[key] > 1 else ""
                self.write(f"  [{'x' if mark else ' '}] {text} (marked from your answer{how})")
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
        self.write("QUESTION\n" + wrap_lines(card.question, hang="") + f"\n\n[{COMMANDS}]")
        started = self.clock()
        shown = set()
        try:
            if card.asks:
                shown = self._ask_numbers(card, result, started)
            else:
                self._think(card, result, started)
        finally:
            result.seconds = self.clock() - started
        for ask in (a for a in card.asks if a.key not in shown):  # the time ran out before these
            self.write(f"  {ask.label}: {self._worked(card, ask)}")
        self.write("\nANSWER\n" + wrap_lines(card.answer, hang=""))
        self._mark(card, result)
        self.write("\nFOLLOW-UPS\n" + wrap_lines(card.followups, hang=""))
        score = result.score
        self.write(f"\n{card.id}: " + (f"score {score:.0%}" if score is not None else "no score")
                   + f" · {clock_text(result.seconds)} of {clock_text(self.budget_s)}"
                   + (" (time ran out)" if result.timed_out else "") + f" · hints {result.hints_used}")
        result.finished = True
        return result

    # -- the session -------------------------------------------------------------------------------------
    def _record(self, result: CardResult) -> None:
        """Queue one card for the record: numbers right in the end, numbers still wrong, score, every slip."""
        final = result.final
        right = sum(v.correct for v in final.values())
        score = result.score if result.finished else None
        mistakes, seed, cid = result.mistakes, self.seed, result.card_id
        self._pending.append(lambda d: state_file.record_card(d, cid, right, len(final) - right, score, mistakes, seed))

    def _note(self, text: str) -> None:
        self.write(text.replace("ringlab practice: note: ", "note: "))

    def _commit(self) -> bool:
        """Merge the queued changes into the record on disk; on failure keep them (said once) and return False."""
        if not self._pending:
            return True
        pending = list(self._pending)
        try:
            state_file.update(lambda d: [change(d) for change in pending], self.state_path, warn=self._note)
        except OSError as exc:
            if self._failure is None:
                self.write(f"note: could not save your practice record ({exc}); your answers are kept and "
                           "saved at the end")
            self._failure = exc
            return False
        del self._pending[:len(pending)]
        self._failure = None
        return True

    def _finish_record(self) -> None:
        """Save what is queued; when the record cannot be written, write this session's record to a fallback
        file, or print it, so that nothing answered is lost."""
        path = self.state_path or state_file.state_path()
        if self._commit():
            self.write(f"progress saved to {path}")
            return
        data = state_file.empty()
        for change in self._pending:
            change(data)
        fallback = state_file.save_fallback(data)
        if fallback:
            self.write(f"could not save your practice record to {path} ({self._failure}); "
                       f"this session's record is in {fallback}")
        else:
            self.write(f"could not save your practice record to {path} ({self._failure}), nor a copy in the "
                       "temporary folder; this session's record:\n" + json.dumps(data, indent=1, sort_keys=True))

    def run(self) -> list[CardResult]:
        """Run every card (until the learner quits); save each finished card; return the results."""
        self._pending, self._failure = [], None
        if self.save:
            state_file.load(self.state_path, warn=self._note)  # a bad record is set aside now, with its note
        if self.seed is not None:
            self.write(f"seed {self.seed} (replay this session with --seed {self.seed})")
        quit_early = False
        for i, cid in enumerate(self.card_ids):
            try:
                self.run_card(prepare(cid, self.seed), i)
            except Quit:
                quit_early = True
            last = self.results[-1] if self.results else None
            if self.save and last and (last.finished or last.answers):  # left before any answer: no attempt
                self._record(last)
                self._commit()
            if quit_early:
                self.write("\nsession ended" + ("; what was done is saved" if self.save and not self._failure else ""))
                break
        self.summary()
        if self.save:
            scores = [r.score for r in self.results if r.finished and r.score is not None]
            entry = {"seed": self.seed, "cards": [r.card_id for r in self.results],
                     "score": round(sum(scores) / len(scores), 4) if scores else None,
                     "mock": self.mock, "at": state_file.now()}
            self._pending.append(lambda d: d["sessions"].append(entry))
            self._finish_record()
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

