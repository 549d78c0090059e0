"""Typed answers with units: read "140 GB", "130.4 GiB", "1.4e11 B", "3.9 ms", "0.44", "~85 GB/s", and check them
as a fair interviewer would.

API
---
``parse_answer(text, unit, default="", noun="")``  -> :class:`Reading` (the value in the base unit of ``unit``,
                                                     and the precision it was typed with)
``check_answer(ask, expected, text, values, others, slips)`` -> :class:`Verdict` (right, or the slip named)
``format_value(value, unit, show)``                  the worked value as the card prints it

``unit`` is the dimension of the answer, one of :data:`ringlab.check.cards.UNITS`: ``B`` (bytes),
``s`` (seconds), ``B/s``, ``FLOP/B`` or ``1`` (a plain number: also ``x``, ``%``, ``k``, and the noun
a count counts, "1,280 blocks"). The number grammar and the unit tables are :mod:`ringlab.calc.parsing`'s
(case-sensitive: ``Gb`` is gigabits, ``GB`` gigabytes). A bare number is in ``default`` (the unit the
question asks in: "140e9" for bytes, "3.9" for ms). "~", "about", "roughly" and the like before the
number are read and ignored.

Right is within the ask's tolerance, or equal to the answer at the precision typed with at least two
significant figures ("8.4 MB" for 8,388,608 B, "30%" for 7/23). A wrong answer is named when it
matches, at the precision typed, a slip the card declares (its ``SLIPS``), another ask's answer, or a
generic slip: 8 (bits vs bytes), the world size (per-rank vs total), 1000 (a prefix slip), 100 (a
percentage for a fraction), and the decimal against the binary prefix only where that prefix fits the
magnitude (1 GiB = 1.074 GB at GB scale; 1.049 at MB scale). These windows are the precision typed, so
"2-10 % off" is not called a prefix slip. A bare byte count against a GB prompt, or an answer right
only to one significant figure, is sent back without spending the try (:class:`AskAgain`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from ringlab.calc import format_bytes, parsing

# unit text -> scale to the base unit, per dimension (the tables of ringlab.calc.parsing where one exists)
SCALES: dict[str, dict[str, Fraction]] = {
    "B": {u: s for u, s in parsing.SIZE_UNITS.items() if u},
    "s": parsing.DURATION_UNITS,
    "B/s": {u: s for u, s in parsing.BANDWIDTH_UNITS.items() if "/" in u or u.endswith("ps")},
    "FLOP/B": {"FLOP/B": Fraction(1), "FLOPs/B": Fraction(1), "flop/B": Fraction(1)},
    "1": {"x": Fraction(1), "\u00d7": Fraction(1), "times": Fraction(1), "%": Fraction(1, 100),
          "k": Fraction(10**3), "K": Fraction(10**3), "thousand": Fraction(10**3), "M": Fraction(10**6),
          "million": Fraction(10**6), "billion": Fraction(10**9)},
}
KINDS = {"B": "a size in bytes", "s": "a time", "B/s": "a bandwidth", "FLOP/B": "an intensity in FLOP/B",
         "1": "a plain number"}
BASE_NAMES = {"B": "bytes", "s": "seconds", "B/s": "bytes per second", "FLOP/B": "FLOP/B", "1": "a plain number"}
EXAMPLES = {"B": "140 GB, 130.4 GiB, 1.4e11 B, 1,024 MiB", "s": "3.9 ms, 250 us, 0.004 s",
            "B/s": "400 Gb/s, 50 GB/s", "FLOP/B": "64, 64 FLOP/B", "1": "0.4375, 7/16, 43.75 %, 1.5x, 7.68k"}
_APPROX = re.compile(r"\s*(?:~=?|\u2248|about|approx\.?|approximately|around|roughly|circa|ca\.)\s*", re.IGNORECASE)
_SPLIT = re.compile(r"\s*(?P<number>.*?[0-9])\s*(?P<unit>[^\d\s][^\d]*?)?\s*")
_RATIO = re.compile(r"\s*(?P<num>[^/]+?)\s*/\s*(?P<den>[^/]+?)\s*")  # "7/16", for plain numbers only
# the digits of a number that ringlab.calc.parsing has accepted: what its precision is read from
_DIGITS = re.compile(r"\s*[+-]?(?P<int>[0-9,_]*)(?:\.(?P<frac>[0-9]*))?(?:[eE](?P<exp>[+-]?[0-9]+))?\s*")
_PREFIXES = ((1, "kB", "KiB"), (2, "MB", "MiB"), (3, "GB", "GiB"), (4, "TB", "TiB"), (5, "PB", "PiB"))
_PREFIX_OF = {"k": 1, "K": 1, "Ki": 1, "M": 2, "Mi": 2, "G": 3, "Gi": 3, "T": 4, "Ti": 4, "P": 5, "Pi": 5}
EXACT_DIGITS = 99  # the precision of an exact form such as 7/16


@dataclass(frozen=True)
class Reading:
    """What an answer was read as: ``value`` in the base unit of ``unit``, the ``unit_text`` typed ("" if bare),
    ``resolution`` (half a unit of the last digit typed, in the base unit: "8.4 MB" -> 50,000 B; 0 for an
    exact fraction) and ``digits``, the significant figures typed ("30" has 2, "0.0039" has 2)."""

    value: float
    unit: str
    unit_text: str
    resolution: float = 0.0
    digits: int = EXACT_DIGITS


class WrongDimension(ValueError):
    """The answer carries a unit of another dimension ("3 ms" for a size): a graded mistake, not a typo."""


class AskAgain(ValueError):
    """An answer that cannot be graded fairly as typed (a byte count for a GB prompt, one significant figure):
    the message says why, and the learner answers again without spending a try."""


def _precision(number: str) -> tuple[Fraction, int]:
    """(half a unit of the last typed digit, significant figures) of a number text that parsing accepted.
    Trailing zeros of a whole number count as typed: "30" means 30 +- 0.5, not 30 +- 5."""
    m = _DIGITS.fullmatch(number)
    whole = (m.group("int") or "").replace(",", "").replace("_", "")
    frac = m.group("frac") or ""
    digits = len((whole + frac).lstrip("0")) or 1
    return Fraction(1, 2) * Fraction(10) ** (int(m.group("exp") or 0) - len(frac)), digits


def parse_answer(text: str, unit: str, default: str = "", noun: str = "") -> Reading:
    """Read ``text`` as a quantity of dimension ``unit``; a bare number is in ``default`` (base unit if "").
    ``noun`` (a plain number only) is what the count counts: "1,280 blocks" and "1.28k blocks" read as 1280.

    Raises TypeError if ``text`` is not a str, :class:`WrongDimension` for a unit of another dimension,
    ValueError for anything else unreadable (the message names the accepted units).
    """
    if not isinstance(text, str):
        raise TypeError(f"answer must be a str, got {type(text).__name__}")
    if unit not in SCALES:
        raise ValueError(f"unit={unit!r}; accepted: {', '.join(SCALES)}")
    if len(text) > parsing.MAX_TEXT:
        raise ValueError(f"answer is {len(text)} characters long; a number has at most {parsing.MAX_TEXT}")
    approx = _APPROX.match(text)
    word_or_sign = approx and (approx.group().strip()[:1] in "~\u2248" or approx.group()[-1:].isspace())
    if word_or_sign and approx.end() < len(text):
        text = text[approx.end():]  # "~85", "about 85" (but not the "a" of "abc")
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
    if noun and unit == "1":
        typed = re.sub(rf"\s*\b{noun}s?$", "", typed, flags=re.IGNORECASE)  # "1,280 blocks", "7.68k Blocks"
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
        counts = f", or {noun}s" if noun else ""
        raise ValueError(f"unknown unit {typed!r} for {KINDS[unit]}{hint} (e.g. {EXAMPLES[unit]}{counts})")
    half, digits = _precision(m.group("number"))
    return Reading(float(Fraction(number) * scale), unit, typed, float(half * scale), digits)


@dataclass(frozen=True)
class Verdict:
    """The check of one answer: ``correct``, a one-line ``message`` (with the worked answer), and ``mistake``
    naming the slip ("wrong value" when none is recognised, None when right). ``feedback`` is the message
    without the worked answer (what a learner with a try left is told) and ``named`` says whether the
    mistake was recognised (a slip, another ask's number, a unit of another dimension)."""

    correct: bool
    message: str
    mistake: str | None = None
    answered: float | None = None  # what was typed, in the base unit (None if unreadable as this dimension)
    expected: float | None = None  # the worked value, in the base unit
    feedback: str = ""
    named: bool = False


def _prefix_pairs(unit: str, want: float, reading: Reading, default: str) -> list[tuple[int, str, str]]:
    """The decimal/binary prefix pairs that fit this answer: the prefix typed (or of the prompt's unit for a
    bare number) and those of the answer's magnitude (0.1 to 1000 of the prefix: 0.8 GB and 800 MB)."""
    if unit not in ("B", "B/s"):
        return []
    typed = reading.unit_text or default
    ks = {_PREFIX_OF[p] for p in (typed[:2], typed[:1]) if p in _PREFIX_OF}
    ks |= {k for k, _, _ in _PREFIXES if 0.1 <= abs(want) / 1000**k < 1000}
    return [pair for pair in _PREFIXES if pair[0] in ks]


def _slips(world_size: int | None, noun: str, unit: str, pairs) -> list[tuple[float, str, bool]]:
    """(factor, name, is a prefix pair) of the generic slips an answer in ``unit`` can make: the fitting
    decimal/binary prefix pairs and bits against bytes only for byte quantities, a thousand for any prefixed
    unit, a hundred for a plain number (a percentage typed where a fraction was asked), the count for
    per-rank against total."""
    slips = [(1024**k / 1000**k, f"{dec} vs {binary} confusion (1 {binary} = {1024**k / 1000**k:.4g} {dec})", True)
             for k, dec, binary in pairs]
    if unit in ("B", "B/s"):
        slips.append((8.0, "bits vs bytes (a factor of 8)", False))
    if world_size and world_size > 1:
        slips.append((float(world_size), f"per-{noun} vs total (a factor of {world_size:,})", False))
    if unit == "1":
        slips.append((100.0, "a percentage where a fraction was asked, or the other way (a factor of 100)", False))
    else:
        slips.append((1000.0, "a prefix slip (a factor of 1000: ms vs s, MB vs GB)", False))
    return slips


def format_value(value: float, unit: str, show: str = "") -> str:
    """``value`` (base unit of ``unit``) as the card prints it: bytes with GB and GiB, times in ``show``."""
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


def _how_far(got: float, want: float) -> str:
    """How far ``got`` is from ``want`` in words a person reads: a percentage near 1x, a factor beyond 2x."""
    if want == 0:
        return "the answer is 0"
    ratio = got / want
    if ratio <= 0:
        return "yours is 0" if ratio == 0 else "yours has the wrong sign"
    if 0.5 <= ratio <= 2:
        pct = (ratio - 1) * 100
        return f"off by {pct:+.0f}%" if abs(pct) >= 10 else f"off by {pct:+.2g}%"
    if not 1e-4 < ratio < 1e4:
        return f"yours is about 10^{math.log10(ratio):.0f} times the answer"
    big = max(ratio, 1 / ratio)
    times = f"{big:.3g}" if big < 100 else f"{big:,.0f}"
    return f"yours is {times} times the answer" if ratio > 1 else f"yours is 1/{times} of the answer"


def _binary_note(want: float, unit: str) -> str:
    """ " (exactly 8 MiB; 1 MiB = 1.049 MB)" when the answer is a whole number of a binary prefix, else ""."""
    if unit not in ("B", "B/s") or want <= 0:
        return ""
    for k, dec, binary in reversed(_PREFIXES):
        q = want / 1024**k
        if 1 <= q < 10_000 and float(q).is_integer():
            per = "/s" if unit == "B/s" else ""
            return f" (exactly {q:,.0f} {binary}{per}; 1 {binary} = {1024**k / 1000**k:.4g} {dec})"
    return ""


def _base_unit_message(ask, text: str) -> str:
    return (f"that looks like {BASE_NAMES[ask.unit]}; the question asks {ask.show}: convert it, or type the unit "
            f"('{text.strip()} {ask.unit}')")


def check_answer(ask, expected: float, text: str, values: dict | None = None,
                 others: dict[str, float] | None = None, slips=()) -> Verdict:
    """Check ``text`` against ``expected`` (``values()[ask.key]``, in the ask's ``show`` unit) for an
    :class:`ringlab.check.cards.Ask`. ``values`` holds the count named by ``ask.world_size``; ``others`` maps
    the labels of the card's other asks to their values (base unit), so that answering one question with
    another's number is named; ``slips`` are the card's named slips for this ask, (value in the base unit,
    sentence) pairs (:func:`ringlab.practice.session.named_slips`).

    Raises :class:`AskAgain` (a ValueError) when the answer cannot be graded as typed, ValueError/TypeError
    for an unreadable answer (ask again); a unit of another dimension is a wrong answer ("wrong units")."""
    want = expected_value(ask, expected)
    shown = format_value(want, ask.unit, ask.show)
    try:
        got = parse_answer(text, ask.unit, default=ask.show, noun=getattr(ask, "noun", ""))
    except WrongDimension as exc:
        return Verdict(False, f"wrong units: {exc}. The answer: {shown}", "wrong units", None, want,
                       f"wrong units: {exc}", True)
    x, res = got.value, got.resolution
    noise = 1e-9 * max(abs(x), abs(want), 1e-300)  # float rounding of a value typed in full
    if abs(x - want) <= max(ask.rel_tol * abs(want), noise):
        return Verdict(True, f"right: {shown}", None, x, want)
    at_precision = got.digits >= 2 and abs(x - want) <= res + noise

    def within(value: float, tol: float) -> bool:  # typed digits count only where they tell value from want
        return abs(x - value) <= max(res if res <= abs(value - want) / 2 else 0.0, tol * abs(value), noise)

    scale = float(SCALES[ask.unit].get(ask.show, 1)) if ask.show else 1.0
    looks_base = not got.unit_text and scale != 1 and want > 0 and x > 0  # a bare number, maybe in the base unit
    if looks_base and abs(x / scale - want) <= max(ask.rel_tol * want, res / scale, noise):
        raise AskAgain(_base_unit_message(ask, text))

    # what the learner may have computed instead, most specific first: the card's slips, another ask's answer,
    # then the generic slips; a slip's window is the precision typed, widened to the ask's tolerance only
    # while that stays well clear of the answer (never for a prefix pair, whose factor is near 1)
    def clear(value: float) -> float:
        return min(ask.rel_tol, abs(value / want - 1) / 4) if want else ask.rel_tol

    groups = [[(v, says, "") for v, says in slips if within(v, clear(v))],
              [(v, f"that is the {label}, another quantity", "") for label, v in (others or {}).items()
               if within(v, clear(v))]]
    world = int((values or {}).get(ask.world_size, 0)) if ask.world_size else None
    pairs = _prefix_pairs(ask.unit, want, got, ask.show)
    generic = []
    for factor, name, prefix in _slips(world, ask.per, ask.unit, pairs):
        for r, direction in ((factor, "too large"), (1 / factor, "too small")):
            if within(want * r, 0.0 if prefix else clear(want * r)):
                generic.append((want * r, name, f"; yours is {direction} by exactly that"))
    groups.append(generic)
    found = next((g for g in groups if g), [])
    if found and not (at_precision and abs(x - want) <= min(abs(x - v) for v, _, _ in found)):
        name = " or ".join(dict.fromkeys(n for _, n, _ in found))  # two slips can share a factor: name both
        said = f"wrong: {name}{found[0][2]}"
        return Verdict(False, f"{said}. The answer: {shown}", name, x, want, said, True)
    if at_precision:
        return Verdict(True, f"right to the {got.digits} figures you typed: {shown}{_binary_note(want, ask.unit)}",
                       None, x, want)
    if abs(x - want) <= res + noise:
        raise AskAgain(f"{text.strip()} matches the answer only to 1 significant figure; give at least 2")
    if looks_base and abs(math.log10(x / scale / want)) < min(1.0, abs(math.log10(x / want))):
        raise AskAgain(_base_unit_message(ask, text))  # nearer the answer read in the base unit
    said = f"wrong value: {_how_far(x, want)}"
    return Verdict(False, f"{said}. The answer: {shown}", "wrong value", x, want, said, False)
