"""Sample per-GPU utilization and memory into an append-only CSV log that survives driver faults.

Backends
--------
``nvml``
    The NVIDIA Management Library through nvidia-ml-py (module ``pynvml``, optional:
    ``pip install 'ringlab[gpu]'``): a few library calls per GPU per tick, no process forked.
``smi``
    ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits`` in a subprocess, killed
    after ``smi_timeout`` seconds, because a wedged driver can leave nvidia-smi hanging forever.
``auto``
    ``nvml`` when ``pynvml`` imports and ``nvmlInit()`` succeeds, otherwise ``smi``.

CSV schema
----------
One header line (the names below, in this order), then rows appended tick by tick; UTF-8,
``\\n`` line ends, quoting as Python's :mod:`csv` does it. An empty cell means "not known";
a metric is never written as 0 unless the driver said 0.

====================  ==========================================================================
column                meaning
====================  ==========================================================================
timestamp             start of the tick, UTC ISO-8601 with milliseconds; shared by its rows
kind                  ``sample`` | ``lost`` | ``back`` | ``error`` (below)
source                ``nvml`` | ``smi``: the backend that produced the row
index                 GPU index as the backend enumerates it
uuid                  GPU UUID (``GPU-...``)
name                  product name, e.g. ``NVIDIA H100 80GB HBM3``
utilization_gpu_pct   % of the driver's sample period in which a kernel ran (``utilization.gpu``)
memory_used_mib       device memory in use, MiB = 2**20 bytes (``memory.used``)
memory_total_mib      device memory, MiB (``memory.total``)
power_draw_w          board power, W (``power.draw``)
temperature_gpu_c     core temperature, degrees C (``temperature.gpu``)
code                  error rows: nvidia-smi's exit status, or NVML's ``nvmlReturn_t`` value
message               error rows: what went wrong; several lines are joined with `` | ``
====================  ==========================================================================

The quantities and their units are those of ``nvidia-smi --help-query-gpu`` and the NVML API
reference (``nvmlDeviceGetMemoryInfo`` reports bytes, floored here to whole MiB as nvidia-smi
prints them; ``nvmlDeviceGetPowerUsage`` reports milliwatts, divided by 1000 here).

Row kinds
~~~~~~~~~
``sample``
    One GPU's readings. A value the driver does not give (``[N/A]``, ``[Not Supported]``,
    ``N/A``, any other non-number; NVML's ``NVML_ERROR_NOT_SUPPORTED``) is left empty.
``lost``
    A GPU seen in an earlier tick is missing from this one, whatever the cause (an ``error``
    row of the same tick usually says why). Written once, on the first tick it is missing,
    with the last index, uuid and name seen. GPUs are told apart by uuid (by index when the
    uuid is unknown).
``back``
    A lost GPU is seen again; its ``sample`` row follows in the same tick.
``error``
    A call that went wrong: nvidia-smi missing, timed out, exiting non-zero or printing a line
    that is not a GPU line (``code`` holds the exit status); NVML failing to initialise or to
    count devices (whole tick), or failing on one GPU (that GPU's index, and uuid/name when
    known; the other GPUs are still sampled). The monitor writes the row and keeps sampling.

Within a tick: ``error`` rows first, then per GPU in the order reported ``back`` (if any) and
``sample``, then ``lost`` rows by index.

Durability: the log is opened for appending and never truncated; the header is written only
to an empty file, and a file whose first line is another header is refused (``ValueError``).
Each tick is written with one ``write`` followed by ``flush`` and ``os.fsync``, so a crash
loses at most the tick in progress.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import signal
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Protocol

SMI_FIELDS = (
    "index", "uuid", "name", "utilization.gpu", "memory.used", "memory.total", "power.draw", "temperature.gpu",
)
METRICS = ("utilization_gpu_pct", "memory_used_mib", "memory_total_mib", "power_draw_w", "temperature_gpu_c")
# Units nvidia-smi prints after each metric when ``nounits`` is not honoured.
_METRIC_UNITS = ("%", "MiB", "MiB", "W", "C")
HEADER = ("timestamp", "kind", "source", "index", "uuid", "name", *METRICS, "code", "message")
KINDS = ("sample", "lost", "back", "error")
BACKENDS = ("auto", "nvml", "smi")
SAMPLE_LOG = Path(__file__).with_name("data") / "gpumon_sample.csv"
MIB = 2**20

_NUMBER = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(\S*)")
_INDEX = re.compile(r"[0-9]+")
_PLACEHOLDER = re.compile(r"\[.*\]|n/?a|not supported|unknown(?: error)?|-?", re.IGNORECASE)


@dataclass(frozen=True)
class Row:
    """One CSV row (see the module docstring for the columns); ``None`` is written as an empty cell."""

    kind: str
    index: int | None = None
    uuid: str = ""
    name: str = ""
    utilization_gpu_pct: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_draw_w: float | None = None
    temperature_gpu_c: float | None = None
    code: int | None = None
    message: str = ""
    timestamp: str = ""
    source: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Row kind={self.kind!r}; accepted: {', '.join(KINDS)}")

    def to_record(self) -> list[str]:
        """The row's cells in :data:`HEADER` order, as text."""
        return [_cell(getattr(self, name)) for name in HEADER]

    @classmethod
    def from_record(cls, record: dict[str, str]) -> Row:
        """Inverse of :meth:`to_record` for a ``{column: text}`` mapping; raises ValueError on bad numbers."""
        values = {}
        for f in fields(cls):
            text = record[f.name]
            if f.name in ("index", "code"):
                values[f.name] = int(text) if text else None
            elif f.name in METRICS:
                values[f.name] = float(text) if text else None
            else:
                values[f.name] = text
        return cls(**values)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def parse_value(text: str, unit: str = "") -> float | None:
    """Read one nvidia-smi metric: ``"3"``, ``"3 %"`` (with ``unit="%"``) -> 3.0; placeholders -> None.

    Anything that is not a non-negative decimal number, optionally followed by ``unit``, is a
    value the driver did not give (``[N/A]``, ``[Not Supported]``, ``N/A``, ``ERR!``...) and
    comes back as ``None``, never 0.
    """
    match = _NUMBER.fullmatch(text.strip())
    if match is None or match.group(2) not in ("", unit):
        return None
    return float(match.group(1))


