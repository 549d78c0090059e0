"""The practice record: where it lives, atomic writes that survive a kill, corrupt files kept aside."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ringlab.practice import state


def test_path_follows_xdg_and_ignores_relative(tmp_path):
    assert state.state_path({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "ringlab" / "practice.json"
    home_default = state.state_path({"XDG_STATE_HOME": "relative/dir"})
    assert home_default.parts[-4:] == (".local", "state", "ringlab", "practice.json")
    assert state.state_path({}) == home_default


def test_round_trip_and_reset(state_home):
    data = state.empty()
    state.record_card(data, "05", 1, 1, 0.5, [{"ask": "total", "answer": "40 GB", "mistake": "GB vs GiB",
                                               "expected": 4.29e10}], seed=3)
    path = state.save(data)
    assert path == state_home / "ringlab" / "practice.json"
    back = state.load()
    assert back["cards"]["05"]["attempts"] == 1 and back["mistakes"][0]["seed"] == 3
    assert [p.name for p in path.parent.iterdir()] == ["practice.json"]  # no temporary file left
    assert state.reset() and not path.exists() and not state.reset()


def test_a_failed_replace_leaves_the_old_record_and_no_temp(state_home, monkeypatch):
    old = state.empty()
    state.record_card(old, "01", 1, 0, 1.0, [], seed=1)
    path = state.save(old)

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    new = state.empty()
    state.record_card(new, "08", 0, 1, 0.0, [], seed=2)
    with pytest.raises(OSError):
        state.save(new)
    assert json.loads(path.read_text())["cards"] == old["cards"]
    assert [p.name for p in path.parent.iterdir()] == ["practice.json"]


WRITER = """
import sys
from ringlab.practice import state
i = 0
while True:
    data = state.empty()
    for k in range(300):  # a record of some size, so a write takes a while
        state.record_card(data, f"{k % 16 + 1:02d}", 1, 0, 1.0, [{"ask": "x", "answer": "y" * 50,
                          "mistake": "m", "expected": float(i)}], seed=i)
    state.save(data)
    i += 1
    if i == 1:
        print("ready", flush=True)
"""


@pytest.mark.parametrize("delay", [0.05, 0.13, 0.29])
def test_a_kill_mid_write_leaves_a_whole_record(state_home, delay):
    env = {**os.environ, "XDG_STATE_HOME": str(state_home)}
    proc = subprocess.Popen([sys.executable, "-c", WRITER], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    data = json.loads(state.state_path(env).read_text())  # complete JSON, not a torn write
    assert len(data["mistakes"]) == state.MAX_MISTAKES and len(data["cards"]) == 16
    assert len({m["expected"] for m in data["mistakes"]}) == 1  # all from one save, not a mix


def test_corrupt_record_is_moved_aside(state_home, capsys):
    path = state.state_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 1, "cards": [')
    assert state.load() == state.empty()
    assert "unreadable" in capsys.readouterr().err
    assert path.with_name("practice.json.corrupt").exists() and not path.exists()
