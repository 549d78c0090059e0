"""Direct reductions and the error bounds the simulator is checked against.

Integers: the reduction is computed directly in the input dtype. Integer sum and product
are exact modulo 2**bits whatever the order, and max/min are exact, so the simulator must
match bit for bit.

Floats: the reference sums or multiplies the ranks' values in float64. The simulator
accumulates in the input dtype along the ring, one rounding per step, so it may differ.
The allowed error per element is the standard bound for recursive summation (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 4.4), with one extra
rounding for storing the result (and one for avg's division)::

    sum:  |s_hat - s| <= gamma(N) * sum_i |x_i|,   gamma(k) = k*u / (1 - k*u)
    prod: |p_hat - p| <= gamma(N) * |p|
    avg:  the sum bound divided by N, with gamma(N + 1)
    max, min: exact

where u is the unit roundoff of the dtype (2**-11 float16, 2**-8 bfloat16, 2**-24 float32,
2**-53 float64). Results that overflow to +-inf must match the sign of the overflow, and
NaN must appear where the reference has NaN. When k*u >= 1 the bound is infinite (nothing
is guaranteed, e.g. bfloat16 at N >= 256).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .ops import is_floating


def unit_roundoff(dtype) -> float:
    """Unit roundoff u = 2**-(mantissa bits + 1) of a floating dtype (bfloat16 included)."""
    return float(ml_dtypes.finfo(dtype).eps) / 2


def _gamma(k: int, u: float) -> float:
    return k * u / (1 - k * u) if k * u < 1 else np.inf


def direct_reduce(x: np.ndarray, op: str) -> tuple[np.ndarray, np.ndarray | None]:
    """Reduce the rank axis of ``x`` (``(world_size, ...)``) directly.

    Returns ``(expected, tolerance)``. For floats ``expected`` is float64 and ``tolerance`` a
    float64 array of per-element absolute error bounds (see the module docstring); for integers
    ``expected`` has ``x.dtype`` and ``tolerance`` is None (exact match required).
    """
    n = x.shape[0]
    if not is_floating(x.dtype):
        if op in ("max", "min"):
            return (x.max(axis=0) if op == "max" else x.min(axis=0)), None
        fn = np.sum if op == "sum" else np.prod
        with np.errstate(over="ignore"):
            return fn(x, axis=0, dtype=x.dtype), None
    x64 = x.astype(np.float64)
    u = unit_roundoff(x.dtype)
    if op in ("max", "min"):
        expected = x64.max(axis=0) if op == "max" else x64.min(axis=0)
        return expected, np.zeros_like(expected)
    if op == "prod":
        expected = np.prod(x64, axis=0)
        return expected, _gamma(n, u) * np.abs(expected)
    expected = x64.sum(axis=0)
    bound = np.abs(x64).sum(axis=0)
    if op == "avg":
        return expected / n, _gamma(n + 1, u) * bound / n
    return expected, _gamma(n, u) * bound


def max_error(got: np.ndarray, expected: np.ndarray, tolerance: np.ndarray | None) -> tuple[float, bool]:
    """Largest absolute error of ``got`` (``(world_size, ...)``) against ``expected`` and whether all are in bounds.

    Non-finite values pass only where the reference is non-finite in the same way (the
    reference cast to the result dtype, so float overflow to inf counts as agreeing).
    """
    if tolerance is None:
        diff = got.astype(np.int64) - expected.astype(np.int64) if got.size else np.zeros(0)
        return float(np.abs(diff).max(initial=0)), bool(np.array_equal(got, np.broadcast_to(expected, got.shape)))
    g = got.astype(np.float64)
    e = np.broadcast_to(expected, g.shape)
    with np.errstate(over="ignore"):  # the reference may overflow the result dtype, as the result did
        cast = np.broadcast_to(expected.astype(got.dtype).astype(np.float64), g.shape)
    finite = np.isfinite(g) & np.isfinite(e)
    err = np.where(finite, np.abs(g - e), 0.0)
    within = np.where(finite, err <= np.broadcast_to(tolerance, g.shape),
                      (g == cast) | (np.isnan(g) & np.isnan(cast)))
    return float(err.max(initial=0.0)), bool(within.all())


def bit_identical(outputs: np.ndarray) -> bool:
    """True when every rank's result has exactly the same bytes as rank 0's (``(world_size, ...)``)."""
    raw = np.ascontiguousarray(outputs).view(np.uint8).reshape(outputs.shape[0], -1)
    return bool((raw == raw[0]).all())
