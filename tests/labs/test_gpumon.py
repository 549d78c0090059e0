"""GPU monitor: every fake-driver case gives the documented CSV rows, and the log is never lost."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.commands import gpumon as gpumon_cli
from ringlab.labs import gpumon
from ringlab.labs.gpumon import HEADER, GpumonLog, Row, SmiSampler, parse_smi_csv, read_log

REPO = Path(__file__).resolve().parents[2]
START = datetime(2025, 3, 14, 9, 0, 0, tzinfo=timezone.utc)
QUERY = ["--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu",
         "--format=csv,noheader,nounits"]

H100 = "NVIDIA H100 80GB HBM3"
UUID0 = "GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f"
UUID1 = "GPU-b41d7e20-9c8f-4a6b-b5e4-3f2a1d0c9b8a"
GPU0 = f"0, {UUID0}, {H100}, 97, 61873, 81559, 652.31, 58\n"
GPU1 = f"1, {UUID1}, {H100}, 99, 61871, 81559, 640.80, 56\n"


class FakeClock:
    """Monotonic seconds from 0; ``sleep`` advances them (and calls ``on_sleep`` hooks); ``utcnow`` = START + t."""

    def __init__(self):
        self.t = 0.0
        self.sleeps: list[float] = []
        self.on_sleep: list = []

    def monotonic(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds
        for hook in self.on_sleep:
            hook()

    def utcnow(self) -> datetime:
        return START + timedelta(seconds=self.t)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def stamp(k: int, interval: float = 5.0) -> str:
    return (START + timedelta(seconds=k * interval)).isoformat(timespec="milliseconds")


def sample(k, source, index, uuid, name, util, used, total, power, temp):
    return [stamp(k), "sample", source, str(index), uuid, name, util, used, total, power, temp, "", ""]


def event(k, kind, source, index="", uuid="", name="", code="", message=""):
    return [stamp(k), kind, source, str(index), uuid, name, "", "", "", "", "", str(code), message]


def s0(k):
    return sample(k, "smi", 0, UUID0, H100, "97", "61873", "81559", "652.31", "58")


def s1(k):
    return sample(k, "smi", 1, UUID1, H100, "99", "61871", "81559", "640.8", "56")


def cells(path: Path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def record(path: Path, sampler, clock, count: int, interval: float = 5.0, dedup: bool = True) -> list[list[str]]:
    """Run the monitor for ``count`` ticks on the fake clock; return the log's cells, header first."""
    with GpumonLog(path) as log:
        ticks = gpumon.run(sampler, log, interval=interval, count=count,
                           clock=clock.monotonic, sleep=clock.sleep, utcnow=clock.utcnow, dedup=dedup)
    assert ticks == count
    return cells(path)


# --- nvidia-smi backend, one case per driver behaviour -------------------------------------------------

def test_unified_memory_gpu_placeholders_are_empty_never_zero(tmp_path, fake_smi, clock):
    gb10 = "GPU-3e5a0c1b-7d2f-4e9a-a6b8-5c4d3e2f1a0b"
    fake_smi.play({"stdout": f"0, {gb10}, NVIDIA GB10, 3 %, [N/A], [N/A], [Not Supported], 41\n"})
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=1)
    assert got == [list(HEADER), sample(0, "smi", 0, gb10, "NVIDIA GB10", "3", "", "", "", "41")]
    assert fake_smi.calls()[0]["argv"] == QUERY


def test_device_handle_error_with_nonzero_exit(tmp_path, fake_smi, clock):
    handle_error = "Unable to determine the device handle for GPU 0000:XX:00.0: Unknown Error"
    fake_smi.play({"stdout": GPU0 + GPU1}, {"stdout": GPU0 + handle_error + "\n", "rc": 255})
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=2)
    assert got[1:] == [
        s0(0), s1(0),
        event(1, "error", "smi", code=255, message=handle_error), s0(1),
        event(1, "lost", "smi", 1, UUID1, H100),
    ]