def _text(value: str) -> str:
    value = value.strip()
    return "" if _PLACEHOLDER.fullmatch(value) else value


def parse_smi_csv(text: str) -> list[Row]:
    """Parse the stdout of ``nvidia-smi --query-gpu=<SMI_FIELDS> --format=csv,noheader,nounits``.

    Returns one ``Row(kind="sample")`` per GPU line, in order, with metrics as floats and
    placeholders as ``None`` (see :func:`parse_value`); every other non-blank line (driver
    messages such as ``No devices were found``) becomes ``Row(kind="error", message=line)``.
    A GPU line has at least ``len(SMI_FIELDS)`` comma-separated fields and a decimal index;
    commas beyond that are taken to belong to the name. Pure: no I/O, no timestamps.
    """
    rows = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        parts = [part.strip() for part in line.split(",")]
        if len(parts) < len(SMI_FIELDS) or not _INDEX.fullmatch(parts[0]):
            rows.append(Row("error", message=line))
            continue
        metrics = parts[-len(METRICS):]
        rows.append(Row(
            "sample",
            index=int(parts[0]),
            uuid=_text(parts[1]),
            name=_text(", ".join(parts[2:-len(METRICS)])),
            **{name: parse_value(value, unit) for name, value, unit in zip(METRICS, metrics, _METRIC_UNITS)},
        ))
    return rows


class Sampler(Protocol):
    """What :func:`run` needs from a backend."""

    source: str

    def sample(self) -> list[Row]: ...  # sample and error rows of one tick, without timestamps

    def describe(self) -> str: ...

    def close(self) -> None: ...


