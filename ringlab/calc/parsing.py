"""One grammar for every number a user types: sizes, counts, bandwidths, durations, plain reals and ints.

API
---
``parse_size(text, name)``       "64MiB" | "1GB" | "16Mb" (bits) | "7e9" | 123 -> int bytes
``parse_count(text, name)``      "7B" (billion) | "70M" | "1,000,000" | 7e9 -> int
``parse_bandwidth(text, name)``  "400 Gb/s" | "50GB/s" | "450GB" | 2e11 -> float bytes per second
``parse_duration(text, name)``   "5" | "250ms" | "1.5 us" | "2min" -> float seconds (bare = ``unit``)
``parse_real(text, name)``       finite float within the given limits
``parse_int(text, name)``        int within the given limits ("1,024", "1e3" are fine; "2.5" is not)
``check_int / check_real / check_bool(value, name)``  the same rules for Python arguments (defined in
                                 :mod:`ringlab.validation`, with the range check, for every layer)
``echo_quantity(text, value)``   "400 Gb/s = 50 GB/s": what a unit-bearing input was read as

Grammar (ASCII only; whitespace allowed around the number and before the unit)::

    number  := [+|-] digits [. digits] [(e|E) [+|-] digits]   or   [+|-] . digits [exponent]
    digits  := 0-9 run, or groups of three after 1-3 leading digits, all "," or all "_":
               1000000, 1,000,000, 1_000_000 (never "2,5": a decimal comma is refused, as is
               "1,00" or a mix of "," and "_")

Units are case-sensitive because case carries meaning: ``B`` is a byte, ``b`` a bit
(IEC 80000-13; ``400 Gb/s`` is a NIC's line rate, 50 GB/s), ``M`` is mega and ``m`` would be
milli. Decimal prefixes (k/K, M, G, T, P) are powers of 10, binary ones (Ki, Mi, Gi, Ti, Pi)
powers of 2. A unit typed in the wrong case is refused with the spellings it could mean.

Every value is computed exactly (Fraction) after cheap checks (at most ``MAX_TEXT`` characters,
an exponent of at most ``MAX_EXPONENT``), so ``1e88888888`` is refused at once instead of
building 10**88888888. NaN and infinities are refused everywhere; each function takes limits,
and every error is a ValueError or TypeError whose message names the argument (``name``; for the
command line the option is named by argparse) and the accepted forms.
"""

from __future__ import annotations

import math
import numbers
import sys
import re
from fractions import Fraction

# check_int / check_real / check_bool: the grammar's rules for Python arguments, defined with the range check
# in ringlab.validation (one home for every layer) and named here too, with the rest of the grammar.
from ringlab.validation import argument_text as _label
from ringlab.validation import check_bool, check_int, check_real  # noqa: F401
from ringlab.validation import check_range as _check_range
from ringlab.validation import value_text as _shown

MAX_TEXT = 100  # characters: no sane number is longer
MAX_EXPONENT = 400  # |e| beyond this is refused before any arithmetic
SIZE_MAX = 2**60  # bytes (1 EiB): far above any one message, model or memory
# 1 kB/s: slower than any link a cluster or a GPU has (1 GbE is 125 MB/s); a bandwidth below it is a typo, and
# dividing a GiB by a far smaller one prints times hundreds of digits long.
BANDWIDTH_MIN = 1e3
COUNT_MAX = 10**18
INT64_MAX = 2**63 - 1  # the default upper limit of a whole number: numpy holds it in int64
_FLOAT_MAX = sys.float_info.max  # 1.8e308: a real beyond it has no float
_FLOAT_TINY = 5e-324  # the smallest positive (subnormal) double

_NUMBER = re.compile(
    r"\s*(?P<sign>[+-])?"
    r"(?:(?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]{1,3}(?:_[0-9]{3})+|[0-9]+)(?:\.(?P<frac>[0-9]+))?"
    r"|\.(?P<frac_only>[0-9]+))"
    r"(?:[eE](?P<exp>[+-]?[0-9]+))?",
    re.ASCII,
)

_DECIMAL = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}


def _size_units() -> dict[str, Fraction]:
    units: dict[str, Fraction] = {"": Fraction(1), "B": Fraction(1), "b": Fraction(1, 8), "bit": Fraction(1, 8)}
    for prefix, scale in {**_DECIMAL, **_BINARY}.items():
        units[prefix + "B"] = Fraction(scale)
        units[prefix + "b"] = Fraction(scale, 8)
        units[prefix + "bit"] = Fraction(scale, 8)
    for prefix, scale in _DECIMAL.items():  # a bare decimal prefix counts bytes: "64M", "2k"
        units[prefix] = Fraction(scale)
    return units


SIZE_UNITS = _size_units()
COUNT_UNITS = {"": Fraction(1), "k": Fraction(10**3), "K": Fraction(10**3), "M": Fraction(10**6),
               "B": Fraction(10**9), "b": Fraction(10**9), "G": Fraction(10**9), "T": Fraction(10**12)}
