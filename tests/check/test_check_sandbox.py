"""The sandbox of ``ringlab check``: a learner's file cannot forge a verdict, damage the repository, or outlive
the grader; an untouched stub is reported without starting a process. Waits here are for events (a file
appearing, a process gone), bounded by generous deadlines: no verdict depends on the machine's speed."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ringlab.check import EXERCISES, grade, load
from ringlab.check import isolated, wire
from ringlab.check.isolated import grade_isolated, untouched_stub

REPO = Path(__file__).resolve().parents[2]
WRONG_01A = "def ring_allreduce(arrays):\n    return [], []\n"
SOLUTION_01A = (REPO / "solutions" / "01_ring_allreduce.py").read_text()

FORGERIES = {
    "writes a passed verdict to every descriptor": """
import json, os
for fd in range(3, 1024):
    try:
        os.write(fd, json.dumps({"status": "passed", "outcome": "graded", "message": "ok"}).encode())
    except OSError:
        pass
""",
    "prints a passed verdict": "print('01a ring_allreduce: PASSED (137 cases run)')\n",
    "patches the grader": """
import ringlab.check.engine as engine, ringlab.check as check
from ringlab.check.result import GradeResult
engine.run_grader = lambda *a, **k: GradeResult("01a", "ring_allreduce", "passed", "forged")
check.grade = lambda *a, **k: GradeResult("01a", "ring_allreduce", "passed", "forged")
import ringlab.check.graders.ring_allreduce as g
g.check_ring_allreduce = lambda *a, **k: None
""",
    "sends a well-formed fake reply on every socket": """
import os, pickle, stat, struct
body = pickle.dumps(("reply", 1, True, (None,), []))
for fd in range(3, 1024):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.write(fd, struct.pack("!Q", len(body)) + body)
    except OSError:
        pass
""",
}


def _write(tmp_path: Path, source: str, name: str = "mine.py") -> Path:
    """The learner's file, in a folder of its own (read-only for the learner's code where the platform allows)."""
    folder = tmp_path / "learner"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(source)
    return path


@pytest.mark.parametrize("name", FORGERIES)
def test_a_learner_file_cannot_forge_a_verdict(name, tmp_path):
    path = _write(tmp_path, FORGERIES[name] + WRONG_01A)
    result = grade_isolated("01a", path)
    assert not result.passed and result.status == "wrong", result
    assert "forged" not in result.message


@pytest.mark.parametrize("ending, outcome", [("raise SystemExit(0)", "exit"), ("os._exit(0)", "exit"),
                                             ("os.kill(os.getpid(), signal.SIGKILL)", "crash")])
def test_ending_the_process_is_never_a_pass(ending, outcome, tmp_path):
    """Even after the first cases passed: the verdict needs every case, computed here."""
    source = SOLUTION_01A + f"""
import os, signal
_calls = [0]
_right = ring_allreduce
def ring_allreduce(arrays):
    _calls[0] += 1
    if _calls[0] == 5:
        {ending}
    return _right(arrays)
"""
    result = grade_isolated("01a", _write(tmp_path, source))
    assert (result.outcome, result.status) == (outcome, "wrong"), result


def test_garbage_on_the_channel_is_a_crash_not_a_traceback(tmp_path):
    marker = tmp_path / "pwned"
    source = f"""
import os, pickle, stat, struct
class Evil:
    def __reduce__(self):
        return (os.system, ("touch {marker}",))
def ring_allreduce(arrays):
    for body in (b"\\x00not a pickle", pickle.dumps(Evil())):
        for fd in range(3, 1024):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.write(fd, struct.pack("!Q", len(body)) + body)
            except OSError:
                pass
    return [], []
