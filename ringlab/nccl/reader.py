"""Read one or more inputs (nccl-tests text, nccl-tests JSON, rccl-tests JSON lines, NCCL_DEBUG logs) into runs.

A *run* is one nccl-tests invocation: it starts at ``# nccl-tests version``, ``# Collective test
starting`` or the ``nThread`` header (whichever comes first) and collects its device lines, result
rows, footer and the NCCL log lines printed in between. Log lines outside any run (a separate
``NCCL_DEBUG_FILE``, or a log with no table) are kept as the document's ``log_lines`` and apply to
every run. Lines nothing here recognises are counted, never fatal; an input with nothing
recognisable at all raises :class:`ParseError` naming its first line.

Files are streamed (:func:`read_paths`, :func:`read_streams`), and texts (:func:`read_texts`) read
the same way: in blocks of whole lines of about :data:`BLOCK_BYTES`. Result rows of the common
nccl-tests layout are found and read a block at a time with numpy (:mod:`ringlab.nccl.fastrows`:
exactly what :func:`ringlab.nccl.table.parse_row` reads), every other line by :meth:`_Reader.feed`;
a run keeps one row per message size (:meth:`ringlab.nccl.records.Run.keep`) and a bounded number of
example lines of each skipped kind. So a table of any length is read in memory bounded by its
distinct sizes, at about the speed of splitting its lines (``benchmarks/bench_explain.py``). NCCL_DEBUG
log lines are kept whole as evidence (a log's memory grows with it). Only regular files and stdin
are read: a FIFO or a device could block or never end.
"""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from dataclasses import dataclass, field
import numpy as np

from . import fastrows, table
from .debuglog import LogFacts
from .jsonout import looks_like_json, read_json
from .lines import Line, clean, decode
from .names import collective_name
from .records import ROWS_KEPT, Device, Examples, Measure, ParseError, Row, Run

MAX_INPUT_BYTES = 256 * 2**20  # text handed over whole (read_texts) and JSON documents: a paste or a log
MAX_STREAM_BYTES = 4 * 2**30  # a streamed file: about a minute and a half at 50 MB/s
_FEW_ROWS = 32  # rows between other lines read one by one: numpy's fixed costs outweigh its speed there
LONGEST_LINE = 1 << 24  # a line longer than this is cut: it is no nccl-tests line
BLOCK_BYTES = 1 << 20  # read and parse this many bytes at a time (1 MiB: the work stays in cache)


@dataclass
class Document:
    """Everything read: runs in order, log lines outside runs, and counts of what was skipped."""

    runs: list[Run] = field(default_factory=list)
    log_lines: list[Line] = field(default_factory=list)
    unknown: Examples = field(default_factory=Examples)  # first lines nothing recognised; .total counts all
    malformed: Examples = field(default_factory=Examples)  # (line, why) of every run's malformed rows
    commands: Examples = field(default_factory=Examples)  # command lines: a *_perf binary or NCCL_X=value
    lines: int = 0