def test_driver_unreachable_exit_9_keeps_sampling(tmp_path, fake_smi, clock):
    failed = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.")
    fake_smi.play({"stdout": GPU0}, {"stdout": failed + "\n", "rc": 9}, {"stdout": failed + "\n", "rc": 9},
                  {"stdout": GPU0})
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=4)
    assert got[1:] == [  # the same error on the next tick is not written again
        s0(0),
        event(1, "error", "smi", code=9, message=failed), event(1, "lost", "smi", 0, UUID0, H100),
        event(3, "back", "smi", 0, UUID0, H100), s0(3),
    ]


def test_no_devices_found_exit_6(tmp_path, fake_smi, clock):
    fake_smi.play({"stdout": "No devices were found\n", "rc": 6})
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=2, dedup=False)
    assert got[1:] == [event(k, "error", "smi", code=6, message="No devices were found") for k in (0, 1)]


def test_a_repeated_error_is_written_once_and_again_after_it_cleared(tmp_path, fake_smi, clock):
    gone = {"stdout": "No devices were found\n", "rc": 6}
    fake_smi.play(gone, gone, gone, {"stdout": GPU0}, gone, {"rc": 9}, gone)
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=7)
    assert got[1:] == [
        event(0, "error", "smi", code=6, message="No devices were found"),
        s0(3),
        event(4, "error", "smi", code=6, message="No devices were found"), event(4, "lost", "smi", 0, UUID0, H100),
        event(5, "error", "smi", code=9, message="nvidia-smi exited with status 9"),
        event(6, "error", "smi", code=6, message="No devices were found"),
    ]


def test_nonzero_exit_without_text_and_stderr_text(tmp_path, fake_smi, clock):
    fake_smi.play({"rc": 3}, {"stdout": GPU0, "stderr": "WARNING: infoROM is corrupted at gpu 0000:1B:00.0\n"})
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=2)
    assert got[1:] == [
        event(0, "error", "smi", code=3, message="nvidia-smi exited with status 3"),
        event(1, "error", "smi", code=0, message="WARNING: infoROM is corrupted at gpu 0000:1B:00.0"), s0(1),
    ]


def test_gpu_missing_for_two_samples_then_back(tmp_path, fake_smi, clock):
    fake_smi.play({"stdout": GPU0 + GPU1}, {"stdout": GPU0}, {"stdout": GPU0}, {"stdout": GPU0 + GPU1})
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=4)
    assert got[1:] == [
        s0(0), s1(0),
        s0(1), event(1, "lost", "smi", 1, UUID1, H100),
        s0(2),
        s0(3), event(3, "back", "smi", 1, UUID1, H100), s1(3),
    ]
    assert len(fake_smi.calls()) == 4


def test_smi_missing_writes_error_rows(tmp_path, monkeypatch, clock):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    got = record(tmp_path / "log.csv", SmiSampler(), clock, count=2)
    assert got[1:] == [event(0, "error", "smi", message="nvidia-smi not found on PATH")]  # once, not every tick


def test_auto_without_nvml_and_without_smi_says_why(tmp_path, monkeypatch, clock):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    sampler = gpumon.open_sampler("auto")
    assert isinstance(sampler, SmiSampler)
    got = record(tmp_path / "log.csv", sampler, clock, count=1)
    assert got[1:] == [event(0, "error", "smi", message="nvidia-smi not found on PATH "
                             "(NVML unavailable: nvidia-ml-py is not installed)")]


def test_hanging_smi_is_killed_and_sampling_goes_on(tmp_path, fake_smi, clock):
    fake_smi.play({"sleep": 60, "stdout": GPU0}, {"stdout": GPU0})
    got = record(tmp_path / "log.csv", SmiSampler(timeout=0.5), clock, count=2)
    assert got[1:] == [
        event(0, "error", "smi", message="nvidia-smi gave no answer within 0.5 s and was killed"),
        s0(1),
    ]
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left sleeping
        os.kill(fake_smi.calls()[0]["pid"], 0)


# --- NVML backend on a fake pynvml ------------------------------------------------------------------

MiB = 2**20


@pytest.fixture
def nvml(fake_nvml, clock):
    """``nvml(ticks)``: a fake pynvml that moves to its next tick whenever the monitor sleeps."""

    def install(ticks):
        module = fake_nvml(ticks)
        clock.on_sleep.append(module.advance)
        return module

    return install