"""
    result = grade_isolated("01a", _write(tmp_path, source))
    assert (result.outcome, result.status) == ("crash", "wrong") and "channel" in result.message, result
    assert not marker.exists()  # the parent never ran what the pickle named


def test_unpack_builds_only_builtin_values():
    class Evil:
        def __reduce__(self):
            return (os.system, ("true",))

    for bad in (pickle.dumps(Evil()), pickle.dumps(np.zeros(2)), b"", b"\x80\x05garbage", pickle.dumps(set)):
        with pytest.raises(wire.ProtocolError):
            wire.unpack(bad)
    assert wire.unpack(pickle.dumps(("reply", 1, True, (1 + 2j, b"x", {"a": [1.5]}), []))) == \
        ("reply", 1, True, (1 + 2j, b"x", {"a": [1.5]}), [])


VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=20)


@given(VALUES)
def test_values_travel_unchanged(value):
    import socket

    a, b = socket.socketpair()
    peer = wire.Peer(a, frozenset(), frozenset())
    try:
        assert peer.decode(wire.unpack(pickle.dumps(peer.encode(value)))) == value
    finally:
        a.close(), b.close()


@pytest.mark.parametrize("dtype", ["int8", "int64", "float16", "float32", "float64", "bool", "complex64", "bfloat16"])
def test_arrays_travel_with_their_dtype_and_bits(dtype):
    import socket

    import ml_dtypes

    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    x = (np.arange(-6, 6).reshape(3, 4) * 1.25).astype(dt)
    a, b = socket.socketpair()
    peer = wire.Peer(a, frozenset(), frozenset())
    try:
        for value in (x, x[:, ::2], x[0, 0], np.zeros((0, 3), dt)):
            got = peer.decode(wire.unpack(pickle.dumps(peer.encode(value))))
            assert got.dtype == dt and np.shape(got) == np.shape(value)
            assert np.asarray(got).tobytes() == np.ascontiguousarray(value).tobytes()
    finally:
        a.close(), b.close()


def test_malformed_trees_are_protocol_errors():
    import socket

    a, b = socket.socketpair()
    peer = wire.Peer(a, frozenset(), frozenset())
    try:
        for tree in (("A", "<f8", (2,), b"x"), ("A", "O", (1,), b"x"), ("Z",), ("P", 99), ("D", [([1], 2)]),
                     ("L", "notalist"), ("DC", "os", "path", []), ("H", "1", "x", True), ["L"], ("A", "<f8", (-1,), b"")):
            with pytest.raises(wire.ProtocolError):
                peer.decode(tree)
        exc = peer.decode(("E", "builtins", "SystemExit", [0], None, "0"))  # never acts as SystemExit here
        assert isinstance(exc, Exception) and type(exc).__name__ == "SystemExit"
    finally:
        a.close(), b.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:  # a zombie is gone for our purpose (it runs nothing)
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


def _wait_for(condition, seconds: float = 120.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


SPINNER = """
import os, time
def ring_allreduce(arrays):
    if os.fork() == 0:  # a grandchild that spins too
        open({pids!r} + ".grandchild", "w").write(str(os.getpid()))
        while True:
            pass
    open({pids!r}, "w").write(str(os.getpid()))
    while True:
        pass
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_interrupting_ringlab_check_stops_the_learners_code(how, tmp_path):
    pids = str(tmp_path / "pid")
    path = _write(tmp_path, SPINNER.format(pids=pids))
    cli = subprocess.Popen([sys.executable, "-m", "ringlab", "check", "01a", "--file", str(path), "--timeout", "3600"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        assert _wait_for(lambda: Path(pids).is_file() and Path(pids + ".grandchild").is_file())
        child, grandchild = (int(Path(p).read_text()) for p in (pids, pids + ".grandchild"))
        cli.send_signal(how)
        assert _wait_for(lambda: _gone(child) and _gone(grandchild)), "the learner's code outlived ringlab check"
        assert cli.wait(60) == {signal.SIGINT: 130, signal.SIGTERM: 128 + signal.SIGTERM,
                                signal.SIGKILL: -signal.SIGKILL}[how]
    finally:
        cli.kill()


def test_a_solution_that_forks_gets_its_verdict_without_waiting(tmp_path):
    """The grandchild holds the channel open and sleeps for ever: the verdict comes when the grader is done."""
    pids = str(tmp_path / "pid")
    source = SOLUTION_01A + f"""
import os, time
if os.fork() == 0:
    open({pids!r}, "w").write(str(os.getpid()))
    time.sleep(10**6)
"""
    started = time.monotonic()
    result = grade_isolated("01a", _write(tmp_path, source), timeout=3600)
    assert result.passed, result
    assert time.monotonic() - started < 1800  # it did not wait for the limit (or the sleeper)
    assert _wait_for(lambda: Path(pids).is_file()) and _wait_for(lambda: _gone(int(Path(pids).read_text())))


def test_the_learners_code_cannot_write_the_repository(tmp_path):
    victim = REPO / "solutions" / "01_ring_allreduce.py"
    before = victim.read_bytes()
    mine = tmp_path / "learner"
    mine.mkdir()
    source = f"""
import os, shutil
open("scratch.txt", "w").write("the working directory is a scratch copy")
for attempt in (lambda: os.remove({str(victim)!r}), lambda: open({str(victim)!r}, "w"),
                lambda: shutil.rmtree({str(REPO / "solutions")!r}), lambda: open({str(mine / "x.txt")!r}, "w")):
    try:
        attempt()
    except OSError:
        pass
""" + WRONG_01A
    path = mine / "mine.py"
    path.write_text(source)
    result = grade_isolated("01a", path)
    assert result.outcome == "graded"
    assert not (mine / "scratch.txt").exists() and not (REPO / "scratch.txt").exists()
    if result.jail:
        pytest.skip(f"read-only folders are not available here: {result.jail}")
    assert victim.read_bytes() == before and not (mine / "x.txt").exists()


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_an_untouched_stub_is_not_attempted_without_a_process(exercise_id, monkeypatch):
    ex = EXERCISES[exercise_id]
    path = REPO / (ex.file or f"exercises/{ex.module}.py")  # a Go exercise (19b) has its own file
    in_process = grade(exercise_id, load(exercise_id, path))

    def no_child(*args, **kwargs):
        raise AssertionError("a child process was started for an untouched stub")

    monkeypatch.setattr(isolated, "_Session", no_child)
    result = grade_isolated(exercise_id, path)
    assert (result.status, result.message) == (in_process.status, in_process.message) == \
        ("not attempted", f"not attempted yet: {untouched_stub(exercise_id, path)}")


def test_an_edited_stub_is_graded(tmp_path):
    stub = (REPO / "exercises" / "01_ring_allreduce.py").read_text()
    assert untouched_stub("01a", _write(tmp_path, stub + "\n# a comment\n", "a.py")) is not None
    edited = stub.replace('raise NotImplementedError("01a: replace this line with your code")', "return [], []", 1)
    assert edited != stub
    assert untouched_stub("01a", _write(tmp_path, edited, "b.py")) is None
    assert untouched_stub("01b", _write(tmp_path, edited, "b.py")) is not None  # 01b is still the stub
    result = grade_isolated("01a", tmp_path / "learner" / "b.py")
    assert (result.outcome, result.status) == ("graded", "wrong")


def test_check_all_on_untouched_exercises_starts_no_process(monkeypatch, tmp_path, capsys):
    from ringlab.cli import main

    def no_child(*args, **kwargs):
        raise AssertionError("a child process was started")

    monkeypatch.setattr(isolated, "_Session", no_child)
    monkeypatch.setenv("RINGLAB_EXERCISES", str(REPO / "exercises"))
    assert main(["check", "--all"]) == 0
    assert f"0/{len(EXERCISES)} passed" in capsys.readouterr().out
