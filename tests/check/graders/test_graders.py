"""Graders against known-wrong answers (mutants), the solutions, and the untouched stubs."""

import importlib.util
from pathlib import Path

import pytest

from ringlab.check import EXERCISES, grade, hint, load
from ringlab.check.golang import GO_MISSING, go_command
from ringlab.course.make_exercises import generate, main as make_main, make_stub

from mutant_edits import EDITS, GO_EDITS, SOLUTIONS, mutated_source  # tests/ is on sys.path (rootdir-relative)
from solution_grades import graded_solution

ROOT = Path(__file__).resolve().parents[3]
MUTANTS = ROOT / "tests" / "mutants"

MUTANT_FILES = sorted(MUTANTS.glob("[0-9][0-9][a-z]_*.py"))
# 03a's mutants deadlock or misorder sends among threads: the grader waits out its timeouts
MUTANT_PARAMS = [pytest.param(p, marks=pytest.mark.slow) if p.stem.startswith("03a_") else p for p in MUTANT_FILES]


def _expected_words(path):
    """Each mutant file declares EXPECT: the words the grader's message must contain."""
    spec = importlib.util.spec_from_file_location(f"mutant_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EXPECT


@pytest.mark.parametrize("path", MUTANT_PARAMS, ids=lambda p: p.stem)
def test_mutant_is_rejected_with_a_useful_message(path):
    exercise_id = path.stem.split("_", 1)[0]
    result = grade(exercise_id, load(exercise_id, path))
    assert result.status == "wrong", str(result)
    for word in _expected_words(path):
        assert word in result.message, str(result)
    assert result.inputs  # the learner can reproduce it
    assert "wrong" in result._repr_html_()


@pytest.mark.parametrize("name", sorted(EDITS))
def test_edited_solution_is_rejected_with_a_useful_message(name, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(mutated_source(name))  # a real file: Triton reads a kernel's source from it
    exercise_id = name.split("_", 1)[0]
    result = grade(exercise_id, load(exercise_id, path))
    assert result.status == "wrong", str(result)
    for word in EDITS[name][2]:
        assert word in result.message, str(result)
    assert result.inputs


def test_an_edit_that_no_longer_fits_the_solution_is_refused(monkeypatch):
    monkeypatch.setitem(EDITS, "12a_stale", ("12_triton_layernorm.py", [("no such line", "x", 1)], [], ""))
    with pytest.raises(ValueError, match="expected 1 x 'no such line'"):
        mutated_source("12a_stale")


def test_every_exercise_has_mutants():
    covered = {p.stem.split("_", 1)[0] for p in MUTANT_FILES} | {name.split("_", 1)[0] for name in [*EDITS, *GO_EDITS]}
    assert set(EXERCISES) <= covered, f"exercises without known-wrong answers: {set(EXERCISES) - covered}"


@pytest.mark.parametrize("exercise_id, name", [("01a", "01a_unreduced_chunk"), ("01c", "01c_widely_copied")])
def test_unreduced_chunk_passes_at_two_ranks_and_fails_at_three(exercise_id, name):
    result = grade(exercise_id, load(exercise_id, MUTANTS / f"{name}.py"))
    assert result.inputs["world_size"] == 3  # the first world size where forwarding originals goes wrong


def test_whole_buffer_bytes_comes_with_a_traffic_table():
    result = grade("01a", load("01a", MUTANTS / "01a_whole_buffer_bytes.py"))
    assert result.traffic and not all(row.ok for row in result.traffic)
    assert "<-" in str(result)


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_solution_passes(exercise_id, monkeypatch):
    if EXERCISES[exercise_id].file.endswith(".go") and go_command() is None:
        pytest.skip(GO_MISSING)
    monkeypatch.setenv("RINGLAB_USE_SOLUTIONS", "1")
    result = graded_solution(exercise_id)  # shared with the notebook's grader cell (tests/test_notebooks.py)
    assert result.status == "passed", str(result)
    assert result.cases > 10  # edge cases and drawn cases, not one happy path


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_untouched_stub_is_not_attempted(exercise_id, monkeypatch):
    monkeypatch.delenv("RINGLAB_USE_SOLUTIONS", raising=False)
    monkeypatch.chdir(ROOT)
    result = grade(exercise_id)
    assert result.status == "not attempted", str(result)
    assert exercise_id in result.message


def test_committed_exercises_match_the_generator():
    for path, text in generate(ROOT / "solutions", ROOT / "exercises").items():
        assert path.read_text() == text, f"{path} is stale: run python -m ringlab.course.make_exercises"
    assert make_main(["--root", str(ROOT), "--check"]) == 0


def test_make_stub_keeps_indentation_and_signature():
    src = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n"
    assert make_stub(src, "06a") == (
        "def f(x):\n    '''doc'''\n    raise NotImplementedError(\"06a: replace this line with your code\")\n")


@pytest.mark.parametrize("bad", ["### BEGIN SOLUTION\n", "### END SOLUTION\n",
                                 "### BEGIN SOLUTION\n### BEGIN SOLUTION\n"])
def test_make_stub_refuses_unbalanced_markers(bad):
    with pytest.raises(ValueError):
        make_stub(bad, "01a")


def test_grade_never_raises():
    assert grade("ex99").status == "wrong"
    assert grade("01a", lambda arrays: 1 / 0).status == "wrong"
    assert "ZeroDivisionError" in grade("01a", lambda arrays: 1 / 0).message
    assert grade("01a", lambda arrays: (arrays, "nonsense")).status == "wrong"
    assert grade("01b", lambda *a: "zero").status == "wrong"
    assert grade("01c", lambda rank, n, data, exchange: None).status == "wrong"


def test_broken_learner_file_is_reported(tmp_path, monkeypatch):
    (tmp_path / "01_ring_allreduce.py").write_text("def ring_allreduce(arrays:\n")
    monkeypatch.setenv("RINGLAB_EXERCISES", str(tmp_path))
    monkeypatch.delenv("RINGLAB_USE_SOLUTIONS", raising=False)
    result = grade("01a")
    assert result.status == "wrong" and "SyntaxError" in result.message


def test_hints_are_graded_and_bounded():
    for exercise_id, ex in EXERCISES.items():
        assert 2 <= len(ex.hints) <= 3
        assert hint(exercise_id, 1).startswith(f"{exercise_id} hint 1/")
    with pytest.raises(ValueError):
        hint("01a", 4)


def test_loading_a_non_python_file_is_a_clear_error():
    with pytest.raises(ValueError, match="not a Python file"):
        load("01a", ROOT / "README.md")


def test_numbers_follow_one_rule_across_graders(tmp_path):
    """37 and 37.0 are the same answer everywhere: 09a takes ints for float metrics, 05a floats for byte counts."""
    from ringlab.check.loader import load

    src = (SOLUTIONS / "09_gpu_monitor.py").read_text()
    ints = src.replace("row[key] = float(match.group(1)) if match else None",
                       "row[key] = (int(float(match.group(1))) if float(match.group(1)).is_integer() "
                       "else float(match.group(1))) if match else None")
    assert ints != src
    path = tmp_path / "09_gpu_monitor.py"
    path.write_text(ints)
    assert grade("09a", load("09a", path)).status == "passed"
    kv = (SOLUTIONS / "05_kv_cache.py").read_text().replace("return per_token * held * batch_size",
                                                               "return float(per_token * held * batch_size)")
    path = tmp_path / "05_kv_cache.py"
    path.write_text(kv)
    assert grade("05a", load("05a", path)).status == "passed"


def test_reveal_collapses_worked_answers_and_revealed_captures_prints(capsys, monkeypatch):
    from ringlab.check import Reveal, revealed

    shown = Reveal("x < y & done", "Worked answer")
    assert shown._repr_html_() == "<details><summary>Worked answer</summary><pre>x &lt; y &amp; done</pre></details>"
    assert repr(shown) == "# Worked answer\nx < y & done"
    displayed = []
    monkeypatch.setattr("IPython.display.display", displayed.append)
    with revealed("Answer"):
        print("42 B")
    assert capsys.readouterr().out == "" and [d.text for d in displayed] == ["42 B"]