def nvml_device(uuid, util=97, used=61873 * MiB + 123_456, total=81559 * MiB, power_mw=652_310, temp=58, **fail):
    return {"uuid": uuid, "name": H100, "util": util, "used": used, "total": total, "power_mw": power_mw,
            "temp": temp, "fail": fail}


def n0(k, power="652.31"):
    return sample(k, "nvml", 0, UUID0, H100, "97", "61873", "81559", power, "58")


def n1(k, power="652.31"):
    return sample(k, "nvml", 1, UUID1, H100, "97", "61873", "81559", power, "58")


def test_nvml_units_and_per_device_error(tmp_path, nvml, clock):
    nvml([
        {"devices": [nvml_device(UUID0), nvml_device(UUID1)]},
        {"devices": [nvml_device(UUID0), nvml_device(UUID1, nvmlDeviceGetPowerUsage=999)]},
    ])
    sampler = gpumon.open_sampler("auto")
    assert sampler.source == "nvml"
    got = record(tmp_path / "log.csv", sampler, clock, count=2)
    assert got[1:] == [
        n0(0), n1(0),
        event(1, "error", "nvml", 1, UUID1, H100, code=999, message="nvmlDeviceGetPowerUsage: Unknown Error"),
        n0(1), n1(1, power=""),
    ]


def test_nvml_unified_memory_not_supported_is_empty(tmp_path, nvml, clock):
    gb10 = {**nvml_device(UUID0, util=3, power_mw=11_080, temp=41, nvmlDeviceGetMemoryInfo=3), "name": "NVIDIA GB10"}
    nvml([{"devices": [gb10]}])
    got = record(tmp_path / "log.csv", gpumon.open_sampler("nvml"), clock, count=1)
    assert got[1:] == [sample(0, "nvml", 0, UUID0, "NVIDIA GB10", "3", "", "", "11.08", "41")]


def test_nvml_lost_gpu_then_back(tmp_path, nvml, clock):
    both = {"devices": [nvml_device(UUID0), nvml_device(UUID1)]}
    nvml([both, {"devices": [nvml_device(UUID0), nvml_device(UUID1, nvmlDeviceGetHandleByIndex=15)]}, both])
    got = record(tmp_path / "log.csv", gpumon.open_sampler("nvml"), clock, count=3)
    assert got[1:] == [
        n0(0), n1(0),
        event(1, "error", "nvml", 1, code=15, message="nvmlDeviceGetHandleByIndex: GPU is lost"),
        n0(1), event(1, "lost", "nvml", 1, UUID1, H100),
        n0(2), event(2, "back", "nvml", 1, UUID1, H100), n1(2),
    ]


def test_nvml_init_and_count_failures_are_retried(tmp_path, nvml, clock):
    one = [nvml_device(UUID0)]
    module = nvml([{"fail": {"nvmlInit": 9}, "devices": one}, {"devices": one},
                      {"fail": {"nvmlDeviceGetCount": 999}, "devices": one}, {"devices": one}])
    got = record(tmp_path / "log.csv", gpumon.open_sampler("nvml"), clock, count=4)
    assert got[1:] == [
        event(0, "error", "nvml", code=9, message="NVML: Driver Not Loaded"),
        n0(1),
        event(2, "error", "nvml", code=999, message="NVML: Unknown Error"), event(2, "lost", "nvml", 0, UUID0, H100),
        event(3, "back", "nvml", 0, UUID0, H100), n0(3),
    ]
    assert [call for call in module.log if call in ("nvmlInit", "nvmlShutdown")] == [
        "nvmlInit", "nvmlInit", "nvmlShutdown", "nvmlInit"]


def test_auto_falls_back_to_smi_when_nvml_init_fails(fake_nvml):
    fake_nvml([{"fail": {"nvmlInit": 9}, "devices": []}])
    sampler = gpumon.open_sampler("auto")
    assert isinstance(sampler, SmiSampler)
    assert sampler.note == "NVML unavailable: nvmlInit failed: Driver Not Loaded"