class _Reader:
    def __init__(self, doc: Document):
        self.doc = doc
        self.run: Run | None = None
        self.pending_collective: tuple[str, Line] | None = None
        self.shapes: dict = {}  # line shapes seen, for fastrows.Block

    def _open(self, line: Line, marker: str | None = None) -> Run:
        """The run a line belongs to; a new one when none is open or the open one already has ``marker``."""
        run = self.run
        fresh = run is None or (marker is not None and (bool(run.rows) or marker in _markers(run)))
        if fresh:
            run = Run(start=line)
            if self.pending_collective:
                run.collective, run.collective_evidence = self.pending_collective
                run.command = self.pending_collective[1]
                self.pending_collective = None
            self.doc.runs.append(run)
            self.run = run
        return run

    def feed(self, line: Line) -> None:
        """Read one line: the first reader of :data:`_KINDS` that recognises it takes it; else it is unknown."""
        self.doc.lines += 1
        if table.is_noise(line.text) and not table.HEADER.match(line.text):
            return
        if not any(read(self, line) for read in _KINDS):
            self.doc.unknown.append(line)

    # One reader per record kind, in the order they are tried; each returns True when the line was its kind.

    def _version(self, line: Line) -> bool:
        m = table.TESTS_VERSION.match(line.text) or table.RCCL_TESTS_VERSION.match(line.text)
        if m:
            key = "nccl-tests" if "nccl-tests" in line.text else "rccl-tests"
            self._open(line, key).versions[key] = m["version"]
        return bool(m)

    def _starting(self, line: Line) -> bool:
        m = table.STARTING.match(line.text)
        if not m:
            return False
        name = collective_name(m["name"])
        if m["what"] == "starting":
            run = self._open(line, "starting")
            run.collective, run.collective_evidence = name, line
        elif self.run is not None:
            self.run.footer_lines.append(line)
            if self.run.collective is None:
                self.run.collective, self.run.collective_evidence = name, line
        return True

    def _header(self, line: Line) -> bool:
        m = table.HEADER.match(line.text)
        if m:
            self._open(line, "header").header = table.header_fields(m)
        return bool(m)

    def _implementation(self, line: Line) -> bool:
        m = table.IMPLEMENTATION.match(line.text)
        if m and self.run is not None:
            self.run.implementation = m["name"]
            return True
        return False

    def _device(self, line: Line) -> bool:
        m = table.DEVICE.match(line.text)
        if m:
            run = self._open(line, "device" if self.run is None or self.run.rows else None)
            run.devices.setdefault(int(m["rank"]), Device(int(m["rank"]), m["host"], int(m["device"]),
                                                          m["bus"], m["name"], line))
        return bool(m)

    def _columns(self, line: Line) -> bool:
        columns = table.columns_of(line.text)
        if columns is not None:
            run = self._open(line, "columns" if self.run is not None and self.run.rows else None)
            run.columns = columns
        return columns is not None

    def _result(self, line: Line) -> bool:
        tokens = line.text.split()
        if table.looks_like_row(tokens):
            self._row(line, tokens)
            return True
        if self.run is not None and self.run.columns and 0 < len(tokens) < 3 and all(t.isascii() and t.isdigit()
                                                                                    for t in tokens):
            self.run.truncated.append(line)  # a result row cut after its first numbers
            return True
        return False

    def _failure(self, line: Line) -> bool:
        if not table.FAILURE.search(line.text):
            return False
        (self.run.failures if self.run is not None else self.doc.unknown).append(line)
        return True

    def _log(self, line: Line) -> bool:
        return _is_log(line, self.run.log_lines if self.run is not None else self.doc.log_lines)

    def _command(self, line: Line) -> bool:
        """A ``*_perf`` command line (its collective and launch, for the next run if this one has begun) or an
        ``NCCL_X=value`` setting."""
        m = table.PERF_BINARY.search(line.text)
        if m is None:
            if table.ENV_ASSIGNMENT.search(line.text):
                self.doc.commands.append(line)
                return True
            return False
        self.doc.commands.append(line)
        name = collective_name(m["name"])
        if self.run is not None and not self.run.rows and self.run.collective is None:
            self.run.collective, self.run.collective_evidence = name, line
            self.run.command = self.run.command or line
        else:
            self.pending_collective = (name, line)
        return True

    def _row(self, line: Line, tokens: list[str]) -> None:
        run = self._open(line)
        try:
            fields, complete = table.parse_row(tokens, run.columns)
        except table.RowError as exc:
            self.doc.malformed.append((line, str(exc)))
            run.malformed.append((line, str(exc)))
            return
        if not complete:
            run.truncated.append(line)
            return
        run.rows_read += 1
        run.keep(Row(line=line, **fields))

    def feed_block(self, source: str, number: int, data: bytes, decode) -> int:
        """Feed the lines of ``data`` (whole lines, numbered from ``number``; ``decode`` turns bytes to text);
        return the number of the line after them. Result rows of MODERN_COLUMNS inside a run of that
        layout are read together (:mod:`ringlab.nccl.fastrows`), every other line by :meth:`feed`."""
        block = fastrows.Block(data, self.shapes)
        slow = np.flatnonzero(block.kind == 0)
        done = 0
        for stretch in np.split(slow, np.flatnonzero(np.diff(slow) != 1) + 1):  # runs of other lines
            if not len(stretch):
                continue
            a, b = int(stretch[0]), int(stretch[-1]) + 1
            number = self._rows(block, source, number, done, a)
            raws = decode(block.chunk(a, b)).splitlines()
            for k, raw in enumerate(raws):
                self.feed(Line(source, number + k, raw, clean(raw)))
            number, done = number + len(raws), b
        return self._rows(block, source, number, done, len(block))

    def _rows(self, block: fastrows.Block, source: str, number: int, i: int, j: int) -> int:
        """Rows ``i`` to ``j - 1`` of ``block`` (numbered from ``number``; :mod:`~ringlab.nccl.fastrows` found them
        rows of MODERN_COLUMNS) as :meth:`feed` would read them: in a run of that layout, read with numpy,
        kept one by one up to ``ROWS_KEPT`` rows in the run, then folded per key as :meth:`Run.keep`
        would, building a :class:`Row` only where a key takes it. Returns the number of line ``j``."""
        run = self.run
        if run is None or run.columns != table.MODERN_COLUMNS or j - i < _FEW_ROWS:
            for k in range(i, j):  # read as any line: in another layout they are read otherwise
                raw = block.raw(k)
                self.feed(Line(source, number + k - i, raw, clean(raw)))
            return number + j - i
        self.doc.lines += j - i
        run.rows_read += j - i
        room = min(j - i, max(0, ROWS_KEPT - len(run.rows)))
        for row in _built(block, source, number - i, np.arange(i, i + room)):
            run.keep(row)
        if i + room == j:
            return number + j - i
        rows = np.arange(i + room, j)
        found = {name: column[i + room:j] for name, column in
                 block.columns(("size", "count", "root", "busbw0", "busbw1", "wrong0", "wrong1")).items()}
        key, group, first = _keys(found, block, rows)
        busbw = np.maximum(found["busbw0"], found["busbw1"])
        failed = (found["wrong0"] > 0) | (found["wrong1"] > 0)  # N/A reads 0: not failed, as Measure.failed
        order = np.lexsort((-busbw, ~failed, group))  # stable: ties keep the earlier row
        heads = np.r_[True, group[order][1:] != group[order][:-1]]
        best = np.empty_like(first)
        best[group[order][heads]] = order[heads]  # per key the first row with the highest (failed, busbw)
        new = [g for g in range(len(first)) if key[g] not in run.row_index]
        take = [int(first[g]) for g in new]  # a new key takes its place in the run where first read
        for g in range(len(first)):
            m = int(best[g])
            at = run.row_index.get(key[g])
            if (at is None and m != first[g]) or (at is not None and (bool(failed[m]), float(busbw[m])) >
                                                  (run.rows[at].failed, run.rows[at].busbw)):
                take.append(m)  # Run.keep would replace the key's row with it
        for row in _built(block, source, number - i, rows[np.sort(take)] if take else rows[:0]):
            run.keep(row)
        return number + j - i

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


