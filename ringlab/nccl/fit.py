"""Fit the alpha-beta (Hockney) model ``t(S) = alpha + beta S`` to measured times; find the latency-bound sizes.

The same model as :mod:`ringlab.collectives.cost` (Hockney; Thakur, Rabenseifner & Gropp 2005).
Measured curves span seven decades of size, so an ordinary least-squares fit would let the largest
sizes decide everything and leave ``alpha`` to rounding. Here each point's residual is taken
relative to its own time, ``min sum ((alpha + beta S_i - t_i) / t_i)^2``, which weighs a 20 us point
as much as a 20 ms one: ``alpha`` comes from the small sizes, ``beta`` from the large ones.
``crossover = alpha / beta`` is the size at which the latency and bandwidth terms are equal: below
it the run is latency-bound and busbw says little about the links.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class AlphaBeta:
    """``alpha`` seconds, ``beta`` seconds per byte of S; ``bandwidth = 1/beta`` is the asymptotic algbw (B/s)."""

    alpha: float
    beta: float
    points: int
    max_relative_residual: float

    @property
    def bandwidth(self) -> float:
        return 1.0 / self.beta

    @property
    def crossover(self) -> float:
        """Bytes at which ``alpha == beta S``."""
        return self.alpha / self.beta

    def time(self, size):
        """Model time (seconds) of ``size`` bytes (scalar or array)."""
        return self.alpha + self.beta * np.asarray(size, dtype=np.float64)


def fit_alpha_beta(sizes, times_s) -> AlphaBeta | None:
    """Relative least-squares fit of ``t = alpha + beta S`` (sizes in bytes, times in seconds).

    Points with a non-positive size or time are ignored; returns None when fewer than three points
    with at least two distinct sizes remain, or when the data do not give a positive ``beta``. A
    negative intercept is clamped to 0 and ``beta`` refitted alone. Raises ValueError when the two
    arrays differ in length.
    """
    s = np.asarray(sizes, dtype=np.float64).ravel()
    t = np.asarray(times_s, dtype=np.float64).ravel()
    if s.shape != t.shape:
        raise ValueError(f"sizes and times differ in length: {s.size} vs {t.size}")
    keep = np.isfinite(s) & np.isfinite(t) & (s > 0) & (t > 0)
    s, t = s[keep], t[keep]
    if s.size < 3 or np.unique(s).size < 2:
        return None
    design = np.column_stack([1.0 / t, s / t])
    (alpha, beta), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if alpha < 0:  # the data carry no measurable latency: fit the bandwidth term alone
        x = s / t
        alpha, beta = 0.0, float(x.sum() / (x * x).sum())
    if not beta > 0:
        return None
    residual = np.abs((alpha + beta * s - t) / t)
    return AlphaBeta(float(alpha), float(beta), int(s.size), float(residual.max()))
