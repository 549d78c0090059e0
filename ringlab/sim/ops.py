"""Reduction operators and the dtypes the simulator accepts.

Integer arithmetic wraps on overflow, as numpy and NCCL do (an int8 sum of 100 and 100 is
-56): the simulator and the direct reduction use the same modular arithmetic, so integer
results must match exactly. ``avg`` is a sum followed by one division by ``world_size``
(NCCL's ncclAvg for floating types); it is refused for integer dtypes because the division
would silently truncate.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

OPS = ("sum", "prod", "max", "min", "avg")

# The ufunc each rank applies when a chunk arrives; avg reduces with add and divides at the end.
UFUNCS = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum, "avg": np.add}

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
SUPPORTED_DTYPES = tuple(
    np.dtype(name)
    for name in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")
) + (BFLOAT16,)


def is_floating(dtype: np.dtype) -> bool:
    """True for float16/32/64 and bfloat16 (which numpy does not classify as floating)."""
    return np.dtype(dtype).kind == "f" or np.dtype(dtype) == BFLOAT16


def check_op(op: str, dtype: np.dtype) -> str:
    """Validate ``op`` against :data:`OPS` and ``dtype``; return it. Raises ValueError / TypeError."""
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}; got {op!r}")
    if op == "avg" and not is_floating(dtype):
        raise TypeError(f"op='avg' needs a floating dtype (got {np.dtype(dtype)}); use op='sum' and divide yourself")
    return op


def check_dtype(dtype) -> np.dtype:
    """Return ``dtype`` as a numpy dtype if the simulator supports it, else raise TypeError."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"dtype {dtype!r} is not a numpy dtype") from exc
    if dt not in SUPPORTED_DTYPES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise TypeError(f"dtype {dt} is not supported; use one of: {names}")
    return dt


def resolve_dtype(name: str) -> np.dtype:
    """Map a user-facing dtype name (``"bf16"``, ``"bfloat16"``, ``"fp16"``, ``"float32"``, ``"int8"``...) to a dtype.

    Raises ValueError listing accepted names for an unknown one.
    """
    aliases = {"bf16": BFLOAT16, "bfloat16": BFLOAT16, "fp16": np.dtype("float16"), "half": np.dtype("float16"),
               "fp32": np.dtype("float32"), "float": np.dtype("float32"), "fp64": np.dtype("float64"),
               "double": np.dtype("float64")}
    key = str(name).lower()
    if key in aliases:
        return aliases[key]
    if key in {str(d) for d in SUPPORTED_DTYPES}:
        return np.dtype(key)
    accepted = sorted(set(aliases) | {str(d) for d in SUPPORTED_DTYPES})
    raise ValueError(f"unknown dtype {name!r}; accepted: {', '.join(accepted)}")
