"""The practice record: where it lives, atomic writes that survive a kill, bad records set aside (never lost),
sessions that merge under a lock, and a session that keeps its cards when the record cannot be written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    assert _left(path.parent) == ["practice.json"]  # no temporary file left
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
    assert _left(path.parent) == ["practice.json"]


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


def _left(folder) -> list[str]:
    """The files in ``folder`` but the lock file, which stays."""
    return sorted(p.name for p in folder.iterdir() if p.name != "practice.json.lock")


def _one_card(data: dict, cid: str = "05") -> None:
    state.record_card(data, cid, 1, 0, 1.0, [], seed=1)


BAD_RECORDS = {
    "not JSON": b'{"version": 1, "cards": [',
    "not UTF-8": b'{"version": 1, "cards": {}, "mistakes": [], "sessions": [], "x": "\xff\xfe"}',
    "latin-1 bytes": '{"version": 1, "cards": {"05": {"attempts": 1}}, "note": "caf\u00e9"}'.encode("latin-1"),
    "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000,
    "a list": b"[1, 2, 3]",
    "another version": b'{"version": 2, "cards": {}, "mistakes": [], "sessions": []}',
    "NaN": b'{"version": 1, "cards": {"05": {"attempts": NaN}}, "mistakes": [], "sessions": []}',
    "a huge integer": b'{"version": 1, "n": ' + b"9" * 5000 + b"}",
    "too large": b'{"version": 1, "pad": "' + b"x" * (state.MAX_BYTES + 10) + b'"}',
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(BAD_RECORDS))
def test_a_bad_record_is_set_aside_with_a_note_and_a_new_one_starts(name, state_home, capsys):
    path = state.state_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(BAD_RECORDS[name])
    assert state.load() == state.empty()
    err = capsys.readouterr().err
    aside = path.with_name("practice.json.corrupt")
    assert f"moved it to {aside}" in err and len(err.strip().splitlines()) == 1
    assert aside.read_bytes() == BAD_RECORDS[name] and not path.exists()  # kept byte for byte
    state.update(_one_card)
    assert json.loads(path.read_text())["cards"]["05"]["attempts"] == 1


def test_a_second_bad_record_does_not_overwrite_the_first_set_aside(state_home, capsys):
    path = state.state_path()
    path.parent.mkdir(parents=True)
    for i in range(3):
        path.write_text(f"garbage {i}")
        state.load()
    names = ("practice.json.corrupt", "practice.json.corrupt.1", "practice.json.corrupt.2")
    assert [path.with_name(n).read_text() for n in names] == ["garbage 0", "garbage 1", "garbage 2"]


def test_wrong_inner_types_keep_the_good_entries_and_a_copy_of_the_original(state_home, capsys):
    path = state.state_path()
    path.parent.mkdir(parents=True)
    good = {"attempts": 2, "right": 1, "wrong": 1, "score": 0.5, "last": "2026-01-01T00:00:00Z"}
    record = {"version": 1,
              "cards": {"05": 5, "06": good, "07": {**good, "attempts": True}, "08": {**good, "score": 7}},
              "mistakes": [{"card": "06", "ask": "t", "answer": "1", "mistake": None, "expected": 1.0, "seed": 3,
                            "at": "x"}, "junk", {"card": 6}],
              "sessions": {"not": "a list"}}
    original = json.dumps(record)
    path.write_text(original)
    data = state.load()
    assert data["cards"] == {"06": good} and len(data["mistakes"]) == 1 and data["sessions"] == []
    assert "6 malformed entries" in capsys.readouterr().err
    assert path.with_name("practice.json.corrupt").read_text() == original
    state.update(lambda d: _one_card(d, "06"))
    assert json.loads(path.read_text())["cards"]["06"]["attempts"] == 3  # the good entry went on counting


def test_a_folder_named_practice_json_and_a_file_named_like_the_state_folder(state_home, capsys):
    path = state.state_path()
    path.mkdir(parents=True)
    (path / "inside").write_text("kept")
    state.update(_one_card)
    assert (path.with_name("practice.json.corrupt") / "inside").read_text() == "kept"
    assert json.loads(path.read_text())["cards"]["05"]["attempts"] == 1
    state_home.mkdir(exist_ok=True)
    folder = path.parent
    for p in folder.iterdir():
        p.unlink() if p.is_file() else (p / "inside").unlink() or p.rmdir()
    folder.rmdir()
    folder.write_text("a file where the state folder goes")
    assert state.load() == state.empty()
    state.update(_one_card)
    assert folder.with_name("ringlab.corrupt").read_text() == "a file where the state folder goes"
    assert json.loads(path.read_text())["cards"]["05"]["attempts"] == 1
    assert "is a file where ringlab keeps its state folder" in capsys.readouterr().err


def test_a_record_that_cannot_be_read_is_never_written_over(state_home, monkeypatch, capsys):
    path = state.state_path()
    old = state.empty()
    _one_card(old, "01")
    state.save(old)
    real_open = open

    def no_read(file, mode="r", *args, **kwargs):
        if str(file) == str(path) and "r" in mode:
            raise PermissionError(13, "Permission denied")
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", no_read)
    assert state.load() == state.empty() and "cannot read" in capsys.readouterr().err
    with pytest.raises(OSError, match="cannot read"):
        state.update(_one_card)
    monkeypatch.undo()
    assert json.loads(path.read_text())["cards"] == old["cards"]


JSON_ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                                     max_size=4),
                        max_leaves=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=300), JSON_ANY.map(lambda v: json.dumps(v).encode()),
                     st.fixed_dictionaries({"version": st.just(1)}, optional={
                         "cards": st.dictionaries(st.text(max_size=3), st.integers() | st.dictionaries(
                             st.sampled_from(["attempts", "right", "wrong", "score", "last"]),
                             st.integers(-2, 3) | st.floats(allow_nan=False) | st.text(max_size=3) | st.none()),
                             max_size=3),
                         "mistakes": st.lists(st.integers() | st.dictionaries(st.text(max_size=6), st.text(max_size=3)),
                                              max_size=3),
                         "sessions": st.lists(st.none() | st.integers(), max_size=3)}
                     ).map(lambda v: json.dumps(v).encode())))
def test_any_bytes_in_the_record_never_crash_and_leave_a_valid_record(raw, state_home):
    path = state.state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in path.parent.iterdir():
        p.unlink()
    path.write_bytes(raw)
    data = state.load(warn=lambda _: None)
    assert state._salvage(data) == (data, 0)  # what load returns is a well-formed record
    state.update(_one_card, warn=lambda _: None)
    after = json.loads(path.read_text())
    assert state._salvage(after) == (after, 0) and after["cards"]["05"]["attempts"] >= 1
    kept = [p for p in path.parent.iterdir() if p.name.startswith("practice.json.corrupt")]
    assert kept == [] or kept[0].read_bytes() == raw  # a record that was changed is kept as it was


MERGER = """
import sys
from ringlab.practice import state
for i in range(int(sys.argv[2])):
    state.update(lambda d: state.record_card(d, sys.argv[1], 1, 0, 1.0, [{"ask": "x", "answer": "y", "mistake": "m",
                                                                       "expected": 1.0}], seed=i))
"""


def test_sessions_at_once_merge_under_the_lock(state_home):
    """Four processes each add 40 cards; without the lock most read-modify-writes would drop another's card."""
    env = {**os.environ, "XDG_STATE_HOME": str(state_home)}
    procs = [subprocess.Popen([sys.executable, "-c", MERGER, cid, "40"], env=env) for cid in ("01", "02", "03", "04")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    data = json.loads(state.state_path(env).read_text())
    assert {cid: e["attempts"] for cid, e in data["cards"].items()} == {"01": 40, "02": 40, "03": 40, "04": 40}
    assert len(data["mistakes"]) == 160
