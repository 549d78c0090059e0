"""Units: element sizes of dtypes, byte formatting with GB and GiB side by side, size parsing.

API
---
``DTYPE_BYTES``          canonical dtype name -> bytes per element (int4 is 0.5)
``dtype_bytes(name)``    bytes per element for a name or alias ("bfloat16" -> 2); ValueError if unknown
``canonical_dtype(name)`` the canonical name ("float16" -> "fp16")
``format_bytes(n)``      "42,949,672,960 B (42.95 GB / 40.00 GiB)"
``format_flops(f)``      "312.0 TFLOP/s"-style text for a rate in FLOP/s
``parse_size(text)``     "64MiB" | "1GB" | "7e9" | 123 -> int bytes (or a plain count)
``positive_int(v, name)`` validate a count: ints, numpy ints and whole floats (7e9) -> int > 0

Conventions: GB = 10**9 bytes, GiB = 2**30 bytes, always labelled (IEC 80000-13).
"""

from __future__ import annotations

import difflib
import operator
import re
from fractions import Fraction

GB = 10**9
GiB = 2**30

# Bytes per element. int4 packs two values per byte, hence a Fraction (exact arithmetic downstream).
DTYPE_BYTES: dict[str, int | Fraction] = {
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": Fraction(1, 2),
}

_ALIASES = {
    "float32": "fp32", "float": "fp32", "f32": "fp32", "tf32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "e4m3": "fp8", "e5m2": "fp8",
    "uint8": "int8",
}


def canonical_dtype(name: str) -> str:
    """Return the canonical dtype name (a key of ``DTYPE_BYTES``) for ``name`` or one of its aliases.

    Case-insensitive; ``torch.``/``np.`` prefixes are ignored. Raises ValueError listing the
    accepted names (with close matches first) for an unknown name, TypeError for a non-string.
    """
    if not isinstance(name, str):
        raise TypeError(f"dtype must be a string such as 'bf16', got {type(name).__name__}")
    key = name.strip().lower().removeprefix("torch.").removeprefix("np.").removeprefix("numpy.")
    key = _ALIASES.get(key, key)
    if key in DTYPE_BYTES:
        return key
    accepted = sorted(DTYPE_BYTES) + sorted(_ALIASES)
    close = difflib.get_close_matches(key, accepted, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"unknown dtype {name!r}.{hint} Accepted: {', '.join(accepted)}")


def dtype_bytes(name: str) -> int | Fraction:
    """Bytes per element of dtype ``name`` (int, or Fraction(1, 2) for int4). See ``canonical_dtype``."""
    return DTYPE_BYTES[canonical_dtype(name)]


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


def format_bytes(n: int | float | Fraction) -> str:
    """Format a byte count with the exact count, decimal GB and binary GiB, all labelled.

    >>> format_bytes(42_949_672_960)
    '42,949,672,960 B (42.95 GB / 40.00 GiB)'
    """
    if isinstance(n, (Fraction, float)) and n == int(n):
        n = int(n)
    exact = f"{n:,} B" if isinstance(n, int) else f"{float(n):,.1f} B"
    return f"{exact} ({float(n) / GB:,.2f} GB / {float(n) / GiB:,.2f} GiB)"


def format_flops(rate: float) -> str:
    """Format a rate in FLOP/s with an SI prefix: ``format_flops(312e12) == '312.0 TFLOP/s'``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(rate) >= scale:
            return f"{rate / scale:,.1f} {prefix}FLOP/s"
    return f"{rate:,.1f} FLOP/s"


_SIZE_RE = re.compile(r"^\s*([0-9][0-9_,]*\.?[0-9]*(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_SUFFIX = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


_COUNT_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}


def parse_count(text: str | int | float) -> int:
    """Parse a count such as a parameter count: ``"7e9"``, ``"7B"`` (billion), ``"70M"``, ``"1.5T"`` -> int.

    Unlike :func:`parse_size`, ``B`` here means billion (as in "a 7B model"), and binary
    suffixes are refused. Must be a positive whole number. Raises ValueError naming the forms.
    """
    if isinstance(text, bool):
        raise TypeError("count must be a number or a string such as '7B'")
    if isinstance(text, (int, float)):
        value = Fraction(text)
    else:
        m = _SIZE_RE.match(str(text))
        if m is None or m.group(2).lower() not in _COUNT_SUFFIX:
            raise ValueError(f"cannot parse count {text!r}: expected e.g. 7e9, 7B (billion), 70M, 1.5T")
        value = Fraction(m.group(1).replace(",", "").replace("_", "")) * _COUNT_SUFFIX[m.group(2).lower()]
    if value.denominator != 1 or value <= 0:
        raise ValueError(f"count {text!r} must be a positive whole number, got {float(value)}")
    return int(value)


def parse_size(text: str | int | float) -> int:
    """Parse a size such as ``"64MiB"``, ``"1GB"``, ``"7e9"``, ``"1.5 GiB"``, ``"70B"`` -> int.

    Decimal suffixes (k, M, G, T, KB, MB, GB, TB) are powers of 10, binary ones (KiB, MiB, GiB,
    TiB) powers of 2. A bare ``B`` means bytes (so ``"70B"`` is 70, not 70 billion: write
    ``70e9`` or ``70G`` for a parameter count). The value is computed exactly (Fraction) and must
    be a positive whole number. Raises ValueError naming the accepted forms.
    """
    if isinstance(text, bool):
        raise TypeError("size must be a number or a string such as '64MiB'")
    if isinstance(text, (int, float)):
        value = Fraction(text)
    else:
        m = _SIZE_RE.match(str(text))
        suffix = m.group(2).lower() if m else None
        if m is None or suffix not in _SUFFIX:
            raise ValueError(
                f"cannot parse size {text!r}: expected a number with an optional suffix, e.g. '7e9', "
                f"'64MiB', '1GB'; suffixes: {', '.join(s for s in _SUFFIX if s)}"
            )
        value = Fraction(m.group(1).replace(",", "").replace("_", "")) * _SUFFIX[suffix]
    if value.denominator != 1 or value <= 0:
        raise ValueError(f"size {text!r} must be a positive whole number, got {float(value)}")
    return int(value)