class SmiSampler:
    """Backend that runs ``nvidia-smi`` once per tick, killing it after ``timeout`` seconds.

    ``note`` is added to the error row written when the executable is missing (``auto`` uses it
    to say why NVML was not used).
    """

    source = "smi"

    def __init__(self, timeout: float = 10.0, executable: str = "nvidia-smi", note: str = ""):
        _check_positive("smi_timeout", timeout)
        self.timeout, self.executable, self.note = timeout, executable, note

    def describe(self) -> str:
        return f"{self.executable} (timeout {self.timeout:g} s)"

    def command(self) -> list[str]:
        return [self.executable, "--query-gpu=" + ",".join(SMI_FIELDS), "--format=csv,noheader,nounits"]

    def sample(self) -> list[Row]:
        try:
            # A session of its own: Ctrl-C in a terminal reaches the monitor, which then finishes the
            # tick, and a timeout can kill whatever nvidia-smi started along with it.
            proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True, errors="replace", start_new_session=True,
            )
        except FileNotFoundError:
            return [self._error(None, f"{self.executable} not found on PATH" + (f" ({self.note})" if self.note else ""))]
        except OSError as exc:
            return [self._error(None, f"cannot run {self.executable}: {exc}")]
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_session(proc)
            return [self._error(None, f"{self.executable} gave no answer within {self.timeout:g} s and was killed")]
        rows = parse_smi_csv(out)
        problems = [row.message for row in rows if row.kind == "error"]
        problems += [line.strip() for line in err.splitlines() if line.strip()]
        samples = [row for row in rows if row.kind == "sample"]
        if proc.returncode == 0 and not problems:
            return samples
        message = " | ".join(problems) or f"{self.executable} exited with status {proc.returncode}"
        return [self._error(proc.returncode, message), *samples]

    @staticmethod
    def _error(code: int | None, message: str) -> Row:
        return Row("error", code=code, message=message)

    def close(self) -> None:
        """Nothing to release: each tick's process is reaped in :meth:`sample`."""


