"""The GPU monitor's durable log: an append-only CSV file written tick by tick with fsync, and read back.

Durability, rotation and the header rule are described in :mod:`ringlab.labs.gpumon`.
"""

from __future__ import annotations

import csv
import io
import os
import stat
import warnings
from pathlib import Path
from typing import Callable, Iterable

from .rows import HEADER, Row


class LogWriteError(OSError):
    """Writing the log failed (disk full, I/O error...); the file still ends with the last whole tick.

    ``ticks`` is set by :func:`run` to the number of ticks written before the failure.
    """

    def __init__(self, path, cause: OSError):
        super().__init__(cause.errno, f"cannot write {path}: {cause.strerror or cause}")
        self.path, self.cause, self.ticks = path, cause, 0


class GpumonLog:
    """Append-only CSV log with the :data:`HEADER` schema; use as a context manager.

    Raises ValueError when ``path`` holds a file whose first line is not this header (the file
    is left untouched), OSError when it cannot be opened. A last line cut short by a crash is
    ended with a newline before appending, so it stays a (short, skipped by :func:`read_log`)
    row of its own instead of merging with the next one. ``on_notice(text)`` is told when the
    file was deleted or replaced under the monitor and a new one was started.
    """

    def __init__(self, path: str | os.PathLike, on_notice: Callable[[str], object] | None = None):
        self.path = Path(path)
        self.on_notice = on_notice
        self._open()

    def _open(self) -> None:
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):  # /dev/full, /dev/zero, a FIFO: reading the header never ends
            raise ValueError(f"{self.path} is not a regular file; gpumon appends to a CSV file: pass another --out")
        self._file = open(self.path, "a+b", buffering=0)
        try:
            self._identity = self._stat_identity(os.fstat(self._file.fileno()))
            self._prepare()
        except BaseException:
            self._file.close()
            raise

    @staticmethod
    def _stat_identity(st: os.stat_result) -> tuple[int, int]:
        return st.st_dev, st.st_ino

    def _prepare(self) -> None:
        f = self._file
        expected = ",".join(HEADER)
        f.seek(0)
        first = f.readline(len(expected) + 2)
        if not first:
            self._append(expected + "\n")
        elif first.decode("utf-8", "replace").rstrip("\r\n") != expected:
            raise ValueError(
                f"{self.path} exists and its first line is {first[:200]!r}, not the gpumon header "
                f"{expected!r}; gpumon only appends to its own logs: pass another --out"
            )
        else:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                self._append("\n")

    def _append(self, text: str) -> None:
        """Write ``text`` and fsync it, or cut the file back to where it was and raise LogWriteError."""
        data, fd = text.encode("utf-8"), self._file.fileno()
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, start)  # no torn row: the file ends with the last whole tick
            except OSError:
                pass
            raise LogWriteError(self.path, exc) from None

    def _replaced(self) -> str:
        """Why the path no longer names the open file ('deleted', 'replaced'), or ''."""
        try:
            here = self._stat_identity(os.stat(self.path))
        except FileNotFoundError:
            return "deleted"
        except OSError:
            return ""
        return "" if here == self._identity else "replaced (rotated?)"

    def write(self, rows: Iterable[Row]) -> None:
        """Append ``rows`` in one go, then fsync; first start a new file if the old one was deleted or moved."""
        rows = list(rows)
        why = self._replaced()
        if why:
            self._file.close()
            self._open()
            note = f"gpumon: the log file was {why} while being written; started a new one at {self.path}"
            if self.on_notice is not None:
                self.on_notice(note)
            first = rows[0] if rows else Row("error")
            rows.insert(0, Row("error", message=note, timestamp=first.timestamp, source=first.source))
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\n").writerows(row.to_record() for row in rows)
        self._append(buffer.getvalue())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> GpumonLog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_log(path: str | os.PathLike) -> list[Row]:
    """Read a gpumon CSV log back into :class:`Row` objects (metrics as float, empty cells as None).

    Raises ValueError if the header is not :data:`HEADER`. A row with the wrong number of cells
    (a line cut short by a crash), a bad number or a line the csv module cannot read is skipped
    with a warning; the other rows are still returned. An empty file gives ``[]``.
    """
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        reader = csv.reader(f)
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise ValueError(f"{path}: unreadable header: {exc}") from None
        if header is None:
            return []
        if tuple(header) != HEADER:
            raise ValueError(f"{path}: header {header[:20]} is not the gpumon header {list(HEADER)}")
        rows = []
        while True:
            try:
                record = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:  # an overlong or broken line written by something else: skip it alone
                warnings.warn(f"{path}:{reader.line_num}: skipped an unreadable row: {exc}")
                continue
            if len(record) != len(HEADER):
                warnings.warn(f"{path}:{reader.line_num}: skipped a row of {len(record)} cells, expected {len(HEADER)}")
                continue
            try:
                rows.append(Row.from_record(dict(zip(HEADER, record))))
            except ValueError as exc:
                warnings.warn(f"{path}:{reader.line_num}: skipped a row with a bad value: {exc}")
    return rows
