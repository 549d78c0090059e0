"""The GPU monitor's run loop: sample on a fixed cadence, add ``lost`` / ``back`` events, drop repeats, append.

Clock, sleep and wall time are parameters, so tests drive :func:`run` with fakes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Callable, Iterable

from .log import GpumonLog, LogWriteError
from .rows import SMI_FIELDS, Row
from .samplers import Sampler, check_seconds


class PresenceTracker:
    """Turns successive ticks' rows into the same rows plus ``lost`` and ``back`` events."""

    def __init__(self):
        self._last: dict[str, Row] = {}  # key -> latest sample row of every GPU ever seen
        self._lost: set[str] = set()

    @staticmethod
    def _key(row: Row) -> str:
        return row.uuid or f"index {row.index}"

    def update(self, rows: Iterable[Row]) -> list[Row]:
        """Return ``rows`` with a ``back`` row before each returning GPU's sample and ``lost`` rows appended."""
        out, seen = [], set()
        for row in rows:
            if row.kind == "sample":
                key = self._key(row)
                seen.add(key)
                if key in self._lost:
                    self._lost.discard(key)
                    out.append(Row("back", index=row.index, uuid=row.uuid, name=row.name))
                self._last[key] = row
            out.append(row)
        missing = [row for key, row in self._last.items() if key not in seen and key not in self._lost]
        for row in sorted(missing, key=lambda r: (r.index is None, r.index or 0, r.uuid)):
            self._lost.add(self._key(row))
            out.append(Row("lost", index=row.index, uuid=row.uuid, name=row.name))
        return out


class RepeatFilter:
    """Drops error rows that repeat the previous tick's and turns placeholder notes into error rows
    once per (GPU, field, reason) (see "Repeats" in the module docstring)."""

    def __init__(self):
        self._last_errors: set[tuple] = set()
        self._reasons: dict[tuple[str, str], str] = {}

    def update(self, rows: list[Row]) -> list[Row]:
        errors, others, seen = [], [], set()
        for row in rows:
            if row.kind == "error":
                key = (row.index, row.uuid, row.code, row.message)
                if key not in seen and key not in self._last_errors:
                    errors.append(row)
                seen.add(key)
                continue
            if row.kind == "sample":
                gpu = row.uuid or f"index {row.index}"
                noted = dict(row.notes)
                for smi_field, reason in noted.items():
                    if self._reasons.get((gpu, smi_field)) != reason:
                        errors.append(Row("error", index=row.index, uuid=row.uuid, name=row.name,
                                          message=f"{smi_field}: {reason}"))
                    self._reasons[(gpu, smi_field)] = reason
                for smi_field in SMI_FIELDS[3:]:
                    if smi_field not in noted:
                        self._reasons.pop((gpu, smi_field), None)
            others.append(row)
        self._last_errors = seen
        return errors + others


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def run(
    sampler: Sampler,
    log: GpumonLog,
    *,
    interval: float,
    count: int | None = None,
    duration: float | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] | None = None,
    utcnow: Callable[[], datetime] = _utcnow,
    dedup: bool = True,
) -> int:
    """Sample every ``interval`` seconds into ``log``; return the number of ticks written.

    Stops after ``count`` ticks, or before the first tick due ``duration`` seconds or more after
    the first one, or when ``stop`` is set (the tick in progress is finished and written first);
    with neither ``count`` nor ``duration`` it runs until ``stop``. Ticks are due at
    ``start + k * interval`` on ``clock`` (seconds); a tick that overruns makes the next one start
    at once, without catching up on the missed ones. ``sleep(seconds)`` defaults to
    ``stop.wait`` so that setting ``stop`` (e.g. from a signal handler) cuts a wait short;
    ``utcnow()`` must return an aware datetime. Tests pass a fake clock, sleep and utcnow.
    ``dedup=False`` writes every error row, repeats included (see :class:`RepeatFilter`).
    A sampler with a ``stop`` attribute gets ``stop``, so that it can cut a wait short.
    Raises ValueError for a non-positive interval or duration, a count < 1, or both count and
    duration; :class:`LogWriteError` (with ``.ticks``) when the log cannot be written.
    """
    check_seconds("interval", interval)
    if count is not None and duration is not None:
        raise ValueError("give count or duration, not both")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise ValueError(f"count={count!r}; accepted: an integer >= 1")
    if duration is not None:
        check_seconds("duration", duration)
    stop = stop or threading.Event()
    sleep = sleep or stop.wait
    if hasattr(sampler, "stop"):
        sampler.stop = stop
    tracker = PresenceTracker()
    repeats = RepeatFilter() if dedup else None
    start = due = clock()
    ticks = 0
    while not stop.is_set():
        now = utcnow()
        if now.tzinfo is None:
            raise ValueError("utcnow() returned a naive datetime; it must carry a timezone")
        stamp = now.astimezone(timezone.utc).isoformat(timespec="milliseconds")
        rows = tracker.update(sampler.sample())
        if repeats is not None:
            rows = repeats.update(rows)
        try:
            log.write(replace(row, timestamp=stamp, source=sampler.source) for row in rows)
        except LogWriteError as exc:
            exc.ticks = ticks
            raise
        ticks += 1
        due += interval
        if (count is not None and ticks >= count) or (duration is not None and due - start >= duration):
            break
        now_s = clock()
        if due > now_s:
            sleep(due - now_s)
        else:  # overran: the next tick starts now, missed ones are not caught up
            due = now_s
    return ticks
