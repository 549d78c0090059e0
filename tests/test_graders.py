"""Graders against known-wrong answers (mutants), the solutions, and the untouched stubs."""

import os
import time
from pathlib import Path

import numpy as np
import pytest

from ringlab.check import EXERCISES, grade, hint, load
from ringlab.check.make_exercises import generate, main as make_main, make_stub

ROOT = Path(__file__).resolve().parents[1]
MUTANTS = ROOT / "tests" / "mutants"

# mutant file -> words the first failure message must contain
EXPECTED = {
    "ex01_unreduced_chunk": ["rank", "element", "expected"],
    "ex01_no_rotation": ["rank", "element", "expected"],
    "ex01_allgather_off_by_one": ["rank", "element", "expected"],
    "ex01_drops_remainder": ["rank", "element", "expected"],
    "ex01_whole_buffer_bytes": ["rank", "bytes at step", "expected"],
    "ex02_no_rotation": ["step", "chunk"],
    "ex02_allgather_off_by_one": ["all-gather", "rank"],
    "ex02_wrong_direction": ["reduce-scatter", "chunk"],
    "ex03_widely_copied": ["rank", "element", "expected"],
    "ex03_skips_a_step": ["exchange", "hang"],
    "ex03_sends_whole_buffer": ["rank", "bytes in total", "expected"],
}


def test_every_mutant_file_has_an_expectation():
    assert {p.stem for p in MUTANTS.glob("ex*.py")} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_mutant_is_rejected_with_a_useful_message(name):
    exercise_id = name[:4]
    result = grade(exercise_id, load(exercise_id, MUTANTS / f"{name}.py"))
    assert result.status == "wrong", str(result)
    for word in EXPECTED[name]:
        assert word in result.message, str(result)
    assert result.inputs  # the learner can reproduce it
    assert "wrong" in result._repr_html_()


@pytest.mark.parametrize("exercise_id, name", [("ex01", "ex01_unreduced_chunk"), ("ex03", "ex03_widely_copied")])
def test_unreduced_chunk_passes_at_two_ranks_and_fails_at_three(exercise_id, name):
    result = grade(exercise_id, load(exercise_id, MUTANTS / f"{name}.py"))
    assert result.inputs["world_size"] == 3  # the first world size where forwarding originals goes wrong


def test_whole_buffer_bytes_comes_with_a_traffic_table():
    result = grade("ex01", load("ex01", MUTANTS / "ex01_whole_buffer_bytes.py"))
    assert result.traffic and not all(row.ok for row in result.traffic)
    assert "<-" in str(result)


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_solution_passes_quickly(exercise_id, monkeypatch):
    monkeypatch.setenv("RINGLAB_USE_SOLUTIONS", "1")
    start = time.perf_counter()
    result = grade(exercise_id)
    elapsed = time.perf_counter() - start
    assert result.status == "passed", str(result)
    assert result.cases > 10
    assert elapsed < 5.0  # the budget for one exercise on this machine


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_untouched_stub_is_not_attempted(exercise_id, monkeypatch):
    monkeypatch.delenv("RINGLAB_USE_SOLUTIONS", raising=False)
    monkeypatch.chdir(ROOT)
    result = grade(exercise_id)
    assert result.status == "not attempted", str(result)
    assert exercise_id in result.message


def test_committed_exercises_match_the_generator():
    for path, text in generate(ROOT / "solutions", ROOT / "exercises").items():
        assert path.read_text() == text, f"{path} is stale: run python -m ringlab.check.make_exercises"
    assert make_main(["--root", str(ROOT), "--check"]) == 0


def test_make_stub_keeps_indentation_and_signature():
    src = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert make_stub(src, "ex09") == (
        "def f(x):\n    '''doc'''\n    raise NotImplementedError(\"ex09: replace this line with your code\")\n")


@pytest.mark.parametrize("bad", ["### BEGIN SOLUTION\n", "### END SOLUTION\n",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n"])
def test_make_stub_refuses_unbalanced_markers(bad):
    with pytest.raises(ValueError):
        make_stub(bad, "ex01")


def test_grade_never_raises():
    assert grade("ex99").status == "wrong"
    assert grade("ex01", lambda arrays: 1 / 0).status == "wrong"
    assert "ZeroDivisionError" in grade("ex01", lambda arrays: 1 / 0).message
    assert grade("ex01", lambda arrays: (arrays, "nonsense")).status == "wrong"
    assert grade("ex02", lambda *a: "zero").status == "wrong"
    assert grade("ex03", lambda rank, n, data, exchange: None).status == "wrong"


def test_broken_learner_file_is_reported(tmp_path, monkeypatch):
    (tmp_path / "ex01_ring_allreduce.py").write_text("def ring_allreduce(arrays:\n")
    monkeypatch.setenv("RINGLAB_EXERCISES", str(tmp_path))
    monkeypatch.delenv("RINGLAB_USE_SOLUTIONS", raising=False)
    result = grade("ex01")
    assert result.status == "wrong" and "SyntaxError" in result.message


def test_hints_are_graded_and_bounded():
    for exercise_id, ex in EXERCISES.items():
        assert 2 <= len(ex.hints) <= 3
        assert hint(exercise_id, 1).startswith(f"{exercise_id} hint 1/")
    with pytest.raises(ValueError):
        hint("ex01", 4)
