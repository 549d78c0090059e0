"""Typed answers with units: read "140 GB", "130.4 GiB", "1.4e11 B", "3.9 ms", "0.44", and check them.

API
---
``parse_answer(text, unit, default="")``  -> :class:`Reading` (the value in the base unit of ``unit``)
``check_answer(ask, expected, text, values)`` -> :class:`Verdict` (right within tolerance, or the slip named)
``format_value(value, unit, show)``        the worked value as the card prints it

``unit`` is the dimension of the answer, one of :data:`ringlab.check.cards.UNITS`: ``B`` (bytes),
``s`` (seconds), ``B/s``, ``FLOP/B`` or ``1`` (a plain number, also ``x`` and ``%``). The number
grammar and the unit tables are :mod:`ringlab.calc.parsing`'s (case-sensitive: ``Gb`` is gigabits,
``GB`` gigabytes). A bare number is in ``default`` (the unit the question asks in: "140e9" for bytes,
"3.9" for ms).

A wrong answer whose ratio to the right one is a known slip is named (the ratio must match to within
the ask's tolerance, at least 1 %): 1e9/2**30 (and the other decimal/binary prefix pairs) is GB vs
GiB, 8 is bits vs bytes, the world size is per-rank vs total, 1000 is a prefix slip (ms vs s, MB vs GB).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from ringlab.calc import parsing

# unit text -> scale to the base unit, per dimension (the tables of ringlab.calc.parsing where one exists)
SCALES: dict[str, dict[str, Fraction]] = {
    "B": {u: s for u, s in parsing.SIZE_UNITS.items() if u},
    "s": parsing.DURATION_UNITS,
    "B/s": {u: s for u, s in parsing.BANDWIDTH_UNITS.items() if "/" in u or u.endswith("ps")},
    "FLOP/B": {"FLOP/B": Fraction(1), "FLOPs/B": Fraction(1), "flop/B": Fraction(1)},
    "1": {"x": Fraction(1), "%": Fraction(1, 100)},
}
KINDS = {"B": "a size in bytes", "s": "a time", "B/s": "a bandwidth", "FLOP/B": "an intensity in FLOP/B",
         "1": "a plain number"}
EXAMPLES = {"B": "140 GB, 130.4 GiB, 1.4e11 B, 1,024 MiB", "s": "3.9 ms, 250 us, 0.004 s",
            "B/s": "400 Gb/s, 50 GB/s", "FLOP/B": "64, 64 FLOP/B", "1": "0.4375, 7/16, 43.75 %, 1.5x"}
_SPLIT = re.compile(r"\s*(?P<number>.*?[0-9])\s*(?P<unit>[^\d\s][^\d]*?)?\s*")
_RATIO = re.compile(r"\s*(?P<num>[^/]+?)\s*/\s*(?P<den>[^/]+?)\s*")  # "7/16", for plain numbers only


@dataclass(frozen=True)
class Reading:
    """What an answer was read as: ``value`` in the base unit of ``unit``, the ``unit_text`` typed ("" if bare)."""

    value: float
    unit: str
    unit_text: str


class WrongDimension(ValueError):
    """The answer carries a unit of another dimension ("3 ms" for a size): a graded mistake, not a typo."""


def parse_answer(text: str, unit: str, default: str = "") -> Reading:
    """Read ``text`` as a quantity of dimension ``unit``; a bare number is in ``default`` (base unit if "").

    Raises TypeError if ``text`` is not a str, :class:`WrongDimension` for a unit of another dimension,
    ValueError for anything else unreadable (the message names the accepted units).
    """
    if not isinstance(text, str):
        raise TypeError(f"answer must be a str, got {type(text).__name__}")
    if unit not in SCALES:
        raise ValueError(f"unit={unit!r}; accepted: {', '.join(SCALES)}")
    if len(text) > parsing.MAX_TEXT:
        raise ValueError(f"answer is {len(text)} characters long; a number has at most {parsing.MAX_TEXT}")
    ratio = _RATIO.fullmatch(text) if unit == "1" else None
    if ratio:
        den = parsing.parse_real(ratio.group("den"), "denominator")
        if den == 0:
            raise ValueError(f"{text.strip()!r}: the denominator is 0")
        return Reading(parsing.parse_real(ratio.group("num"), "numerator") / den, unit, "")
    m = _SPLIT.fullmatch(text)
    if not m:
        raise ValueError(f"{text.strip()[:40]!r} is not a number; write e.g. {EXAMPLES[unit]}")
    number = parsing.parse_real(m.group("number"), "answer")  # the one number grammar (no NaN, no '2,5')
    typed = (m.group("unit") or "").strip()
    scales = SCALES[unit]
    if not typed:
        scale = scales.get(default, Fraction(1)) if default else Fraction(1)
    elif typed in scales:
        scale = scales[typed]
    else:
        other = next((d for d, table in SCALES.items() if d != unit and typed in table), None)
        if other:
            raise WrongDimension(f"'{typed}' is {KINDS[other]}, but this answer is {KINDS[unit]} "
                                 f"(e.g. {EXAMPLES[unit]})")
        same_case = [u for u in scales if u.lower() == typed.lower()]
        hint = f"; units are case-sensitive (B = byte, b = bit): did you mean {' or '.join(same_case)}?" \
            if same_case else ""
        raise ValueError(f"unknown unit {typed!r} for {KINDS[unit]}{hint} (e.g. {EXAMPLES[unit]})")
    return Reading(float(Fraction(number) * scale), unit, typed)


@dataclass(frozen=True)
class Verdict:
    """The check of one answer: ``correct``, a one-line ``message``, and ``mistake`` naming the slip (or None)."""

    correct: bool
    message: str
    mistake: str | None = None
    answered: float | None = None  # what was typed, in the base unit (None if unreadable as this dimension)
    expected: float | None = None  # the worked value, in the base unit


def _slips(world_size: int | None, noun: str, unit: str) -> list[tuple[float, str]]:
    """(factor, name) of the slips an answer in ``unit`` can make: decimal against binary prefixes and bits
    against bytes only for byte quantities, a thousand for any prefixed unit, a hundred for a plain number
    (a percentage typed where a fraction was asked), the count for per-rank against total."""
    slips = []
    if unit in ("B", "B/s"):
        for k, (dec, binary) in enumerate((("kB", "KiB"), ("MB", "MiB"), ("GB", "GiB"), ("TB", "TiB")), start=1):
            slips.append((1024**k / 1000**k, f"{dec} vs {binary} confusion (1 {binary} = {1024**k / 1000**k:.4g} {dec})"))
        slips.append((8.0, "bits vs bytes (a factor of 8)"))
    if world_size and world_size > 1:
        slips.append((float(world_size), f"per-{noun} vs total (a factor of {world_size:,})"))
    if unit == "1":
        slips.append((100.0, "a percentage where a fraction was asked, or the other way (a factor of 100)"))
    else:
        slips.append((1000.0, "a prefix slip (a factor of 1000: ms vs s, MB vs GB)"))
    return slips


def format_value(value: float, unit: str, show: str = "") -> str:
    """``value`` (base unit of ``unit``) as the card prints it: bytes with GB and GiB, times in ``show``."""
    from ringlab.calc import format_bytes

    if unit == "B":  # GB and GiB side by side once they are worth showing
        n = int(value) if float(value).is_integer() else float(value)
        return format_bytes(n) if abs(value) >= 1e8 else (f"{n:,} B" if isinstance(n, int) else f"{n:,.1f} B")
    if show and show in SCALES.get(unit, {}):
        return f"{value / float(SCALES[unit][show]):,.4g} {show}"
    if unit == "1" and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4g}" + (f" {unit}" if unit not in ("1",) else "")


def expected_value(ask, expected: float) -> float:
    """``expected`` (``values()[ask.key]``, in the ask's ``show`` unit) in the base unit of ``ask.unit``."""
    return float(expected) * float(SCALES[ask.unit].get(ask.show, Fraction(1)) if ask.show else 1)


def check_answer(ask, expected: float, text: str, values: dict | None = None,
                 others: dict[str, float] | None = None) -> Verdict:
    """Check ``text`` against ``expected`` (``values()[ask.key]``, in the ask's ``show`` unit) for an
    :class:`ringlab.check.cards.Ask`; ``values`` holds the count named by ``ask.world_size``, and ``others``
    maps the labels of the card's other asks to their values (base unit), so that answering one
    question with another's number is named. Raises ValueError/TypeError for an unreadable answer
    (ask again); a unit of another dimension is a wrong answer ("wrong units")."""
    want = expected_value(ask, expected)
    shown = format_value(want, ask.unit, ask.show)
    try:
        got = parse_answer(text, ask.unit, default=ask.show)
    except WrongDimension as exc:
        return Verdict(False, f"wrong units: {exc}. The answer: {shown}", "wrong units", None, want)
    tol = max(ask.rel_tol, 1e-9)
    if math.isclose(got.value, want, rel_tol=tol, abs_tol=1e-12):
        return Verdict(True, f"right: {shown}", None, got.value, want)
    for label, value in (others or {}).items():
        if math.isclose(got.value, value, rel_tol=tol, abs_tol=1e-12):
            name = f"that is the {label}, another quantity"
            return Verdict(False, f"wrong: {name}. The answer: {shown}", name, got.value, want)
    if want != 0 and got.value != 0:
        ratio = got.value / want
        world = int((values or {}).get(ask.world_size, 0)) if ask.world_size else None
        found = [(name, direction) for factor, name in _slips(world, ask.per, ask.unit)
                 for r, direction in ((factor, "too large"), (1 / factor, "too small"))
                 if math.isclose(ratio, r, rel_tol=max(ask.rel_tol, 0.01))]
        if found:  # two slips can share a factor (8 ranks, 8 bits): name both
            name = " or ".join(n for n, _ in found)
            return Verdict(False, f"wrong: {name}; yours is {found[0][1]} by exactly that. The answer: {shown}",
                           name, got.value, want)
    off = (got.value - want) / want if want else math.inf
    return Verdict(False, f"wrong value: off by {off:+.0%}. The answer: {shown}", "wrong value", got.value, want)