_KINDS = (_Reader._version, _Reader._starting, _Reader._header, _Reader._implementation, _Reader._device,
          _Reader._columns, _Reader._result, _Reader._footer, _Reader._failure, _Reader._log, _Reader._command)


def _keys(found: dict, block: fastrows.Block, rows: np.ndarray) -> tuple[list[tuple], np.ndarray, np.ndarray]:
    """(keys, group, first) of rows ``rows`` of ``block`` with numbers ``found``: a group number per row, equal for
    equal (size, count, type, redop, root) (the key of :meth:`Run.keep`), each group's first row and key."""
    kind = block.kind[rows]
    columns = np.stack([found["size"], found["count"], found["root"], block.printed[kind]], 1)
    _, first, group = np.unique(columns[:, 0], return_index=True, return_inverse=True)
    group = group.ravel()
    if not (columns == columns[first][group]).all():  # a size with more than one count, root, type or redop
        _, first, group = np.unique(columns, axis=0, return_index=True, return_inverse=True)
        group = group.ravel()
    shapes = [block.shapes[k] for k in kind[first].tolist()]
    keys = [(int(size), int(count), shape.dtype, shape.redop, int(root)) for size, count, root, shape in
            zip(found["size"][first].tolist(), found["count"][first].tolist(), found["root"][first].tolist(), shapes)]
    return keys, group, first


