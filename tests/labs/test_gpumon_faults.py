"""GPU monitor under faults: hung and garbage NVML, signals, a full disk, I/O errors, a log deleted or
rotated under it, oversized driver output, placeholders with reasons. Every case checks that the
rows written before the fault are all there, whole."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from ringlab.commands import gpumon as gpumon_cli
from ringlab.labs import gpumon
from ringlab.labs.gpumon import CELL_MAX, HEADER, GpumonLog, LogWriteError, Row, SmiSampler, read_log

from test_gpumon import (  # noqa: F401 - clock and nvml are fixtures
    GPU0, GPU1, H100, UUID0, UUID1, cells, clock, event, nvml, nvml_device, record, s0, s1, sample,
)

REPO = Path(__file__).resolve().parents[2]


def tick_rows(n: int) -> list[Row]:
    return [Row("sample", index=i, uuid=f"GPU-{i}", name=H100, utilization_gpu_pct=float(i), timestamp=f"t{n}",
                source="smi") for i in range(4)]


# --- NVML: blocking calls, garbage, lost GPUs -------------------------------------------------------------

class Blocking:
    """Wraps a fake NVML call so that it blocks until ``release`` is set (a wedged driver)."""

    def __init__(self):
        self.release = threading.Event()
        self.entered = 0

    def __call__(self, *args):
        self.entered += 1
        self.release.wait(30)
        raise AssertionError("released only at teardown")


@pytest.fixture
def blocking():
    b = Blocking()
    yield b
    b.release.set()


def test_a_blocking_nvml_call_is_abandoned_at_its_deadline_and_nvml_reinitialised(tmp_path, nvml, clock, blocking):
    module = nvml([{"devices": [nvml_device(UUID0)]}])
    module.nvmlDeviceGetPowerUsage = blocking
    sampler = gpumon.open_sampler("nvml", nvml_timeout=0.2)
    started = time.monotonic()
    got = record(tmp_path / "log.csv", sampler, clock, count=2)
    assert time.monotonic() - started < 120  # two 0.2 s deadlines, not a hang (generous: a busy machine)
    assert blocking.entered == 2
    message = "NVML: no answer within 0.2 s; the call was abandoned; NVML is initialised again next tick"
    assert got[1:] == [event(0, "error", "nvml", message=message)]  # tick 1 repeats it: written once
    # Tick 1 started NVML afresh (no nvmlShutdown queued behind the blocked call).
    assert [c for c in module.log if c in ("nvmlInit", "nvmlShutdown")] == ["nvmlInit", "nvmlInit"]


def test_nvml_stops_calling_while_earlier_calls_are_still_blocked(nvml, blocking):
    module = nvml([{"devices": [nvml_device(UUID0)]}])
    module.nvmlDeviceGetCount = blocking
    caller = gpumon.DeadlineCaller(0.05, max_stuck=2)
    for _ in range(2):
        with pytest.raises(gpumon.NvmlTimeout, match="no answer within 0.05 s"):
            caller.call(module.nvmlDeviceGetCount)
    with pytest.raises(gpumon.NvmlTimeout, match="2 earlier NVML calls are still blocked"):
        caller.call(module.nvmlDeviceGetCount)
    assert blocking.entered == 2  # refused without calling: a third call would have entered
    blocking.release.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the abandoned workers finish once the driver answers
        try:
            assert caller.call(len, [1, 2]) == 2
            break
        except gpumon.NvmlTimeout:
            time.sleep(0.01)
    else:
        pytest.fail("the caller never recovered after the blocked calls returned")


def test_garbage_from_the_bindings_is_an_error_row_not_a_crash(tmp_path, nvml, clock):
    module = nvml([{"devices": [nvml_device(UUID0, power_mw="12 W")]}])
    module.nvmlDeviceGetTemperature = lambda handle, sensor: object()
    got = record(tmp_path / "log.csv", gpumon.open_sampler("nvml"), clock, count=1)
    assert [row[1] for row in got[1:]] == ["error", "error", "sample"]
    assert "nvmlDeviceGetPowerUsage: unreadable answer" in got[1][-1]
    assert got[3][HEADER.index("power_draw_w")] == "" and got[3][HEADER.index("temperature_gpu_c")] == ""


def test_a_lost_gpu_makes_nvml_start_again(tmp_path, nvml, clock):
    both = {"devices": [nvml_device(UUID0), nvml_device(UUID1)]}
    lost = {"devices": [nvml_device(UUID0), nvml_device(UUID1, nvmlDeviceGetUUID=15)]}
    module = nvml([both, lost, both])
    record(tmp_path / "log.csv", gpumon.open_sampler("nvml"), clock, count=3)
    assert [c for c in module.log if c in ("nvmlInit", "nvmlShutdown")] == ["nvmlInit", "nvmlShutdown", "nvmlInit"]


# --- placeholders and repeats ----------------------------------------------------------------------------

def test_placeholder_reason_logged_once_per_gpu_field_reason_and_again_when_it_changes(tmp_path, fake_smi, clock):
    denied = f"0, {UUID0}, {H100}, 97, 61873, 81559, [Insufficient Permissions], 58\n"
    reset = f"0, {UUID0}, {H100}, 97, 61873, 81559, [GPU requires reset], 58\n"
    fake_smi.play({"stdout": denied + GPU1}, {"stdout": denied + GPU1}, {"stdout": reset + GPU1},
                  {"stdout": GPU0 + GPU1}, {"stdout": denied + GPU1})
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=5)
    no_power = lambda k: sample(k, "smi", 0, UUID0, H100, "97", "61873", "81559", "", "58")  # noqa: E731
    assert got[1:] == [
        event(0, "error", "smi", 0, UUID0, H100, message="power.draw: [Insufficient Permissions]"), no_power(0), s1(0),
        no_power(1), s1(1),
        event(2, "error", "smi", 0, UUID0, H100, message="power.draw: [GPU requires reset]"), no_power(2), s1(2),
        s0(3), s1(3),
        event(4, "error", "smi", 0, UUID0, H100, message="power.draw: [Insufficient Permissions]"), no_power(4), s1(4),
    ]


# --- oversized and hostile driver output ------------------------------------------------------------------

def test_a_5_mb_garbage_line_is_truncated_and_the_log_stays_readable(tmp_path, fake_smi, clock):
    garbage = "\x00\x1b[31m" + "#" * (5 * 2**20) + "\r"
    fake_smi.play({"stdout": GPU0}, {"stdout": GPU0 + garbage + "\n", "rc": 1}, {"stdout": GPU0})
    path = tmp_path / "log.csv"
    got = record(path, SmiSampler(), clock, count=3)
    message = got[2][-1]
    assert len(message) == CELL_MAX and message.endswith(f"...[{len(garbage) - 1:,} chars, truncated]")
    assert "\x00" not in message and "\x1b" not in message
    assert path.stat().st_size < 10_000
    assert [r.kind for r in read_log(path)] == ["sample", "error", "sample", "sample"]


def test_read_log_skips_one_unreadable_line_and_keeps_the_rest(tmp_path):
    path = tmp_path / "log.csv"
    with GpumonLog(path) as log:
        log.write(tick_rows(0))
    with open(path, "a") as f:  # something else appended an oversized cell and a bad number
        f.write('t1,error,smi,,,,,,,,,,"' + "x" * 200_000 + '"\n')
        f.write("t1,sample,smi,0,GPU-0,n,lots,,,,,,\n")
    with GpumonLog(path) as log:
        log.write(tick_rows(2))
    with pytest.warns(UserWarning) as warned:
        rows = read_log(path)
    assert [r.timestamp for r in rows] == ["t0"] * 4 + ["t2"] * 4
    assert len(warned) == 2


# --- the disk: full, failing, the file deleted or rotated -------------------------------------------------

@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs where the machine allows mounting one (root in a container), else skip."""
    where = tmp_path / "tiny"
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _whole_ticks(path: Path, rows_per_tick: int) -> list[str]:
    rows = read_log(path)
    stamps = [r.timestamp for r in rows]
    assert len(rows) % rows_per_tick == 0
    assert all(stamps[i] == stamps[i - i % rows_per_tick] for i in range(len(stamps)))
    return sorted(set(stamps), key=stamps.index)