BANDWIDTH_UNITS = {
    **{unit: scale for unit, scale in SIZE_UNITS.items()},  # "450GB" = 450 GB per second
    **{unit + "/s": scale for unit, scale in SIZE_UNITS.items() if unit},
    **{unit + "ps": scale for unit, scale in SIZE_UNITS.items() if unit.endswith(("b", "B"))},  # Gbps, GBps
}
DURATION_UNITS = {"s": Fraction(1), "ms": Fraction(1, 10**3), "us": Fraction(1, 10**6), "\u00b5s": Fraction(1, 10**6),
                  "\u03bcs": Fraction(1, 10**6), "ns": Fraction(1, 10**9), "min": Fraction(60), "h": Fraction(3600)}


_ACCEPTED = {
    "size": "B, kB/KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB, a bare k/K, M, G, T, P; bits: b, kb, Mb, Gb, Tb, "
            "Kib..Pib, bit, Gbit",
    "bandwidth": "B/s, kB/s .. PB/s, KiB/s .. PiB/s (the /s may be left out), bits: b/s, Mb/s, Gb/s, Gbps, Gbit/s",
    "count": "k/K (thousand), M (million), B/b/G (billion), T (trillion)",
    "duration": "s, ms, us (or \u00b5s), ns, min, h",
}


def _split(text: str, name: str | None) -> tuple[Fraction, str]:
    """``text`` -> (exact value of its number, the unit text after it, stripped). Raises ValueError."""
    if len(text) > MAX_TEXT:
        raise ValueError(f"{_label(name, text)} is {len(text)} characters long; a number has at most {MAX_TEXT}")
    m = _NUMBER.match(text)
    if m is None:
        raise ValueError(f"{_label(name, text)} is not a number; write e.g. 1000, 1,000,000, 1.5e9")
    rest = text[m.end():]
    if rest[:1] in (",", "_") or rest[:2] in (".,", "._"):
        raise ValueError(f"{_label(name, text)}: ',' and '_' only group thousands (1,000,000 or 1_000_000); "
                         "a decimal point is '.', as in 2.5")
    if rest[:1] == "." or rest[:1].isdigit():
        raise ValueError(f"{_label(name, text)} is not a number; write e.g. 2.5 or 1,000")
    exp = int(m.group("exp") or 0)
    if m.group("exp") and (len(m.group("exp").lstrip("+-")) > 4 or abs(exp) > MAX_EXPONENT):
        raise ValueError(f"{_label(name, text)}: exponent out of range (at most e{MAX_EXPONENT})")
    whole = (m.group("int") or "0").replace(",", "").replace("_", "")
    frac = m.group("frac") or m.group("frac_only") or ""
    value = Fraction(int(whole + frac)) * Fraction(10) ** (exp - len(frac))
    return (-value if m.group("sign") == "-" else value), rest.strip()


def _unit_hint(unit: str, units: dict) -> str:
    same = [u for u in units if u and u.lower() == unit.lower()]
    if same:
        return f"; units are case-sensitive (B = byte, b = bit, M = mega): did you mean {' or '.join(same)}?"
    return ""


def _quantity(text, name: str | None, units: dict[str, Fraction], kind: str, examples: str,
              default: str = "") -> Fraction:
    """Exact value of ``text`` (str or real number) in the base unit of ``units``. Raises TypeError/ValueError."""
    if isinstance(text, bool) or not isinstance(text, (str, numbers.Real)):
        raise TypeError(f"{name or kind} must be a number or a string such as {examples}, got {type(text).__name__}")
    if not isinstance(text, str):
        if isinstance(text, float) and not math.isfinite(text):
            raise ValueError(f"{_label(name, text)}: {kind} must be finite")
        return Fraction(text) * units[default]
    if not text.strip():
        raise ValueError(f"{name + ' ' if name else ''}is empty; expected a {kind} such as {examples}")
    if text.strip().lstrip("+-").lower() in ("nan", "inf", "infinity"):
        raise ValueError(f"{_label(name, text)}: {kind} must be finite")
    value, unit = _split(text, name)
    if (unit or default) not in units:
        if kind not in _ACCEPTED:
            raise ValueError(f"{_label(name, text)}: unexpected {unit!r} after the number; a plain {kind} has no unit")
        raise ValueError(f"{_label(name, text)}: unknown unit {unit!r} for a {kind}{_unit_hint(unit, units)}; "
                         f"accepted: {_ACCEPTED[kind]}")
    return value * units[unit or default]


def _to_float(value: Fraction, text, name: str | None, kind: str) -> float:
    """``value`` as a float; ValueError (naming ``name``) when it overflows or a non-zero value rounds to 0."""
    try:
        result = float(value)
    except OverflowError:
        raise ValueError(f"{_label(name, text)}: {kind} beyond the float range (at most {_FLOAT_MAX:.2g})") from None
    if result == 0 and value != 0:
        raise ValueError(f"{_label(name, text)}: {kind} nearer 0 than any float (the least is {_FLOAT_TINY:.0e})")
    return result


def _whole(value: Fraction, text, name: str | None, kind: str) -> int:
    if value.denominator != 1:
        raise ValueError(f"{_label(name, text)}: {kind} must be a whole number, got {_shown(value)}")
    return int(value)


