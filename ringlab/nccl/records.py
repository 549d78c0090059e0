"""What the readers produce: result rows, device lines, runs, and the error an unreadable file raises.

Units are as nccl-tests prints them: ``time_us`` in microseconds, ``algbw`` and ``busbw`` in GB/s
(1e9 B/s, nccl-tests doc/PERFORMANCE.md), ``size`` in bytes. Converting to B/s happens once, in
:mod:`ringlab.nccl.report`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .lines import Line


class ParseError(ValueError):
    """The input is not nccl-tests output, nccl-tests JSON or an NCCL_DEBUG log; the message names the line."""


@dataclass(frozen=True)
class Measure:
    """One half of a result row (out-of-place or in-place).

    ``wrong`` is nccl-tests' ``#wrong`` count (None when printed ``N/A``, i.e. not checked);
    ``max_error`` is the older versions' ``error`` column, the largest deviation found, not a count;
    ``over_threshold`` marks an error value printed with rccl-tests' asterisk.
    """

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None = None
    max_error: float | None = None
    over_threshold: bool = False

    @property
    def failed(self) -> bool:
        """True when this measurement reports wrong results."""
        return bool(self.wrong) or self.over_threshold


@dataclass(frozen=True)
class Row:
    """One message size. ``size`` is the bytes column (S as nccl-tests defines it), ``count`` elements."""

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
    header: dict = field(default_factory=dict)  # nThread, nGpus, minBytes, ... as printed
    versions: dict[str, str] = field(default_factory=dict)  # nccl-tests, nccl, rccl-tests, rccl
    devices: dict[int, Device] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    columns: tuple[str, ...] | None = None
    avg_busbw: float | None = None
    out_of_bounds: int | None = None
    footer_lines: list[Line] = field(default_factory=list)
    failures: list[Line] = field(default_factory=list)  # "Test failure" / "Test NCCL failure" lines
    truncated: list[Line] = field(default_factory=list)  # row-like lines cut short
    log_lines: list[Line] = field(default_factory=list)  # NCCL_DEBUG lines printed within this run