def test_full_disk_on_a_real_tmpfs_ends_with_whole_ticks(tiny_tmpfs):
    path = tiny_tmpfs / "log.csv"
    written = 0
    with GpumonLog(path) as log, pytest.raises(LogWriteError) as failed:
        for n in range(10_000):
            log.write(tick_rows(n))
            written += 1
    assert failed.value.errno == errno.ENOSPC and "No space left" in str(failed.value)
    assert path.read_bytes().endswith(b"\n")
    assert _whole_ticks(path, 4) == [f"t{n}" for n in range(written)]  # every tick before the failure, whole
    assert written > 10


@pytest.mark.parametrize("code, when", [(errno.ENOSPC, "write"), (errno.EIO, "write"), (errno.EIO, "fsync")])
def test_injected_write_errors_leave_no_torn_row(tmp_path, monkeypatch, code, when):
    path = tmp_path / "log.csv"
    real_write, real_fsync = os.write, os.fsync
    budget = {"bytes": 1500}

    def write(fd, data):  # writes part of the tick, then fails, as a filling disk does
        if fd == log._file.fileno() and when == "write":
            if budget["bytes"] <= 0:
                raise OSError(code, os.strerror(code))
            n = min(len(data), budget["bytes"])
            budget["bytes"] -= n
            return real_write(fd, bytes(data[:n]))
        return real_write(fd, data)

    def fsync(fd):
        if when == "fsync" and fd == log._file.fileno():
            if budget["bytes"] <= 0:
                raise OSError(code, os.strerror(code))
            budget["bytes"] -= 600
        return real_fsync(fd)

    log = GpumonLog(path)
    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    written = 0
    with log, pytest.raises(LogWriteError) as failed:
        for n in range(100):
            log.write(tick_rows(n))
            written += 1
    monkeypatch.undo()
    assert failed.value.errno == code
    assert _whole_ticks(path, 4) == [f"t{n}" for n in range(written)] and written >= 1