def test_nvml_backend_without_package(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(ImportError, match=r"ringlab\[gpu\]"):
        gpumon.open_sampler("nvml")
    assert gpumon_cli.main(["--out", str(tmp_path / "x.csv"), "--backend", "nvml", "--count", "1"]) == 2
    assert "pip install 'ringlab[gpu]'" in capsys.readouterr().err
    assert not (tmp_path / "x.csv").exists()


# --- the log file ---------------------------------------------------------------------------------------

def test_existing_log_is_appended_not_overwritten(tmp_path, fake_smi, clock):
    path = tmp_path / "log.csv"
    fake_smi.play({"stdout": GPU0})
    record(path, SmiSampler(), clock, count=2)
    first = path.read_bytes()
    clock.t = 60.0  # a minute after the first run started
    second = record(path, SmiSampler(), clock, count=1)
    assert path.read_bytes().startswith(first)
    assert second == [list(HEADER), s0(0), s0(1), s0(12)]  # one header, both runs' rows


def test_foreign_file_is_refused_and_left_alone(tmp_path, capsys):
    path = tmp_path / "notes.csv"
    path.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(ValueError, match="not the gpumon header"):
        GpumonLog(path)
    assert gpumon_cli.main(["--out", str(path), "--backend", "smi", "--count", "1"]) == 2
    assert "pass another --out" in capsys.readouterr().err
    assert path.read_text() == "a,b,c\n1,2,3\n"


def test_row_cut_short_by_a_crash_stays_apart(tmp_path, fake_smi, clock):
    path = tmp_path / "log.csv"
    path.write_text(",".join(HEADER) + "\n" + ",".join(s0(0)) + "\n" + stamp(1) + ",sample,smi,0,GPU-6f2c")
    fake_smi.play({"stdout": GPU0})
    record(path, SmiSampler(), clock, count=1)
    assert path.read_text().splitlines()[3] == ",".join(s0(0))
    with pytest.warns(UserWarning, match=r"log.csv:3: skipped a row of 5 cells"):
        rows = read_log(path)
    assert [row.to_record() for row in rows] == [s0(0), s0(0)]


def test_run_schedule_on_a_fake_clock(tmp_path, fake_smi, clock):
    fake_smi.play({"stdout": GPU0})
    with GpumonLog(tmp_path / "log.csv") as log:
        assert gpumon.run(SmiSampler(), log, interval=5, duration=10,
                          clock=clock.monotonic, sleep=clock.sleep, utcnow=clock.utcnow) == 2
    assert clock.sleeps == [5]

    class Slow:  # each tick takes 7 s of a 5 s interval
        source = "smi"

        def sample(self):
            clock.t += 7
            return []

    with GpumonLog(tmp_path / "slow.csv") as log:
        assert gpumon.run(Slow(), log, interval=5, count=3, clock=clock.monotonic, sleep=clock.sleep,
                          utcnow=clock.utcnow) == 3
    assert clock.sleeps == [5]  # overran every time: no sleeps, no catching up


@pytest.mark.parametrize("kwargs, match", [
    ({"interval": 0}, "interval=0"), ({"interval": float("nan")}, "interval=nan"),
    ({"interval": 1, "count": 0}, "count=0"), ({"interval": 1, "duration": -1}, "duration=-1"),
    ({"interval": 1, "count": 1, "duration": 1}, "not both"),
])
def test_run_rejects_bad_arguments(tmp_path, kwargs, match):
    with GpumonLog(tmp_path / "log.csv") as log, pytest.raises(ValueError, match=match):
        gpumon.run(SmiSampler(), log, **kwargs)


def test_bad_backend_and_timeout():
    with pytest.raises(ValueError, match="backend='cuda'; accepted: auto, nvml, smi"):
        gpumon.open_sampler("cuda")
    with pytest.raises(ValueError, match="smi_timeout=0"):
        gpumon.open_sampler("smi", 0)


# --- a real process stopped by a signal -----------------------------------------------------------------

@pytest.mark.parametrize("signum, interval", [(signal.SIGINT, "0.05"), (signal.SIGTERM, "60")])
def test_signal_stops_the_cli_cleanly(tmp_path, fake_smi, signum, interval):
    # SIGINT lands while nvidia-smi (0.2 s per call) is running; SIGTERM during the 60 s wait.
    fake_smi.play({"stdout": GPU0 + GPU1, "sleep": 0.2})
    path = tmp_path / "log.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ringlab", "gpumon", "--interval", interval, "--out", str(path), "--backend", "smi"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        want = 2 if interval == "0.05" else 1  # ticks written before the signal is sent
        deadline = time.monotonic() + 20
        while (not path.exists() or path.read_text().count("\n") < 1 + 2 * want) and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert path.read_text().endswith("\n")
    rows = read_log(path)
    ticks = sorted({row.timestamp for row in rows})
    assert len(ticks) == len(fake_smi.calls()) >= want  # the tick in progress was written, and no more
    assert [row.to_record()[1:] for row in rows] == [s[1:] for _ in ticks for s in (s0(0), s1(0))]
    assert f"{len(ticks)} ticks appended" in err


# --- the parser as a pure function --------------------------------------------------------------------

def test_parser_examples():
    text = ("\n0, GPU-a, NVIDIA A100-SXM4-80GB, 100, 80000 MiB, 81920, 400.5 W, 70 C\n"
            "1, [N/A], Tesla, Inc. GPU, N/A, [Unknown Error], -, ERR!, 12 %\n"
            "No devices were found\n")
    assert parse_smi_csv(text) == [
        Row("sample", 0, "GPU-a", "NVIDIA A100-SXM4-80GB", 100.0, 80000.0, 81920.0, 400.5, 70.0),
        Row("sample", 1, "", "Tesla, Inc. GPU", None, None, None, None, None),  # 12 % is no temperature
        Row("error", message="No devices were found"),
    ]


PLACEHOLDERS = ["[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", "[Insufficient Permissions]",
                "[GPU requires reset]", "ERR!", "", "Not Supported"]
UNITS = dict(zip(gpumon.METRICS, ["%", "MiB", "MiB", "W", "C"]))


@st.composite
def metric_field(draw, unit):
    """(text nvidia-smi might print, the value it stands for: None for a placeholder)."""
    if draw(st.booleans()):
        return draw(st.sampled_from(PLACEHOLDERS)), None
    number = draw(st.one_of(st.integers(0, 10**6).map(str), st.decimals(0, 10**4, places=2).map(str)))
    suffix = draw(st.sampled_from(["", f" {unit}", unit]))
    return number + suffix, float(number)


@settings(max_examples=150, deadline=None)
@given(index=st.integers(0, 64),
       uuid=st.sampled_from(["GPU-6f2c9d8e-1a3b-4c5d-8e7f-0a1b2c3d4e5f", "[N/A]"]),
       name=st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=",")).map("NVIDIA ".__add__),
       metrics=st.tuples(*(metric_field(unit) for unit in UNITS.values())),
       space=st.sampled_from(["", " ", "  "]))
