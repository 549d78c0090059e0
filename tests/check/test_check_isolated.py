"""``ringlab check`` grades in a child process: a hang, an exit or a crash is reported as such, never inherited.

No verdict here depends on the machine's speed: the clock counts only the learner's code (it starts after the
child's imports), a learner file that loops gets a short limit (it times out however fast the machine is),
and every other file gets the default limit (30 s or more of its own running time) and finishes at once.
Run with ``--hogs 2`` to check that on a busy machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ringlab.check.isolated import REFERENCE_SECONDS, grade_isolated, time_limit
from ringlab.cli import main

REPO = Path(__file__).resolve().parents[2]
SOLUTION = REPO / "solutions" / "01_ring_allreduce.py"

LEARNER_FILES = {  # name: (source, outcome, words in the message, whether it runs for ever)
    "loops at import": ("while True:\n    pass\n", "timeout", "timed out", True),
    "loops when called": ("def ring_allreduce(arrays):\n    while True:\n        pass\n", "timeout", "timed out", True),
    "sleeps when called": ("import time\ndef ring_allreduce(arrays):\n    time.sleep(10**6)\n", "timeout", "timed out",
                           True),
    "exits at import": ("import sys\nsys.exit(0)\n", "exit", "sys.exit(0) while being imported", False),
    "exits when called": ("import sys\ndef ring_allreduce(arrays):\n    sys.exit(3)\n", "exit",
                          "sys.exit(3) while being graded", False),
    "os._exit at import": ("import os\nos._exit(0)\n", "exit", "exit status 0", False),
    "os._exit when called": ("import os\ndef ring_allreduce(arrays):\n    os._exit(4)\n", "exit", "exit status 4",
                             False),
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "crash", "SIGSEGV", False),
    "killed": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "crash", "SIGKILL", False),
}


@pytest.mark.parametrize("name", LEARNER_FILES)
def test_hostile_learner_code_is_reported_with_exit_code_3(name, tmp_path, capsys):
    source, outcome, words, forever = LEARNER_FILES[name]
    path = tmp_path / "mine.py"
    path.write_text(source)
    limit = 1.5 if forever else None  # a loop times out at any speed; the rest end at once under any limit
    result = grade_isolated("01a", path, timeout=limit)
    assert (result.outcome, result.status) == (outcome, "wrong") and words in result.message, result.message
    argv = ["check", "01a", "--file", str(path)] + (["--timeout", "1.5s"] if forever else [])
    assert main(argv) == 3
    out = capsys.readouterr().out
    assert words in out and f"time limit: {limit or time_limit('01a'):g} s" in out


def test_a_syntax_error_is_a_wrong_answer_not_a_crash(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text("def ring_allreduce(:\n")
    assert main(["check", "01a", "--file", str(path)]) == 1
    assert "could not import your file: SyntaxError" in capsys.readouterr().out


def test_the_child_gives_the_same_verdicts_as_the_in_process_grader(tmp_path, monkeypatch, capsys):
    from ringlab.check import grade, load

    assert main(["check", "01a", "--file", str(SOLUTION)]) == 0
    assert "01a ring_allreduce: PASSED" in capsys.readouterr().out
    wrong = tmp_path / "wrong.py"
    wrong.write_text(SOLUTION.read_text().replace("return outputs, sent", "return outputs[:1], sent"))
    child, here = grade_isolated("01a", wrong), grade("01a", load("01a", wrong))
    assert child.status == "wrong" and child.outcome == "graded"
    assert (child.status, child.message, child.cases) == (here.status, here.message, here.cases)
    assert str(child) == str(here)  # inputs shown as the in-process grader shows them
    raising = tmp_path / "raising.py"
    raising.write_text("def ring_allreduce(arrays):\n    return {}['no such key']\n")
    child, here = grade_isolated("01a", raising), grade("01a", load("01a", raising))
    assert child.message == here.message and "KeyError" in child.message and "line 2 of raising.py" in child.message
    monkeypatch.setenv("RINGLAB_USE_SOLUTIONS", "1")
    assert grade_isolated("01a").passed


def test_the_time_limit_starts_after_the_imports(tmp_path):
    """A file that imports torch (seconds on a busy machine) and answers at once passes under a 5 s limit."""
    path = tmp_path / "05_kv_cache.py"
    path.write_text("import torch  # noqa: F401\n" + (REPO / "solutions" / "05_kv_cache.py").read_text())
    result = grade_isolated("05a", path, timeout=5.0)
    assert (result.outcome, result.status) == ("graded", "passed"), result.message
    assert result.seconds <= 5.0


def test_limits_come_from_the_reference_solutions():
    from ringlab.check import EXERCISES

    assert set(REFERENCE_SECONDS) == set(EXERCISES)
    for exercise_id, seconds in REFERENCE_SECONDS.items():
        assert time_limit(exercise_id) == max(30.0, 10 * seconds)


def test_bad_timeouts_are_refused():
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout"):
            grade_isolated("01a", timeout=bad)
