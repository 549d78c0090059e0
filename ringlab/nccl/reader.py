"""Read one or more inputs (nccl-tests text, nccl-tests JSON, rccl-tests JSON lines, NCCL_DEBUG logs) into runs.

A *run* is one nccl-tests invocation: it starts at ``# nccl-tests version``, ``# Collective test
starting`` or the ``nThread`` header (whichever comes first) and collects its device lines, result
rows, footer and the NCCL log lines printed in between. Log lines outside any run (a separate
``NCCL_DEBUG_FILE``, or a log with no table) are kept as the document's ``log_lines`` and apply to
every run. Lines nothing here recognises are counted, never fatal; an input with nothing
recognisable at all raises :class:`ParseError` naming its first line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from . import table
from .debuglog import LogFacts
from .jsonout import looks_like_json, read_json
from .lines import Line, split_lines
from .names import collective_name
from .records import Device, ParseError, Row, Run

MAX_INPUT_BYTES = 256 * 2**20  # a paste or a log, not a trace archive


@dataclass
class Document:
    """Everything read: runs in order, log lines outside runs, and counts of what was skipped."""

    runs: list[Run] = field(default_factory=list)
    log_lines: list[Line] = field(default_factory=list)
    unknown: list[Line] = field(default_factory=list)
    malformed: list[tuple[Line, str]] = field(default_factory=list)
    commands: list[Line] = field(default_factory=list)  # command lines: a *_perf binary or NCCL_X=value
    lines: int = 0


class _Reader:
    def __init__(self, doc: Document):
        self.doc = doc
        self.run: Run | None = None
        self.pending_collective: tuple[str, Line] | None = None

    def _open(self, line: Line, marker: str | None = None) -> Run:
        """The run a line belongs to; a new one when none is open or the open one already has ``marker``."""
        run = self.run
        fresh = run is None or (marker is not None and (bool(run.rows) or marker in _markers(run)))
        if fresh:
            run = Run(start=line)
            if self.pending_collective:
                run.collective, run.collective_evidence = self.pending_collective
                self.pending_collective = None
            self.doc.runs.append(run)
            self.run = run
        return run

    def feed(self, line: Line) -> None:
        text = line.text
        self.doc.lines += 1
        if table.is_noise(text) and not table.HEADER.match(text):
            return
        m = table.TESTS_VERSION.match(text) or table.RCCL_TESTS_VERSION.match(text)
        if m:
            key = "nccl-tests" if "nccl-tests" in text else "rccl-tests"
            self._open(line, key).versions[key] = m["version"]
            return
        m = table.STARTING.match(text)
        if m:
            name = collective_name(m["name"])
            if m["what"] == "starting":
                run = self._open(line, "starting")
                run.collective, run.collective_evidence = name, line
            elif self.run is not None:
                self.run.footer_lines.append(line)
                if self.run.collective is None:
                    self.run.collective, self.run.collective_evidence = name, line
            return
        m = table.HEADER.match(text)
        if m:
            self._open(line, "header").header = table.header_fields(m)
            return
        m = table.IMPLEMENTATION.match(text)
        if m and self.run is not None:
            self.run.implementation = m["name"]
            return
        m = table.DEVICE.match(text)
        if m:
            run = self._open(line, "device" if self.run is None or self.run.rows else None)
            run.devices.setdefault(int(m["rank"]), Device(int(m["rank"]), m["host"], int(m["device"]),
                                                          m["bus"], m["name"], line))
            return
        columns = table.columns_of(text)
        if columns is not None:
            run = self._open(line, "columns" if self.run is not None and self.run.rows else None)
            run.columns = columns
            return
        tokens = text.split()
        if table.looks_like_row(tokens):
            self._row(line, tokens)
            return
        if self.run is not None and self.run.columns and 0 < len(tokens) < 3 and all(t.isascii() and t.isdigit()
                                                                                    for t in tokens):
            self.run.truncated.append(line)  # a result row cut after its first numbers
            return
        if self._footer(line):
            return
        if table.FAILURE.search(text):
            if self.run is not None:
                self.run.failures.append(line)
            else:
                self.doc.unknown.append(line)
            return
        if _is_log(line, self.run.log_lines if self.run is not None else self.doc.log_lines):
            return
        m = table.PERF_BINARY.search(text)
        if m is None and table.ENV_ASSIGNMENT.search(text):
            self.doc.commands.append(line)
            return
        if m:
            self.doc.commands.append(line)
            name = collective_name(m["name"])
            if self.run is not None and not self.run.rows and self.run.collective is None:
                self.run.collective, self.run.collective_evidence = name, line
            else:
                self.pending_collective = (name, line)
            return
        self.doc.unknown.append(line)

    def _row(self, line: Line, tokens: list[str]) -> None:
        run = self._open(line)
        try:
            fields, complete = table.parse_row(tokens, run.columns)
        except table.RowError as exc:
            self.doc.malformed.append((line, str(exc)))
            return
        if not complete:
            run.truncated.append(line)
            return
        run.rows.append(Row(line=line, **fields))

    def _footer(self, line: Line) -> bool:
        text = line.text
        m = table.OUT_OF_BOUNDS.match(text)
        if m and self.run is not None:
            self.run.out_of_bounds = int(m["n"])
            self.run.footer_lines.append(line)
            return True
        m = table.AVG_BUSBW.match(text)
        if m and self.run is not None:
            try:
                self.run.avg_busbw = float(m["value"])
            except ValueError:
                pass
            self.run.footer_lines.append(line)
            return True
        return False


def _markers(run: Run) -> set[str]:
    found = set(run.versions)
    if run.collective_evidence is not None and table.STARTING.match(run.collective_evidence.text):
        found.add("starting")
    if run.header:
        found.add("header")
    if run.devices:
        found.add("device")
    if run.columns:
        found.add("columns")
    return found


def _is_log(line: Line, sink: list[Line]) -> bool:
    probe = LogFacts()
    if probe.add(line):
        sink.append(line)
        return True
    return False


def read_texts(inputs: list[tuple[str, str]]) -> Document:
    """Read ``[(source name, text), ...]`` into one :class:`Document`.

    Raises :class:`ParseError` (naming the source and line) when an input is empty or holds nothing
    recognisable as nccl-tests output, nccl-tests/rccl-tests JSON or an NCCL_DEBUG log, and
    TypeError for inputs that are not strings.
    """
    doc = Document()
    for source, text in inputs:
        if not isinstance(text, str):
            raise TypeError(f"{source}: expected text (str), got {type(text).__name__}")
        if len(text) > MAX_INPUT_BYTES:
            raise ParseError(f"{source}: {len(text):,} characters; at most {MAX_INPUT_BYTES:,} are read")
        if not text.strip():
            raise ParseError(f"{source}: empty input; expected nccl-tests output or an NCCL_DEBUG log")
        before = (len(doc.runs), len(doc.log_lines), sum(len(r.log_lines) for r in doc.runs))
        if looks_like_json(text):
            try:
                doc.runs.extend(read_json(text, source))
                continue
            except json.JSONDecodeError:
                pass  # text that merely starts with a brace: read it as lines
        reader = _Reader(doc)
        for line in split_lines(text, source):
            reader.feed(line)
        after = (len(doc.runs), len(doc.log_lines), sum(len(r.log_lines) for r in doc.runs))
        if after == before:
            first = next((line for line in split_lines(text, source) if line.raw.strip()), None)
            where = first.where() if first else source
            shown = first.raw.strip()[:120] if first else text.strip()[:120]
            raise ParseError(f"{where}: not nccl-tests output or an NCCL_DEBUG log: {shown!r}")
    return doc