def test_parser_property(index, uuid, name, metrics, space):
    line = (", " + space).join([str(index), uuid, name, *(text for text, _ in metrics)])
    (row,) = parse_smi_csv(space + line + space + "\n")
    assert row == Row("sample", index, "" if uuid == "[N/A]" else uuid, name.strip(), *(value for _, value in metrics))
    # A placeholder is written as an empty cell, never as 0, and reads back as None.
    record = row.to_record()
    for (_, value), cell in zip(metrics, record[HEADER.index("utilization_gpu_pct"):]):
        assert (cell == "") if value is None else (float(cell) == value)
    assert Row.from_record(dict(zip(HEADER, record))) == row


# --- the recorded sample log and its plot ---------------------------------------------------------

def make_sample_log(path: Path, fake_smi, clock) -> None:
    """The recording shipped for the notebook: 2 H100s, GPU 1 falls off the bus for two ticks, a restart."""
    lost = "Unable to determine the device handle for GPU 0000:1B:00.0: Unknown Error"
    plan = [  # (util, MiB used, W, C) for GPU 0 and GPU 1; None: GPU 1 unreachable
        ((0, 1, 69.82, 31), (0, 1, 71.20, 30)),
        ((37, 18211, 212.53, 36), (35, 18209, 205.11, 35)),
        ((98, 61873, 652.31, 58), (97, 61871, 640.80, 56)),
        ((100, 61873, 688.14, 63), (99, 61871, 679.42, 61)),
        ((99, 61873, 691.05, 65), (100, 61871, 684.77, 63)),
        ((100, 61873, 512.40, 64), None),  # NCCL spins on GPU 0 waiting for its lost peer
        ((100, 61873, 498.96, 62), None),
        ((0, 1, 88.31, 52), (0, 1, 70.53, 41)),  # job killed, GPU 1 reset
        ((41, 18211, 220.09, 47), (40, 18209, 214.66, 40)),
        ((98, 61873, 655.72, 57), (96, 61871, 641.18, 55)),
        ((99, 61873, 679.90, 61), (99, 61871, 672.35, 59)),
        ((100, 61873, 690.12, 63), (98, 61871, 681.07, 62)),
    ]

    def line(index, uuid, util, used, watts, celsius):
        return f"{index}, {uuid}, {H100}, {util}, {used}, 81559, {watts:.2f}, {celsius}"

    steps = [{"stdout": line(0, UUID0, *g0) + "\n" + (line(1, UUID1, *g1) if g1 else lost) + "\n",
              "rc": 0 if g1 else 15} for g0, g1 in plan]
    fake_smi.play(*steps)
    # Recorded with every error row, repeats included, as notebook 09 reads it (dedup came later).
    record(path, SmiSampler(), clock, count=len(plan), dedup=False)


