"""Units: element sizes of dtypes, byte formatting with GB and GiB side by side, size parsing.

API
---
``DTYPE_BYTES``          canonical dtype name -> bytes per element (int4 and fp4 are 0.5; tf32 is
                         stored as 4-byte fp32, the name selects TF32 tensor-core peaks)
``dtype_bytes(name)``    bytes per element for a name or alias ("bfloat16" -> 2); ValueError if unknown
``canonical_dtype(name)`` the canonical name ("float16" -> "fp16")
``format_bytes(n)``      "42,949,672,960 B (42.95 GB / 40.00 GiB)"
``format_size(n)``       "3.28 GB" (or "1.00 GiB" with binary=True): one sensible unit, labelled
``format_flops(f)``      "312.0 TFLOP/s"-style text for a rate in FLOP/s
``parse_size(text)``     "64MiB" | "1GB" | "16Mb" (bits) | "7e9" | 123 -> int bytes
``parse_count(text)``    "7B" (billion) | "70M" | 7e9 -> int; both from :mod:`ringlab.calc.parsing`,
                         the grammar every CLI number goes through
``positive_int(v, name)`` validate a count: ints, numpy ints and whole floats (7e9) -> int > 0

Conventions: GB = 10**9 bytes, GiB = 2**30 bytes, always labelled (IEC 80000-13).
"""

from __future__ import annotations

import difflib
from fractions import Fraction

from ringlab.calc.parsing import parse_count, parse_size  # noqa: F401 - re-exported: sizes live with units

GB = 10**9
GiB = 2**30

# Bytes per element. int4 packs two values per byte, hence a Fraction (exact arithmetic downstream).
DTYPE_BYTES: dict[str, int | Fraction] = {
    "fp32": 4,
    "tf32": 4,  # TF32 tensor-core math on fp32 storage
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": Fraction(1, 2),
    "fp4": Fraction(1, 2),
}

_ALIASES = {
    "float32": "fp32", "float": "fp32", "f32": "fp32", "tensorfloat32": "tf32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "e4m3": "fp8", "e5m2": "fp8",
    "uint8": "int8",
    "nvfp4": "fp4", "mxfp4": "fp4", "fp4_e2m1": "fp4", "e2m1": "fp4",
}


def canonical_dtype(name: str) -> str:
    """Return the canonical dtype name (a key of ``DTYPE_BYTES``) for ``name`` or one of its aliases.

    Case-insensitive; ``torch.``/``np.`` prefixes are ignored. Raises ValueError listing the
    accepted names (with close matches first) for an unknown name, TypeError for a non-string.
    """
    if isinstance(name, str) and name in DTYPE_BYTES:  # already canonical: the calculators' hot path
        return name
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


def format_bytes(n: int | float | Fraction) -> str:
    """Format a byte count with the exact count, decimal GB and binary GiB, all labelled.

    >>> format_bytes(42_949_672_960)
    '42,949,672,960 B (42.95 GB / 40.00 GiB)'
    """
    if isinstance(n, (Fraction, float)) and n == int(n):
        n = int(n)
    exact = f"{n:,} B" if isinstance(n, int) else f"{float(n):,.1f} B"
    return f"{exact} ({float(n) / GB:,.2f} GB / {float(n) / GiB:,.2f} GiB)"


def format_size(n: int | float | Fraction, binary: bool = False) -> str:
    """A byte count in the largest unit that keeps it at 1 or more, labelled: ``3_283_200_000`` ->
    ``'3.28 GB'``; ``binary=True`` uses powers of 2 (``2**30`` -> ``'1.00 GiB'``). Bytes below 1 kB (1 KiB)
    are exact (``'512 B'``). Decimal prefixes are powers of 10 (GB = 10**9 B), binary ones of 2 (IEC 80000-13).
    """
    base, names = (1024, ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")) if binary else \
        (1000, ("kB", "MB", "GB", "TB", "PB", "EB"))
    value = float(n)
    if abs(value) < base:
        return f"{int(value):,} B" if value == int(value) else f"{value:,.1f} B"
    for power, name in enumerate(names, start=1):
        scaled = value / base ** power
        if round(abs(scaled), 2) < base or name == names[-1]:  # 999,999 B is 1.00 MB, not 1,000.00 kB
            return f"{scaled:,.2f} {name}"
    raise AssertionError("unreachable")


def format_flops(rate: float) -> str:
    """Format a rate in FLOP/s with an SI prefix: ``format_flops(312e12) == '312.0 TFLOP/s'``."""
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if abs(rate) >= scale:
            return f"{rate / scale:,.1f} {prefix}FLOP/s"
    return f"{rate:,.1f} FLOP/s"
