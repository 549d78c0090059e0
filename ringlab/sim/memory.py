"""Memory a simulated collective needs, checked before anything is allocated.

A simulator run holds the output array (``world_size x numel`` elements, which doubles as the
working buffer), one carry row of ``numel`` elements for ring phases, the planner's few booleans
per (rank, non-empty chunk) slot, the per-step byte tables when they are kept, and the values an
explicit step gathers before sending (its snapshot). :func:`run_bytes` adds these up from the
schedule alone; :func:`check_fits` refuses a run that would not fit in the memory the machine has
available, with the estimate, instead of dying in a ``MemoryError`` minutes later.
"""

from __future__ import annotations

import os

from ringlab.collectives import Schedule, chunk_offsets

from .executor import TABLE_CELLS

_PLANNER_BOOLS = 6  # slot tables alive at once while compiling: held, written, live, ring live-outs, outputs, a block
_BYTES_PER_ROW = 160  # index and flag arrays the planner keeps per transfer of an explicit step
_BYTES_PER_RING_STEP = 1024  # a compiled ring step: a few Segment records
_SLACK = 1 << 20
_TABLE_BYTES_PER_CELL = 48  # sent and received tables, their run tables, and the running sums


class InsufficientMemory(MemoryError):
    """A run whose estimated memory exceeds what the machine has available; the message gives both."""


def available_bytes() -> int | None:
    """Memory available to this process now (Linux ``MemAvailable``; else free physical pages), or None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def run_bytes(schedule: Schedule, numel: int, itemsize: int) -> int:
    """Estimated peak bytes of simulating ``schedule`` on a ``(world_size, numel)`` message (inputs not counted).

    Output array, carry row, the planner's slot tables and per-row index arrays of the largest
    explicit step, the compiled ring steps, per-step byte tables when kept, and three times the largest
    explicit step's bytes (the gathered snapshot, the receivers' copies and a mixed gather's temporary),
    plus a MiB for the interpreter's own objects.
    """
    n, numel = schedule.world_size, int(numel)
    slots = n * min(numel, schedule.num_chunks)  # (rank, non-empty chunk) pairs
    cells = schedule.num_steps * n
    tables = _TABLE_BYTES_PER_CELL * cells if cells <= TABLE_CELLS else 0
    explicit = [step for phase in schedule.phases if isinstance(phase, tuple) for step in phase]
    rings = sum(phase.count for phase in schedule.phases if not isinstance(phase, tuple))
    offsets = chunk_offsets(numel, schedule.num_chunks) * itemsize
    gathered = max((int(step.bytes(offsets).sum()) for step in explicit), default=0)
    rows = max((len(step) for step in explicit), default=0)
    carry = numel * itemsize if rings else 0
    return (n * numel * itemsize + carry + _PLANNER_BOOLS * slots + _BYTES_PER_ROW * rows + _BYTES_PER_RING_STEP * rings
            + tables + 3 * gathered + _SLACK)


def cluster_verify_bytes(schedule: Schedule, numel: int) -> int:
    """Estimated peak bytes of :func:`ringlab.sim.on_cluster.verify_on_cluster` on ``schedule`` with ``numel`` int64
    elements per rank: the simulator run (:func:`run_bytes`) plus the checks' arrays, each ``world_size x
    numel``: the seeded input, the values compared on both sides and their copies (int64) and the mask
    of output slots (one byte each). An upper bound: 1.1 to 1.5 times the peak tracemalloc measures for
    ring, tree, hierarchical and NVLS schedules, about 3 times for direct (tests/topology/test_topology_guards.py)."""
    data = schedule.world_size * int(numel)
    return run_bytes(schedule, numel, 8) + 4 * 8 * data + data


def check_fits(what: str, estimate: int, available: int | None = None) -> None:
    """Raise :class:`InsufficientMemory` when ``estimate`` bytes exceed the available memory (or ``available``)."""
    limit = available_bytes() if available is None else available
    if limit is not None and estimate > limit:
        raise InsufficientMemory(f"{what} needs about {estimate / 2**30:,.2f} GiB ({estimate:,} B) but this machine "
                                 f"has {limit / 2**30:,.2f} GiB available; use fewer ranks or elements, or count "
                                 "bytes without moving data with Schedule.bytes_sent()")