def test_shipped_sample_log_is_reproduced(tmp_path, fake_smi, clock):
    """ringlab/labs/data/gpumon_sample.csv is exactly this recording (RINGLAB_WRITE_SAMPLE=1 rewrites it)."""
    path = gpumon.SAMPLE_LOG if os.environ.get("RINGLAB_WRITE_SAMPLE") == "1" else tmp_path / "sample.csv"
    if path == gpumon.SAMPLE_LOG:
        path.unlink(missing_ok=True)
    make_sample_log(path, fake_smi, clock)
    assert path.read_bytes() == gpumon.SAMPLE_LOG.read_bytes()
    kinds = [row.kind for row in read_log(path)]
    assert (kinds.count("lost"), kinds.count("back"), kinds.count("error"), kinds.count("sample")) == (1, 1, 2, 22)


def test_plot_shows_gaps_and_lost_period():
    pytest.importorskip("matplotlib")
    from ringlab.viz.gpumon import plot_gpumon_log

    fig = plot_gpumon_log(gpumon.SAMPLE_LOG)
    util_ax, mem_ax = fig.axes
    gpu0, gpu1 = util_ax.lines[:2]
    assert list(gpu0.get_ydata()) == [0, 37, 98, 100, 99, 100, 100, 0, 41, 98, 99, 100]
    y1 = list(gpu1.get_ydata())
    assert [y != y for y in y1] == [False] * 5 + [True, True] + [False] * 5  # NaN where lost: a gap, not 0
    assert mem_ax.lines[0].get_ydata()[2] == pytest.approx(61873 / 1024)
    (span,) = [p for p in util_ax.patches]
    assert span.get_label() == "GPU 1 lost"
    errors = util_ax.lines[-1]
    assert errors.get_label() == "error row" and len(errors.get_xdata()) == 2
    with pytest.raises(ValueError, match="no rows"):
        plot_gpumon_log([])


def test_rows_written_then_read_are_equal(tmp_path):
    rows = [Row("sample", 3, "GPU-x", "n", 1.5, None, 2.0, 0.0, None, timestamp=stamp(0), source="nvml"),
            Row("error", code=-9, message='quote " and, comma | line', timestamp=stamp(0), source="smi")]
    with GpumonLog(tmp_path / "log.csv") as log:
        log.write(rows)
    assert read_log(tmp_path / "log.csv") == rows
    assert cells(tmp_path / "log.csv")[1][9] == "0"  # a real 0 stays 0
