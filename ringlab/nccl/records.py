"""What the readers produce: result rows, device lines, runs, and the error an unreadable file raises.

Units are as nccl-tests prints them: ``time_us`` in microseconds, ``algbw`` and ``busbw`` in GB/s
(1e9 B/s, nccl-tests doc/PERFORMANCE.md), ``size`` in bytes. Converting to B/s happens once, in
:mod:`ringlab.nccl.report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .lines import Line


ROWS_KEPT = 1024  # result rows a run keeps as read; past this, repeated sizes are folded (Run.keep)
EXAMPLES_KEPT = 1000  # lines of one kind (unknown, malformed, truncated) kept as examples; all are counted


class Examples(list):
    """A list that keeps the first ``limit`` items appended and counts every one in ``total``.

    Readers put skipped lines here, so a huge input of lines they skip holds bounded memory.
    """

    def __init__(self, items=(), limit: int = EXAMPLES_KEPT):
        super().__init__()
        self.limit, self.total = limit, 0
        for item in items:
            self.append(item)

    def append(self, item) -> None:
        self.total += 1
        if len(self) < self.limit:
            super().append(item)


class ParseError(ValueError):
    """The input is not nccl-tests output, nccl-tests JSON or an NCCL_DEBUG log; the message names the line."""


@dataclass(frozen=True)
class Measure:
    """One half of a result row (out-of-place or in-place).

    ``wrong`` is nccl-tests' ``#wrong`` count (None when printed ``N/A``, i.e. not checked);
    ``max_error`` is the older versions' ``error`` column, the largest deviation found, not a count;
    ``over_threshold`` marks an error value printed with rccl-tests' asterisk. The ``iter_*`` and
    ``per_process_us`` fields come from ``-I 1`` runs (None otherwise; :mod:`ringlab.nccl.iterations`).
    """

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None = None
    max_error: float | None = None
    over_threshold: bool = False
    iter_min_us: float | None = None  # nccl-tests -I (per_iter_timing): i_min, i_max, i_p99 (us) and i_cv% of
    iter_max_us: float | None = None  # the iterations, each the max over processes (src/util.cu)
    iter_p99_us: float | None = None
    iter_cv_pct: float | None = None
    per_process_us: tuple[tuple[float, ...], ...] | None = None  # -I -J: per process, its time of each iteration

    @property
    def failed(self) -> bool:
        """True when this measurement reports wrong results."""
        return bool(self.wrong) or self.over_threshold


@dataclass(frozen=True)
class Row:
    """One message size. ``size`` is the bytes column (S as nccl-tests defines it), ``count`` elements (0 where
    the output does not print a count: rccl-tests' JSON lines)."""

    size: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: Measure | None
    in_place: Measure | None
    line: Line

    def measures(self) -> list[Measure]:
        return [m for m in (self.out_of_place, self.in_place) if m is not None]

    @property
    def busbw(self) -> float:
        """The larger of the two printed busbw values (GB/s)."""
        return max(m.busbw for m in self.measures())

    @property
    def failed(self) -> bool:
        return any(m.failed for m in self.measures())


@dataclass(frozen=True)
class Device:
    """A ``#  Rank  0 Group  0 Pid 123 on host device  0 [0x07] NVIDIA H100 80GB HBM3`` line."""

    rank: int
    host: str
    device: int
    bus_id: str
    name: str
    line: Line


@dataclass
class Run:
    """One nccl-tests invocation: its header fields, devices, rows and the log lines printed inside it."""

    start: Line | None = None
    collective: str | None = None  # from "Collective test starting:" or a command line
    collective_evidence: Line | None = None
    implementation: str | None = None  # ringlab bench's "# Implementation:" line (torch.distributed, ringlab ring)
    command: Line | None = None  # the *_perf command line that launched it, when the input shows it
    header: dict = field(default_factory=dict)  # nThread, nGpus, minBytes, ... as printed
    versions: dict[str, str] = field(default_factory=dict)  # nccl-tests, nccl, rccl-tests, rccl
    devices: dict[int, Device] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    columns: tuple[str, ...] | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    footer_lines: list[Line] = field(default_factory=list)
    failures: list[Line] = field(default_factory=list)  # "Test failure" / "Test NCCL failure" lines
    truncated: Examples = field(default_factory=Examples)  # row-like lines cut short (.total counts all)
    malformed: Examples = field(default_factory=Examples)  # (line, why) of rows whose values do not fit
    log_lines: list[Line] = field(default_factory=list)  # NCCL_DEBUG lines printed within this run
    rows_read: int = 0  # result rows parsed; above len(rows) when a size was measured more than once
    row_index: dict = field(default_factory=dict, repr=False, compare=False)  # row key -> position in rows

    def keep(self, row: Row) -> None:
        """Add a parsed row. Once the run holds :data:`ROWS_KEPT` rows, a row repeating the (size, count, type,
        redop, root) of an earlier one (nccl-tests ``-N`` cycles, concatenated sweeps) is folded into it: a
        failed measurement wins, then the higher busbw, then the earlier line. So a run of any length
        holds at most ``ROWS_KEPT`` rows plus one per distinct size."""
        key = (row.size, row.count, row.dtype, row.redop, row.root)
        at = self.row_index.get(key)
        if at is None or len(self.rows) < ROWS_KEPT:
            self.row_index[key] = len(self.rows)
            self.rows.append(row)
        elif (row.failed, row.busbw) > (self.rows[at].failed, self.rows[at].busbw):
            self.rows[at] = row
