"""Where the GPU monitor's rows come from: the NVML and nvidia-smi backends, each call under a deadline.

:func:`open_sampler` picks one (``auto`` | ``nvml`` | ``smi``, see :mod:`ringlab.labs.gpumon`); a
sampler's ``sample()`` returns one tick's ``sample`` and ``error`` rows, without timestamps.
"""

from __future__ import annotations

import math
import os
import queue
import signal
import subprocess
import threading
import time
from typing import Protocol

from .rows import SMI_FIELDS, Row, parse_smi_csv

BACKENDS = ("auto", "nvml", "smi")
MIB = 2**20
STOP_GRACE = 2.0  # seconds a call in progress may still take once the monitor is told to stop
MAX_SECONDS = 366 * 86400.0  # intervals, durations and timeouts: a year at most


def check_seconds(name: str, value: float) -> None:
    """ValueError naming ``name`` unless ``value`` is a finite number of seconds > 0, at most :data:`MAX_SECONDS`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0 \
            or value > MAX_SECONDS:
        raise ValueError(f"{name}={value!r}; accepted: a finite number of seconds > 0, at most {MAX_SECONDS:g}")


class Sampler(Protocol):
    """What :func:`ringlab.labs.gpumon.run` needs from a backend."""

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
        check_seconds("smi_timeout", timeout)
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
        check_seconds("nvml_timeout", timeout)
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
    check_seconds("smi_timeout", smi_timeout)
    check_seconds("nvml_timeout", nvml_timeout)
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
