"""Spikes and stragglers from nccl-tests' per-iteration timing (``-I 1``; ``-J`` adds every process's times).

With ``-I 1`` each half of a result row also prints ``i_min i_max i_p99 i_cv%``: the iterations' times, each
the slowest process's (src/util.cu ``writePerIterReport``, nccl-tests 2.19.6); its JSON adds
``per_process_max_times_us``, one list per process. The rules follow nccl-tests' own
``tools/analyze_perf_json.py``:

* a **spike**: an iteration slower than :data:`SPIKE_FACTOR` (1.5, its ``--threshold`` default) times the
  average that the ``time`` column reports, seen as ``i_max >= 1.5 x time``;
* a **straggler**: a process whose average over the iterations is the slowest and above the median process
  by more than :data:`STRAGGLER_MARGIN`, at most sizes that have per-process times (one slow process holds
  every collective back: each iteration lasts as long as its slowest rank).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .records import Measure, Row, Run

SPIKE_FACTOR = 1.5
STRAGGLER_MARGIN = 0.10


@dataclass(frozen=True)
class Spike:
    """A half of ``row`` whose slowest iteration took ``ratio`` times the average."""

    row: Row
    half: str
    ratio: float


def _halves(row: Row) -> list[tuple[str, Measure]]:
    return [(name, m) for name, m in (("out-of-place", row.out_of_place), ("in-place", row.in_place)) if m is not None]


def spikes(run: Run, factor: float = SPIKE_FACTOR) -> list[Spike]:
    """Every half with ``i_max >= factor x time`` (the -I columns), worst first."""
    found = [Spike(row, name, m.iter_max_us / m.time_us) for row in run.rows for name, m in _halves(row)
             if m.iter_max_us is not None and m.time_us > 0 and m.iter_max_us >= factor * m.time_us]
    return sorted(found, key=lambda s: -s.ratio)


def slowest_process(measure: Measure) -> tuple[int, float] | None:
    """``(process, margin)``: the process with the highest mean iteration time and how far above the median
    process mean it is (0.25 = 25%); None without per-process times or with fewer than two processes."""
    times = measure.per_process_us
    if not times or len(times) < 2 or not all(times):
        return None
    means = [statistics.fmean(t) for t in times]
    worst = max(range(len(means)), key=means.__getitem__)
    median = statistics.median(means)
    return worst, (means[worst] / median - 1) if median > 0 else 0.0


def straggler(run: Run, margin: float = STRAGGLER_MARGIN) -> tuple[int, int, int, float] | None:
    """``(process, sizes where it straggles, sizes with per-process times, worst margin)`` when one process is
    the slowest by more than ``margin`` at more than half of the sizes; else None."""
    verdicts = [slowest_process(m) for row in run.rows for _, m in _halves(row)[:1]]
    verdicts = [v for v in verdicts if v is not None]
    if not verdicts:
        return None
    slow = [(p, x) for p, x in verdicts if x > margin]
    if not slow:
        return None
    process = statistics.mode(p for p, _ in slow)
    hits = [x for p, x in slow if p == process]
    if 2 * len(hits) <= len(verdicts):
        return None
    return process, len(hits), len(verdicts), max(hits)