def test_cli_on_a_full_disk_says_so_and_exits_1_with_the_log_intact(tiny_tmpfs, fake_smi, capsys):
    fake_smi.play({"stdout": GPU0 + GPU1})
    (tiny_tmpfs / "filler").write_bytes(b"\0" * 14 * 4096)  # leave two 4 KiB pages: a few dozen ticks
    path = tiny_tmpfs / "log.csv"
    rc = gpumon_cli.main(["--out", str(path), "--backend", "smi", "--interval", "1ms", "--count", "100000"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "No space left on device" in err and "Traceback" not in err
    ticks = int(err.split("stopped after ")[1].split()[0])
    assert len(_whole_ticks(path, 2)) == ticks > 3


def test_a_deleted_log_is_noticed_and_started_again(tmp_path):
    path = tmp_path / "log.csv"
    notices = []
    with GpumonLog(path, on_notice=notices.append) as log:
        log.write(tick_rows(0))
        path.unlink()
        log.write(tick_rows(1))
        os.rename(path, tmp_path / "log.csv.1")  # logrotate's move, then its "create"
        path.touch()
        log.write(tick_rows(2))
    assert [n.split(" while")[0] for n in notices] == ["gpumon: the log file was deleted",
                                                       "gpumon: the log file was replaced (rotated?)"]
    got = cells(path)
    assert got[0] == list(HEADER) and got[1][1] == "error" and "replaced (rotated?)" in got[1][-1]
    assert [r.timestamp for r in read_log(path)] == ["t2"] * 5
    assert [r.timestamp for r in read_log(tmp_path / "log.csv.1")] == ["t1"] * 5


# --- signals in every mode ------------------------------------------------------------------------------

HANGING_PYNVML = textwrap.dedent('''
    """A pynvml whose device count never returns: a driver wedged in the kernel."""
    import time

    class NVMLError(Exception):
        value = 999

    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_TEMPERATURE_GPU = 0

    def nvmlInit():
        pass

    def nvmlShutdown():
        pass

    def nvmlDeviceGetCount():
        open("entered", "w").close()  # the test waits for this, not for a guessed delay
        time.sleep(3600)
''')


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_monitor_while_nvml_is_blocked(tmp_path, signum):
    (tmp_path / "pynvml.py").write_text(HANGING_PYNVML)
    path = tmp_path / "log.csv"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    proc = subprocess.Popen([sys.executable, "-m", "ringlab", "gpumon", "--backend", "nvml", "--nvml-timeout", "600",
                             "--interval", "1", "--out", str(path)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "entered").exists() and time.monotonic() < deadline:  # inside nvmlDeviceGetCount
            time.sleep(0.02)
        sent = time.monotonic()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=15)
        stopped_after = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert stopped_after < gpumon.STOP_GRACE + 60  # the grace, not the 600 s NVML deadline
    assert "Traceback" not in err and "1 ticks appended" in err
    assert [(r.kind, r.message) for r in read_log(path)] == [("error", "NVML: stopped while waiting for a call")]
