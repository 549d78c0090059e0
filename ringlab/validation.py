"""Checks of Python arguments: one home for the rules every layer applies to a number or flag it is given.

``check_int(value, name, min=, max=)``     ints, numpy integers and whole floats (7e9) -> int, within limits
``check_real(value, name, min=, max=)``    finite real -> float, within limits (``min_open`` for ``> min``)
``check_bool(value, name)``                a bool (numpy bools too); ``"no"`` and 0 are refused
``check_number(name, value, minimum)``     a finite int or float >= ``minimum`` (``strict``: >), returned as given
``positive_int(value, name)``              an int > 0 (whole floats accepted)

Errors are TypeError for a value of the wrong kind and ValueError for one out of range, each naming the
argument. The limits are compared exactly: a limit written as ``0.01`` is the decimal 1/100 when the value was
typed as text (:mod:`ringlab.calc.parsing` reads the command line's numbers with the same :func:`check_range`).
This module imports nothing of ringlab, so every layer can use it (CONTRIBUTING.md, "Layers").
"""

from __future__ import annotations

import math
import numbers
import operator
from fractions import Fraction

import numpy as np


def argument_text(name: str | None, text) -> str:
    """How an error names the argument: ``name=<repr of text>`` (the repr cut at 60 characters), or the repr alone."""
    shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
    return f"{name}={shown}" if name else shown


def format_limit(x) -> str:
    """A limit as an error shows it: ints with thousands separators (``1,024``), floats as ``%g``."""
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def value_text(value) -> str:
    """``value`` (int, float or Fraction) as ``%g`` would show it, also beyond the float range (1e+309)."""
    try:
        return f"{float(value):g}"
    except OverflowError:  # |value| > 1.8e308: read the exponent off the exact integer part
        digits = str(abs(int(value)))
        return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:6]}".rstrip("0").rstrip(".") + f"e+{len(digits) - 1}"


def as_written(limit):
    """A float limit as the decimal its author wrote (0.01 -> 1/100): the exact binary value of 0.01 is a
    hair above 1/100, so the typed "0.01" would otherwise fall below a limit of 0.01."""
    return Fraction(repr(limit)) if isinstance(limit, float) and math.isfinite(limit) else limit


def check_range(value, text, name: str | None, lo, hi, kind: str, lo_open: bool = False) -> None:
    """ValueError naming ``name`` (and ``text``, what was given) unless ``lo <= value <= hi`` (``lo < value`` with
    ``lo_open``; a None limit is no limit). ``kind`` names the quantity in the message ("size in bytes")."""
    # typed text is exact decimal: compare it with the limit as written; a Python float with the float limit
    exact_lo, exact_hi = (as_written(lo), as_written(hi)) if isinstance(text, str) else (lo, hi)
    too_low = lo is not None and (value <= exact_lo if lo_open else value < exact_lo)
    if too_low or (hi is not None and value > exact_hi):
        parts = ([f"{'>' if lo_open else '>='} {format_limit(lo)}"] if lo is not None else []) + (
            [f"<= {format_limit(hi)}"] if hi is not None else [])
        raise ValueError(f"{argument_text(name, text)}: {kind} must be {' and '.join(parts)}, got {value_text(value)}")


def check_int(value, name: str, *, min: int | None = None, max: int | None = None) -> int:
    """A Python argument as an int: ints, numpy integers and whole floats (7e9) pass; bools, strings and
    fractions (2.5) raise TypeError naming ``name``; values outside ``[min, max]`` raise ValueError."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or getattr(value, "dtype", None) is not None and value.dtype.kind == "b":
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {value!r}") from None
    check_range(v, value, name, min, max, "integer")
    return v


def check_real(value, name: str, *, min: float | None = None, max: float | None = None,
               min_open: bool = False) -> float:
    """A Python argument as a finite float within limits; TypeError for non-numbers, ValueError for NaN, inf
    or a value out of range, both naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an int or Fraction beyond 1.8e308
        raise ValueError(f"{name} must be finite, got {value_text(value)}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    check_range(v, value, name, min, max, "value", lo_open=min_open)
    return v


def check_bool(value, name: str) -> bool:
    """``value`` if it is a bool (numpy bools too); anything else, ``"no"`` included, raises TypeError."""
    if isinstance(value, bool) or getattr(value, "dtype", None) is not None and value.dtype.kind == "b" \
            and getattr(value, "shape", None) == ():
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {value!r}")


def check_number(name: str, value, minimum: float = 0, *, integer: bool = False, strict: bool = False):
    """Return ``value`` if it is a finite real number (an int if ``integer``) that is >= ``minimum``
    (> ``minimum`` if ``strict``); otherwise raise TypeError or ValueError naming ``name``."""
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{name} must be {'an int' if integer else 'a number'}, got {type(value).__name__}")
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        raise ValueError(f"{name} must be a finite number {'>' if strict else '>='} {minimum}, got {value}")
    return value


def positive_int(value, name: str) -> int:
    """``value`` as a positive int: accepts ints, numpy integers and floats holding a whole number
    (7e9). Raises TypeError (naming ``name``) for other types or fractions, ValueError if <= 0."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a positive integer, got {value!r}") from None
    if v <= 0:
        raise ValueError(f"{name} must be a positive integer, got {v}")
    return v
