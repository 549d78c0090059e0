"""Notebooks: committed executed in order with no errors, and their grader cells pass on the solutions."""

import ast
import json
from pathlib import Path

import pytest

from ringlab.check.golang import GO_MISSING
from solution_grades import graded_solution  # tests/ is on sys.path (rootdir-relative)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _code_cells(path):
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_outputs_come_from_one_clean_run(path):
    counts = [c["execution_count"] for c in _code_cells(path)]
    assert None not in counts, "a code cell was never executed"
    assert counts == list(range(1, len(counts) + 1)), f"execution counts out of order: {counts}"
    for cell in _code_cells(path):
        assert not [o for o in cell["outputs"] if o["output_type"] == "error"], "".join(cell["source"])


def _grader_cells():
    for path in NOTEBOOKS:
        for cell in _code_cells(path):
            if "grader" in cell.get("metadata", {}).get("tags", []):
                yield pytest.param("".join(cell["source"]), id=f"{path.stem}:{''.join(cell['source']).splitlines()[-1]}")


@pytest.mark.parametrize("source", list(_grader_cells()))
def test_grader_cell_passes_on_the_solutions(source, monkeypatch):
    """Run the cell with the solutions swapped in for the learner's files; its value must be 'passed'. Its
    ``grade("NN")`` shares the grading of the solution file with tests/check/graders (tests/solution_grades.py)."""
    monkeypatch.setenv("RINGLAB_USE_SOLUTIONS", "1")
    monkeypatch.setattr("ringlab.check.grade", graded_solution)
    monkeypatch.chdir(ROOT / "notebooks")
    tree = ast.parse(source)
    last = tree.body.pop()
    assert isinstance(last, ast.Expr), "a grader cell must end with the grade(...) expression"
    namespace: dict = {}
    exec(compile(tree, "<cell>", "exec"), namespace)
    result = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
    if result.message == GO_MISSING:  # 19b is Go: its grader needs `go`
        pytest.skip(GO_MISSING)
    assert result.status == "passed", str(result)


def test_committed_grader_cells_show_not_attempted():
    for path in NOTEBOOKS:
        for cell in _code_cells(path):
            if "grader" in cell.get("metadata", {}).get("tags", []):
                text = "".join("".join(o.get("data", {}).get("text/plain", "")) for o in cell["outputs"])
                assert "NOT ATTEMPTED" in text, f"{path.name}: {''.join(cell['source'])}"