def _kill_session(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.communicate(timeout=1.0)
    except subprocess.TimeoutExpired:
        # Stuck inside the driver (uninterruptible sleep): leave it rather than hang with it.
        pass


class NvmlSampler:
    """Backend on the NVML bindings module ``nvml`` (``pynvml`` or a stand-in with the same names).

    ``nvmlInit`` is retried on every tick until it succeeds, and again after a failure to count
    devices (the driver may have been reloaded), so a monitor started before the driver keeps going.
    """

    source = "nvml"

    def __init__(self, nvml):
        self._nvml = nvml
        self._ready = False

    def describe(self) -> str:
        return "NVML (nvidia-ml-py)"

    def start(self) -> None:
        """Initialise NVML now; raises ``nvml.NVMLError`` when it cannot."""
        self._nvml.nvmlInit()
        self._ready = True

    def sample(self) -> list[Row]:
        nv = self._nvml
        try:
            if not self._ready:
                self.start()
            count = nv.nvmlDeviceGetCount()
        except nv.NVMLError as exc:
            self.close()
            return [Row("error", code=exc.value, message=f"NVML: {exc}")]
        errors, samples = [], []
        for index in range(count):
            try:
                handle = nv.nvmlDeviceGetHandleByIndex(index)
            except nv.NVMLError as exc:
                errors.append(Row("error", index=index, code=exc.value, message=f"nvmlDeviceGetHandleByIndex: {exc}"))
                continue
            identity = {}
            for key, call in (("uuid", "nvmlDeviceGetUUID"), ("name", "nvmlDeviceGetName")):
                try:
                    identity[key] = getattr(nv, call)(handle)
                except nv.NVMLError as exc:
                    errors.append(Row("error", index=index, code=exc.value, message=f"{call}: {exc}", **identity))
                    break
            else:
                values = self._metrics(handle, index, identity, errors)
                samples.append(Row("sample", index=index, **identity, **values))
        return errors + samples

    def _metrics(self, handle, index: int, identity: dict, errors: list[Row]) -> dict[str, float | None]:
        nv = self._nvml
        reads = (
            (("utilization_gpu_pct",), "nvmlDeviceGetUtilizationRates", (), lambda u: (float(u.gpu),)),
            (("memory_used_mib", "memory_total_mib"), "nvmlDeviceGetMemoryInfo", (),
             lambda m: (float(m.used // MIB), float(m.total // MIB))),
            (("power_draw_w",), "nvmlDeviceGetPowerUsage", (), lambda milliwatts: (milliwatts / 1000,)),
            (("temperature_gpu_c",), "nvmlDeviceGetTemperature", (nv.NVML_TEMPERATURE_GPU,), lambda c: (float(c),)),
        )
        values: dict[str, float | None] = {}
        for names, call, extra, convert in reads:
            try:
                values.update(zip(names, convert(getattr(nv, call)(handle, *extra))))
            except nv.NVMLError as exc:
                values.update(dict.fromkeys(names))
                if exc.value != nv.NVML_ERROR_NOT_SUPPORTED:
                    errors.append(Row("error", index=index, code=exc.value, message=f"{call}: {exc}", **identity))
        return values

    def close(self) -> None:
        if self._ready:
            self._ready = False
            try:
                self._nvml.nvmlShutdown()
            except self._nvml.NVMLError:
                pass


def _import_pynvml():
    import pynvml

    return pynvml


def open_sampler(backend: str = "auto", smi_timeout: float = 10.0) -> Sampler:
    """Choose a backend (see the module docstring); ``smi_timeout`` is in seconds.

    Raises ValueError for an unknown ``backend`` or a non-positive timeout, and ImportError
    (naming the extra to install) for ``backend="nvml"`` without nvidia-ml-py. With ``"nvml"``
    an ``nvmlInit`` failure is not raised: it becomes an error row on each tick until NVML works.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; accepted: {', '.join(BACKENDS)}")
    _check_positive("smi_timeout", smi_timeout)
    if backend == "smi":
        return SmiSampler(smi_timeout)
    try:
        nvml = _import_pynvml()
    except ImportError as exc:
        if backend == "nvml":
            raise ImportError("the nvml backend needs nvidia-ml-py: pip install 'ringlab[gpu]'") from exc
        return SmiSampler(smi_timeout, note="NVML unavailable: nvidia-ml-py is not installed")
    sampler = NvmlSampler(nvml)
    if backend == "auto":
        try:
            sampler.start()
        except nvml.NVMLError as exc:
            return SmiSampler(smi_timeout, note=f"NVML unavailable: nvmlInit failed: {exc}")
    return sampler


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


class GpumonLog:
    """Append-only CSV log with the :data:`HEADER` schema; use as a context manager.

    Raises ValueError when ``path`` holds a file whose first line is not this header (the file
    is left untouched), OSError when it cannot be opened. A last line cut short by a crash is
    ended with a newline before appending, so it stays a (short, skipped by :func:`read_log`)
    row of its own instead of merging with the next one.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._file = open(self.path, "a+b")
        try:
            self._prepare()
        except BaseException:
            self._file.close()
            raise

    def _prepare(self) -> None:
        f = self._file
        f.seek(0)
        first = f.readline()
        expected = ",".join(HEADER)
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
        self._file.write(text.encode("utf-8"))
        self._file.flush()
        os.fsync(self._file.fileno())

    def write(self, rows: Iterable[Row]) -> None:
        """Append ``rows`` in one write, then flush and fsync."""
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
    (a line cut short by a crash) is skipped with a warning. An empty file gives ``[]``.
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            return []
        if tuple(header) != HEADER:
            raise ValueError(f"{path}: header {header} is not the gpumon header {list(HEADER)}")
        rows = []
        for record in reader:
            if len(record) != len(HEADER):
                warnings.warn(f"{path}:{reader.line_num}: skipped a row of {len(record)} cells, expected {len(HEADER)}")
                continue
            rows.append(Row.from_record(dict(zip(HEADER, record))))
    return rows


def _check_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={value!r}; accepted: a finite number of seconds > 0")


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
) -> int:
    """Sample every ``interval`` seconds into ``log``; return the number of ticks written.

    Stops after ``count`` ticks, or before the first tick due ``duration`` seconds or more after
    the first one, or when ``stop`` is set (the tick in progress is finished and written first);
    with neither ``count`` nor ``duration`` it runs until ``stop``. Ticks are due at
    ``start + k * interval`` on ``clock`` (seconds); a tick that overruns makes the next one start
    at once, without catching up on the missed ones. ``sleep(seconds)`` defaults to
    ``stop.wait`` so that setting ``stop`` (e.g. from a signal handler) cuts a wait short;
    ``utcnow()`` must return an aware datetime. Tests pass a fake clock, sleep and utcnow.
    Raises ValueError for a non-positive interval or duration, a count < 1, or both count and duration.
    """
    _check_positive("interval", interval)
    if count is not None and duration is not None:
        raise ValueError("give count or duration, not both")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise ValueError(f"count={count!r}; accepted: an integer >= 1")
    if duration is not None:
        _check_positive("duration", duration)
    stop = stop or threading.Event()
    sleep = sleep or stop.wait
    tracker = PresenceTracker()
    start = due = clock()
    ticks = 0
    while not stop.is_set():
        now = utcnow()
        if now.tzinfo is None:
            raise ValueError("utcnow() returned a naive datetime; it must carry a timezone")
        stamp = now.astimezone(timezone.utc).isoformat(timespec="milliseconds")
        rows = tracker.update(sampler.sample())
        log.write(replace(row, timestamp=stamp, source=sampler.source) for row in rows)
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
