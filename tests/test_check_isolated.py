"""``ringlab check`` grades in a child process: a hang, an exit or a crash is reported as such, never inherited."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ringlab.check.isolated import grade_isolated
from ringlab.cli import main

REPO = Path(__file__).resolve().parents[1]
SOLUTION = REPO / "solutions" / "01_ring_allreduce.py"

LEARNER_FILES = {
    "loops at import": ("while True:\n    pass\n", "timeout", "timed out"),
    "loops when called": ("def ring_allreduce(arrays):\n    while True:\n        pass\n", "timeout", "timed out"),
    "exits at import": ("import sys\nsys.exit(0)\n", "exit", "sys.exit(0) while being imported"),
    "exits when called": ("import sys\ndef ring_allreduce(arrays):\n    sys.exit(3)\n", "exit",
                          "sys.exit(3) while being graded"),
    "os._exit at import": ("import os\nos._exit(0)\n", "exit", "exit status 0"),
    "segfault": ("import ctypes\nctypes.string_at(0)\n", "crash", "SIGSEGV"),
    "killed": ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "crash", "SIGKILL"),
}


@pytest.mark.parametrize("name", LEARNER_FILES)
def test_hostile_learner_code_is_reported_with_exit_code_3(name, tmp_path, capsys):
    source, outcome, words = LEARNER_FILES[name]
    path = tmp_path / "mine.py"
    path.write_text(source)
    started = time.monotonic()
    result = grade_isolated("01a", path, timeout=1.5)
    assert time.monotonic() - started < 20
    assert (result.outcome, result.status) == (outcome, "wrong") and words in result.message
    assert main(["check", "01a", "--file", str(path), "--timeout", "1.5s"]) == 3
    assert words in capsys.readouterr().out


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
    monkeypatch.setenv("RINGLAB_USE_SOLUTIONS", "1")
    assert grade_isolated("01a").passed


def test_bad_timeouts_are_refused():
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout"):
            grade_isolated("01a", timeout=bad)