def _built(block: fastrows.Block, source: str, offset: int, rows: np.ndarray) -> list[Row]:
    """The :class:`Row` of each line ``rows`` of ``block`` (line ``k`` is number ``offset + k`` of ``source``),
    from the numbers :meth:`fastrows.Block.numbers` reads: the values :func:`table.parse_row` gives."""
    values = block.numbers(rows)
    out = []
    for k, kind, size, count, root, t0, a0, b0, w0, t1, a1, b1, w1 in zip(
            rows.tolist(), block.kind[rows].tolist(), *(values[name].tolist() for name in fastrows.NUMBERS)):
        shape = block.shapes[kind]
        raw = block.raw(k)
        out.append(Row(size=int(size), count=int(count), dtype=shape.dtype, redop=shape.redop, root=int(root),
                       out_of_place=Measure(t0, a0, b0, None if shape.na[0] else int(w0)),
                       in_place=Measure(t1, a1, b1, None if shape.na[1] else int(w1)),
                       line=Line(source, offset + k, raw, raw[shape.text_span[0]:shape.text_span[1]])))
    return out


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


def _state(doc: Document) -> tuple[int, int, int]:
    return len(doc.runs), len(doc.log_lines), sum(len(r.log_lines) for r in doc.runs)


def _nothing_read(source: str, first: Line | None) -> ParseError:
    if first is None:
        return ParseError(f"{source}: empty input; expected nccl-tests output or an NCCL_DEBUG log")
    return ParseError(f"{first.where()}: not nccl-tests output or an NCCL_DEBUG log: {first.raw.strip()[:120]!r}")


def _first_line(source: str, first: int, raws: list[str]) -> Line | None:
    k = next((k for k, raw in enumerate(raws) if raw.strip()), None)
    return None if k is None else Line(source, first + k, raws[k], clean(raws[k]))


def _read_json(doc: Document, source: str, text: str) -> bool:
    try:
        doc.runs.extend(read_json(text, source))
        return True
    except json.JSONDecodeError:
        return False  # text that merely starts with a brace: read it as lines


def read_texts(inputs: list[tuple[str, str]]) -> Document:
    """Read ``[(source name, text), ...]`` into one :class:`Document`.

    Raises :class:`ParseError` (naming the source and line) when an input is empty, longer than
    :data:`MAX_INPUT_BYTES` characters, or holds nothing recognisable as nccl-tests output,
    nccl-tests/rccl-tests JSON or an NCCL_DEBUG log, and TypeError for inputs that are not strings.
    """
    doc = Document()
    for source, text in inputs:
        if not isinstance(text, str):
            raise TypeError(f"{source}: expected text (str), got {type(text).__name__}")
        if len(text) > MAX_INPUT_BYTES:
            raise ParseError(f"{source}: {len(text):,} characters; at most {MAX_INPUT_BYTES:,} are read")
        if not text.strip():
            raise ParseError(f"{source}: empty input; expected nccl-tests output or an NCCL_DEBUG log")
        before = _state(doc)
        if looks_like_json(text) and _read_json(doc, source, text):
            continue
        reader, number, start = _Reader(doc), 1, 0
        while start < len(text):  # blocks of whole lines; surrogatepass gives back any str exactly
            end = text.find("\n", start + BLOCK_BYTES)
            end = len(text) if end < 0 else end + 1
            number = reader.feed_block(source, number, text[start:end].encode("utf-8", "surrogatepass"), _exact)
            start = end
        if _state(doc) == before:
            raise _nothing_read(source, _first_line(source, 1, text.splitlines()))
    return doc


