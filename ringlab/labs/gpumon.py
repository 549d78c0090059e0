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

Repeats are not logged: an ``error`` row identical to one of the previous tick (same GPU, code and
message) is left out until the error goes away and comes back. A metric that nvidia-smi replaces
by a failure placeholder (``[Insufficient Permissions]``, ``[Unknown Error]``, ``[GPU requires
reset]``, ``ERR!``; not the plain "not available" ``[N/A]`` / ``[Not Supported]``) is left empty and
its reason written once as an ``error`` row, ``message`` ``"<field>: <placeholder>"``, then again only
when the reason changes.

Faults: every NVML call runs in a worker thread with a deadline (``nvml_timeout``); a call that
does not return in time is abandoned (the thread is left to finish on its own), written as an
``error`` row, ends the tick, and NVML is shut down and initialised again on the next tick, as it
also is after a GPU is lost. A cell longer than :data:`CELL_MAX` characters (a garbage line from a
broken driver) is cut and ends with ``...[N chars, truncated]``; control characters become spaces.

Durability: the log is opened for appending; the header is written only to an empty file, and a
file whose first line is another header is refused (``ValueError``). Each tick is written with
``write`` calls followed by ``os.fsync``, so a crash loses at most the tick in progress. When a
write or fsync fails (disk full, I/O error) the partial tick is cut off again, so the file ends
with the last whole tick, and :class:`LogWriteError` is raised. Before each tick the log checks
that its path still names the file it has open; if the file was deleted or renamed (rotated), it
starts a new file at the path, whose first row after the header says so.
"""

from __future__ import annotations

import csv
import io
import math
import os
import queue
import re
import signal
import stat
import subprocess
import threading
import time
import warnings
from dataclasses import dataclass, field, fields, replace
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
_NOT_AVAILABLE = re.compile(r"\[?(?:n/?a|not supported)\]?|-?", re.IGNORECASE)  # "no such counter", not a failure
CELL_MAX = 1000  # characters per cell; nothing the driver legitimately prints is longer
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
STOP_GRACE = 2.0  # seconds a call in progress may still take once the monitor is told to stop
MAX_SECONDS = 366 * 86400.0  # intervals, durations and timeouts: a year at most


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
    # (field, placeholder) for each metric the driver replaced by a failure placeholder; not a column
    notes: tuple[tuple[str, str], ...] = field(default=(), compare=False)

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
            if f.name not in HEADER:
                continue
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
    text = _CONTROL.sub(" ", str(value))
    if len(text) > CELL_MAX:
        mark = f"...[{len(text):,} chars, truncated]"
        text = text[:CELL_MAX - len(mark)] + mark
    return text


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
        values = {name: parse_value(value, unit) for name, value, unit in zip(METRICS, metrics, _METRIC_UNITS)}
        notes = tuple((smi_field, text) for smi_field, name, text in zip(SMI_FIELDS[3:], METRICS, metrics)
                      if values[name] is None and not _NOT_AVAILABLE.fullmatch(text))
        rows.append(Row(
            "sample",
            index=int(parts[0]),
            uuid=_text(parts[1]),
            name=_text(", ".join(parts[2:-len(METRICS)])),
            notes=notes,
            **values,
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
        self.stop: threading.Event | None = None  # set by run(): cuts a wait for nvidia-smi short

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
        deadline, stopping = time.monotonic() + self.timeout, False
        while True:  # wait in short slices: a stop request gives the call STOP_GRACE more seconds, no more
            try:
                out, err = proc.communicate(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
                break
            except subprocess.TimeoutExpired:
                if not stopping and self.stop is not None and self.stop.is_set():
                    stopping, deadline = True, min(deadline, time.monotonic() + STOP_GRACE)
                if time.monotonic() >= deadline:
                    _kill_session(proc)
                    if stopping:
                        return [self._error(None, f"stopped while waiting for {self.executable}, which was killed")]
                    return [self._error(None, f"{self.executable} gave no answer within {self.timeout:g} s "
                                              "and was killed")]
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


class NvmlTimeout(Exception):
    """An NVML call gave no answer within its deadline and was abandoned in its worker thread."""


class _Stopped(Exception):
    """The monitor was told to stop while waiting for an NVML call."""


class DeadlineCaller:
    """Runs calls in a worker thread and waits at most ``timeout`` seconds for each.

    A call that overruns is abandoned: its worker is left blocked (a daemon thread; it exits when
    the call returns) and the next call starts a fresh worker. While ``max_stuck`` abandoned workers
    are still blocked, no further call is made (the library is evidently wedged); :class:`NvmlTimeout`
    says so at once. Once ``stop`` (an Event) is set, a call gets at most :data:`STOP_GRACE` more
    seconds before it is abandoned with ``_Stopped``.
    """

    def __init__(self, timeout: float, stop: threading.Event | None = None, max_stuck: int = 4):
        _check_positive("nvml_timeout", timeout)
        self.timeout, self.stop, self.max_stuck = timeout, stop, max_stuck
        self._jobs: queue.Queue | None = None
        self._stuck: list[threading.Thread] = []

    @staticmethod
    def _serve(jobs: queue.Queue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, args, box, done = job
            try:
                box["value"] = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, which decides
                box["error"] = exc
            done.set()

    def call(self, fn, *args):
        """``fn(*args)``, or NvmlTimeout after ``timeout`` s, or _Stopped when ``stop`` is set first."""
        self._stuck = [t for t in self._stuck if t.is_alive()]
        if len(self._stuck) >= self.max_stuck:
            raise NvmlTimeout(f"{len(self._stuck)} earlier NVML calls are still blocked; not calling again "
                              "until one returns")
        if self._jobs is None:
            self._jobs = queue.Queue()
            worker = threading.Thread(target=self._serve, args=(self._jobs,), daemon=True, name="gpumon-nvml")
            worker.start()
            self._worker = worker
        box: dict = {}
        done = threading.Event()
        self._jobs.put((fn, args, box, done))
        deadline, stopped = time.monotonic() + self.timeout, False
        while not done.wait(max(0.0, min(0.05, deadline - time.monotonic()))):
            if not stopped and self.stop is not None and self.stop.is_set():
                stopped, deadline = True, min(deadline, time.monotonic() + STOP_GRACE)
            if time.monotonic() >= deadline:
                self._jobs.put(None)  # the worker exits once the blocked call returns
                self._stuck.append(self._worker)
                self._jobs = None
                if stopped:
                    raise _Stopped()
                raise NvmlTimeout(f"no answer within {self.timeout:g} s; the call was abandoned")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def close(self) -> None:
        """Let the current worker exit; a later :meth:`call` starts a new one."""
        if self._jobs is not None:
            self._jobs.put(None)
            self._jobs = None


NVML_ERROR_GPU_IS_LOST = 15  # nvmlReturn_t values (NVML API reference)


class NvmlSampler:
    """Backend on the NVML bindings module ``nvml`` (``pynvml`` or a stand-in with the same names).

    ``nvmlInit`` is retried on every tick until it succeeds, and again after a failure to count
    devices (the driver may have been reloaded), after a GPU is lost or a device call fails to
    give a handle, and after a call overran ``timeout`` seconds (see :class:`DeadlineCaller`),
    so a monitor started before the driver, or across a GPU reset, keeps going.
    """

    source = "nvml"

    def __init__(self, nvml, timeout: float = 10.0):
        self._nvml = nvml
        self._ready = False
        self._reinit = False
        self.stop: threading.Event | None = None  # set by run()
        self._caller = DeadlineCaller(timeout)

    def describe(self) -> str:
        return f"NVML (nvidia-ml-py, {self._caller.timeout:g} s per call)"

    def _call(self, name: str, *args):
        self._caller.stop = self.stop
        return self._caller.call(getattr(self._nvml, name), *args)

    def start(self) -> None:
        """Initialise NVML now; raises ``nvml.NVMLError`` when it cannot, NvmlTimeout when it hangs."""
        self._call("nvmlInit")
        self._ready = True

    def sample(self) -> list[Row]:
        errors: list[Row] = []
        samples: list[Row] = []
        try:
            self._sample(errors, samples)
        except NvmlTimeout as exc:
            errors.append(Row("error", message=f"NVML: {exc}; NVML is initialised again next tick"))
            self._ready, self._reinit = False, False  # no nvmlShutdown: it would queue behind the blocked call
        except _Stopped:
            errors.append(Row("error", message="NVML: stopped while waiting for a call"))
        return errors + samples

    def _sample(self, errors: list[Row], samples: list[Row]) -> None:
        nv = self._nvml
        if self._reinit:
            self.close()
            self._reinit = False
        try:
            if not self._ready:
                self.start()
            count = self._call("nvmlDeviceGetCount")
        except nv.NVMLError as exc:
            self.close()
            errors.append(Row("error", code=exc.value, message=f"NVML: {exc}"))
            return
        for index in range(count):
            try:
                handle = self._call("nvmlDeviceGetHandleByIndex", index)
            except nv.NVMLError as exc:
                errors.append(Row("error", index=index, code=exc.value, message=f"nvmlDeviceGetHandleByIndex: {exc}"))
                self._reinit = True
                continue
            identity = {}
            for key, call in (("uuid", "nvmlDeviceGetUUID"), ("name", "nvmlDeviceGetName")):
                try:
                    identity[key] = self._call(call, handle)
                except nv.NVMLError as exc:
                    errors.append(Row("error", index=index, code=exc.value, message=f"{call}: {exc}", **identity))
                    self._reinit = self._reinit or exc.value == NVML_ERROR_GPU_IS_LOST
                    break
            else:
                values = self._metrics(handle, index, identity, errors)
                samples.append(Row("sample", index=index, **identity, **values))

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
                values.update(zip(names, convert(self._call(call, handle, *extra))))
            except nv.NVMLError as exc:
                values.update(dict.fromkeys(names))
                if exc.value != nv.NVML_ERROR_NOT_SUPPORTED:
                    errors.append(Row("error", index=index, code=exc.value, message=f"{call}: {exc}", **identity))
                    self._reinit = self._reinit or exc.value == NVML_ERROR_GPU_IS_LOST
            except (TypeError, ValueError, AttributeError, ArithmeticError) as exc:  # garbage from the bindings
                values.update(dict.fromkeys(names))
                errors.append(Row("error", index=index, message=f"{call}: unreadable answer: {exc}", **identity))
        return values

    def close(self) -> None:
        """Shut NVML down (if it was initialised) and let the worker thread go; the next call starts afresh."""
        if self._ready:
            self._ready = False
            try:
                self._call("nvmlShutdown")
            except (self._nvml.NVMLError, NvmlTimeout, _Stopped):
                pass
        self._caller.close()


def _import_pynvml():
    import pynvml

    return pynvml


def open_sampler(backend: str = "auto", smi_timeout: float = 10.0, nvml_timeout: float = 10.0) -> Sampler:
    """Choose a backend (see the module docstring); ``smi_timeout`` and ``nvml_timeout`` (per NVML call) in seconds.

    Raises ValueError for an unknown ``backend`` or a non-positive timeout, and ImportError
    (naming the extra to install) for ``backend="nvml"`` without nvidia-ml-py. With ``"nvml"``
    an ``nvmlInit`` failure is not raised: it becomes an error row on each tick until NVML works.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; accepted: {', '.join(BACKENDS)}")
    _check_positive("smi_timeout", smi_timeout)
    _check_positive("nvml_timeout", nvml_timeout)
    if backend == "smi":
        return SmiSampler(smi_timeout)
    try:
        nvml = _import_pynvml()
    except ImportError as exc:
        if backend == "nvml":
            raise ImportError("the nvml backend needs nvidia-ml-py: pip install 'ringlab[gpu]'") from exc
        return SmiSampler(smi_timeout, note="NVML unavailable: nvidia-ml-py is not installed")
    sampler = NvmlSampler(nvml, nvml_timeout)
    if backend == "auto":
        try:
            sampler.start()
        except (nvml.NVMLError, NvmlTimeout) as exc:
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


def _check_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0 \
            or value > MAX_SECONDS:
        raise ValueError(f"{name}={value!r}; accepted: a finite number of seconds > 0, at most {MAX_SECONDS:g}")


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
    _check_positive("interval", interval)
    if count is not None and duration is not None:
        raise ValueError("give count or duration, not both")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise ValueError(f"count={count!r}; accepted: an integer >= 1")
    if duration is not None:
        _check_positive("duration", duration)
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
