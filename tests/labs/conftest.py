"""Fakes for the GPU monitor tests: a scripted ``nvidia-smi`` first on PATH and a stand-in NVML module."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

FAKE_SMI_SOURCE = Path(__file__).with_name("fake_smi") / "nvidia_smi.py"


class FakeSmi:
    """Puts an executable ``nvidia-smi`` first on PATH; :meth:`play` sets the answers it gives."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch):
        bin_dir = root / "fake-bin"
        bin_dir.mkdir()
        exe = bin_dir / "nvidia-smi"
        exe.write_text(f"#!{sys.executable}\n" + FAKE_SMI_SOURCE.read_text())
        exe.chmod(0o755)
        self.script = root / "fake-smi-script.json"
        self.calls_file = root / "fake-smi-calls.jsonl"
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("FAKE_SMI_SCRIPT", str(self.script))
        monkeypatch.setenv("FAKE_SMI_CALLS", str(self.calls_file))

    def play(self, *steps: dict) -> None:
        """One step per call: ``{"stdout", "stderr", "rc", "sleep"}``; the last one repeats."""
        self.script.write_text(json.dumps(list(steps)))

    def calls(self) -> list[dict]:
        """One ``{"argv": [...], "pid": int}`` per call made so far."""
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]


@pytest.fixture
def fake_smi(tmp_path, monkeypatch) -> FakeSmi:
    return FakeSmi(tmp_path, monkeypatch)


NVML_ERROR_STRINGS = {1: "Uninitialized", 3: "Not Supported", 9: "Driver Not Loaded", 15: "GPU is lost", 999: "Unknown Error"}


class FakeNVMLError(Exception):
    """Same surface as ``pynvml.NVMLError``: ``.value`` is the nvmlReturn_t code."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return NVML_ERROR_STRINGS.get(self.value, f"NVML Error with code {self.value}")


class FakeNvml:
    """Stand-in for the ``pynvml`` module, driven by one dict per tick.

    A tick is ``{"fail": {call: code}, "devices": [device, ...]}``; a device is a dict with
    ``uuid, name, util (%), used, total (bytes), power_mw, temp (C)`` and an optional
    ``fail: {call: code}`` (``call`` is an NVML function name). Device queries before
    ``nvmlInit`` (or after ``nvmlShutdown``) raise Uninitialized, as NVML does.
    """

    NVMLError = FakeNVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_TEMPERATURE_GPU = 0

    def __init__(self, ticks: list[dict]):
        self.ticks = ticks
        self.tick = 0
        self.ready = False
        self.log: list[str] = []

    def advance(self) -> None:
        self.tick += 1

    def _check(self, call: str, failures: dict | None = None) -> None:
        self.log.append(call)
        tick = self.ticks[min(self.tick, len(self.ticks) - 1)]
        code = {**tick.get("fail", {}), **(failures or {})}.get(call)
        if code is not None:
            raise FakeNVMLError(code)
        if call != "nvmlInit" and not self.ready:
            raise FakeNVMLError(1)

    def _devices(self) -> list[dict]:
        return self.ticks[min(self.tick, len(self.ticks) - 1)]["devices"]

    def nvmlInit(self):
        self._check("nvmlInit")
        self.ready = True

    def nvmlShutdown(self):
        self._check("nvmlShutdown")
        self.ready = False

    def nvmlDeviceGetCount(self):
        self._check("nvmlDeviceGetCount")
        return len(self._devices())

    def nvmlDeviceGetHandleByIndex(self, index):
        device = self._devices()[index]
        self._check("nvmlDeviceGetHandleByIndex", device.get("fail"))
        return device

    def _query(self, call, device, value):
        self._check(call, device.get("fail"))
        return value

    def nvmlDeviceGetUUID(self, device):
        return self._query("nvmlDeviceGetUUID", device, device["uuid"])

    def nvmlDeviceGetName(self, device):
        return self._query("nvmlDeviceGetName", device, device["name"])

    def nvmlDeviceGetUtilizationRates(self, device):
        return self._query("nvmlDeviceGetUtilizationRates", device, SimpleNamespace(gpu=device["util"], memory=0))

    def nvmlDeviceGetMemoryInfo(self, device):
        info = SimpleNamespace(used=device["used"], total=device["total"], free=device["total"] - device["used"])
        return self._query("nvmlDeviceGetMemoryInfo", device, info)

    def nvmlDeviceGetPowerUsage(self, device):
        return self._query("nvmlDeviceGetPowerUsage", device, device["power_mw"])

    def nvmlDeviceGetTemperature(self, device, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._query("nvmlDeviceGetTemperature", device, device["temp"])


@pytest.fixture
def fake_nvml(monkeypatch):
    """``fake_nvml(ticks)`` installs a FakeNvml as the ``pynvml`` module and returns it."""

    def install(ticks: list[dict]) -> FakeNvml:
        module = FakeNvml(ticks)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install