def _exact(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def _blocks(stream, source: str):
    """The bytes of ``stream`` in blocks that end at a line break, at most :data:`MAX_STREAM_BYTES` in all."""
    pending, total = b"", 0
    while True:
        data = stream.read(BLOCK_BYTES)
        total += len(data)
        if total > MAX_STREAM_BYTES:
            raise ParseError(f"{source}: larger than {MAX_STREAM_BYTES:,} bytes; not a table or a log this tool reads")
        if not data:
            if pending:
                yield pending
            return
        if pending[-1:] == b"\r" and data[:1] != b"\n":  # the last read ended a line with a lone "\r"
            yield pending
            pending = b""
        # a break in the data: "\n", or a lone "\r" that is not the last byte (it may start "\r\n")
        cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - 1))
        if cut < 0 and len(pending) + len(data) < LONGEST_LINE:
            pending += data
            continue  # one very long line: read on (a longer one is cut: it is no nccl-tests line)
        cut = cut if cut >= 0 else len(data) - 1
        yield b"".join((pending, memoryview(data)[:cut + 1]))  # one copy of the block
        pending = data[cut + 1:]


def read_streams(inputs) -> Document:
    """Read ``[(source name, binary stream), ...]`` into one :class:`Document`, streaming (module docstring).

    Raises :class:`ParseError` as :func:`read_texts` does (and above :data:`MAX_STREAM_BYTES`), OSError
    when a stream cannot be read.
    """
    doc = Document()
    for source, stream in inputs:
        before, reader, number, first = _state(doc), _Reader(doc), 1, None
        blocks = _blocks(stream, source)
        for data in blocks:
            if first is None:
                text = decode(data)
                if not text.strip():
                    number += len(text.splitlines())
                    continue
                if looks_like_json(text):  # JSON is one document: read it whole
                    rest, size = [text], len(text)
                    for more in blocks:
                        rest.append(decode(more))
                        size += len(rest[-1])
                        if size > MAX_INPUT_BYTES:
                            raise ParseError(f"{source}: JSON larger than {MAX_INPUT_BYTES:,} characters")
                    text = "".join(rest)
                    if _read_json(doc, source, text):
                        break
                    data = text.encode()  # not JSON after all: read its lines
                first = _first_line(source, number, text.splitlines())
            number = reader.feed_block(source, number, data, decode)
        if _state(doc) == before:
            raise _nothing_read(source, first)
    return doc


def open_input(name: str):
    """A binary stream of file ``name`` (``-``: stdin). Raises ParseError for anything but a regular file
    (a FIFO with no writer would block for ever, a device may never end), OSError when it cannot be opened."""
    if name == "-":
        if hasattr(sys.stdin, "buffer"):
            return sys.stdin.buffer
        return io.BytesIO(sys.stdin.read().encode("utf-8", errors="replace"))  # a text-only stand-in (tests)
    mode = os.stat(name).st_mode
    if not stat.S_ISREG(mode):
        kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else
                "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise ParseError(f"{name}: is {kind}; give a regular file, or pipe the output in with '-' (stdin)")
    return open(name, "rb")


def read_paths(names: list[str]) -> Document:
    """:func:`read_streams` of the files ``names`` (``-`` for stdin), each opened by :func:`open_input`
    and closed after."""
    streams = []
    try:
        for name in names:
            streams.append((name if name != "-" else "<stdin>", open_input(name)))
        return read_streams(streams)
    finally:
        for name, stream in streams:
            if name != "<stdin>":
                stream.close()