def parse_size(text, name: str | None = "size", *, min: int = 1, max: int = SIZE_MAX) -> int:
    """A size in bytes: ``"64MiB"``, ``"1GB"``, ``"1.5 GiB"``, ``"7e9"``, ``"16Mb"`` (bits: 2,000,000 B) -> int.

    Units (case-sensitive): B, kB/KB, MB, GB, TB, PB (10**3k), KiB..PiB (2**10k), a bare prefix
    k/K, M, G, T, P (bytes), and bits b, kb..Pb, Kib..Pib, bit, Gbit... (a byte is 8 bits). ``"70B"``
    is 70 bytes; parameter counts go through :func:`parse_count`. The result must be a whole number
    of bytes in ``[min, max]``. Raises TypeError for a non-number, ValueError otherwise (both name
    ``name``).
    """
    value = _quantity(text, name, SIZE_UNITS, "size", "'64MiB', '1GB', '16Mb' (bits)")
    _check_range(value, text, name, min, max, "size in bytes")
    return _whole(value, text, name, "size in bytes")


def parse_count(text, name: str | None = "count", *, min: int = 1, max: int = COUNT_MAX) -> int:
    """A count such as a parameter count: ``"7e9"``, ``"7B"`` / ``"7b"`` (billion), ``"70M"``, ``"1.5T"`` -> int.

    Suffixes: k/K (10**3), M (10**6), B, b, G (10**9), T (10**12); ``m`` (milli) and binary
    suffixes are refused. Must be a whole number in ``[min, max]``. Raises TypeError/ValueError naming ``name``.
    """
    value = _quantity(text, name, COUNT_UNITS, "count", "'7B' (billion), '70M', '1,000,000'")
    _check_range(value, text, name, min, max, "count")
    return _whole(value, text, name, "count")


def parse_bandwidth(text, name: str | None = "bandwidth", *, min: float = BANDWIDTH_MIN, max: float = 1e15) -> float:
    """A bandwidth in bytes per second: ``"400 Gb/s"`` (bits: 50e9), ``"50 GB/s"``, ``"450GB"``, ``"2e11"`` -> float.

    A bare number is bytes/s; ``/s`` and ``ps`` are optional (``Gbps``, ``GB/s``). Must lie in
    ``[min, max]`` (default 1 kB/s to 1e15 B/s). Raises TypeError/ValueError naming ``name``.
    """
    value = _quantity(text, name, BANDWIDTH_UNITS, "bandwidth", "'400 Gb/s' (bits), '50 GB/s' (bytes)")
    _check_range(value, text, name, min, max, "bandwidth in bytes/s")
    return _to_float(value, text, name, "bandwidth in bytes/s")


def parse_duration(text, name: str | None = "duration", *, unit: str = "s", min: float = 0.0,
                   max: float = 86400.0 * 366, min_open: bool = True) -> float:
    """A duration in seconds: ``"5"`` (in ``unit``), ``"250ms"``, ``"1.5us"``, ``"2min"``, ``"1h"`` -> float.

    Units: s, ms, us (or µs), ns, min, h. Must lie in ``(min, max]`` (``[min, max]`` with
    ``min_open=False``); the default upper limit is a year. Raises TypeError/ValueError naming ``name``.
    """
    value = _quantity(text, name, DURATION_UNITS, "duration", "'5', '250ms', '1.5us'", default=unit)
    _check_range(value, text, name, min, max, "duration in seconds", lo_open=min_open)
    return _to_float(value, text, name, "duration in seconds")


def parse_real(text, name: str | None = "value", *, min: float | None = None, max: float | None = None,
               min_open: bool = False) -> float:
    """A finite real number (no unit) within ``[min, max]`` (``(min, max]`` with ``min_open``) -> float."""
    value = _quantity(text, name, {"": Fraction(1)}, "number", "'0.5', '1e-6', '1,000'")
    _check_range(value, text, name, min, max, "number", lo_open=min_open)
    return _to_float(value, text, name, "number")


def parse_int(text, name: str | None = "value", *, min: int | None = None, max: int | None = None) -> int:
    """A whole number (no unit) within ``[min, max]``: ``"64"``, ``"1,024"``, ``"1e3"`` -> int; ``"2.5"`` refused."""
    value = _quantity(text, name, {"": Fraction(1)}, "integer", "'64', '1,024'")
    _check_range(value, text, name, min, max, "integer")
    return _whole(value, text, name, "integer")


def echo_quantity(text, value: float, kind: str = "bandwidth") -> str:
    """What an input was read as, in bytes: ``("400 Gb/s", 5e10)`` -> ``"400 Gb/s = 50 GB/s"``.

    ``kind`` is ``"bandwidth"`` (GB/s, 1e9 B/s) or ``"size"`` (exact bytes). A bare number is shown as is.
    """
    if kind == "bandwidth":
        shown = f"{value / 1e9:g} GB/s"
    else:
        shown = f"{int(value):,} B"
    return f"{text.strip()} = {shown}" if isinstance(text, str) and text.strip() != shown else shown
