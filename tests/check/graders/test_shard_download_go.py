"""Exercise 19b (Go): the grader calls the untouched stub not attempted, reports a build error, says how to
install Go where it is missing, and catches every known-wrong answer (tests/mutant_edits.py GO_EDITS) with a
message naming the mistake (tests/check/graders/test_graders.py checks that it passes the worked solution).
Skipped with the reason where `go` is missing."""

import pytest

from mutant_edits import GO_EDITS, GO_SOLUTION, go_mutated_source  # tests/ is on sys.path
from ringlab.check import grade, load
from ringlab.check.golang import GO_MISSING, go_command

needs_go = pytest.mark.skipif(go_command() is None, reason=GO_MISSING)
pytest.importorskip("safetensors", reason="the 19b grader serves a safetensors checkpoint (pip install -e '.[shards]')")


def test_untouched_stub_is_not_attempted_without_building(monkeypatch, tmp_path):
    monkeypatch.delenv("RINGLAB_USE_SOLUTIONS", raising=False)
    monkeypatch.setattr("ringlab.check.golang.go_command", lambda: None)  # the stub is recognised before any build
    result = grade("19b")
    assert result.status == "not attempted", str(result)
    assert "19b" in result.message and "go/shards/exercise/download.go" in str(result)
    assert "ringlab check 19b" in str(result)


def test_without_go_the_verdict_says_how_to_install_it(monkeypatch, tmp_path):
    path = tmp_path / "download.go"
    path.write_text(GO_SOLUTION.read_text())
    monkeypatch.setattr("ringlab.check.golang.go_command", lambda: None)
    result = grade("19b", load("19b", path))
    assert result.status == "not attempted" and "golang-go" in result.message, str(result)


@needs_go
def test_a_file_that_does_not_compile_is_wrong_with_gos_message(tmp_path):
    path = tmp_path / "download.go"
    path.write_text(GO_SOLUTION.read_text().replace("return writeAtomically(", "return writeAtomicaly(", 1))
    result = grade("19b", load("19b", path))
    assert result.status == "wrong" and "go vet" in result.message and "writeAtomicaly" in result.message, str(result)


@needs_go
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(GO_EDITS))
def test_known_wrong_answer_is_rejected_naming_the_mistake(name, tmp_path):
    path = tmp_path / f"{name}.go"
    path.write_text(go_mutated_source(name))
    result = grade("19b", load("19b", path))
    assert result.status == "wrong", str(result)
    for word in GO_EDITS[name][1]:
        assert word in result.message, str(result)
    assert result.inputs["scenario"]  # the learner can reproduce it: the server's fault script is in the verdict


def test_every_go_edit_still_fits_the_solution():
    for name in GO_EDITS:
        assert go_mutated_source(name) != GO_SOLUTION.read_text(), name


@needs_go
def test_a_panic_is_reported_with_go_s_message(tmp_path):
    path = tmp_path / "download.go"
    path.write_text(GO_SOLUTION.read_text().replace(
        "\tif err := opts.Validate(); err != nil {",
        "\tif opts.Concurrency > 0 {\n\t\tpanic(\"a bug in Download\")\n\t}\n\tif err := opts.Validate(); err != nil {", 1))
    result = grade("19b", load("19b", path))
    assert result.status == "wrong", str(result)
    assert "ended before Download returned" in result.message and "a bug in Download" in result.message, str(result)
