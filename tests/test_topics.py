"""The course map behind notebooks/00_start_here.ipynb (ringlab.check.topics)."""

from pathlib import Path

import nbformat
import pytest

from ringlab.check import EXERCISES
from ringlab.check.result import GradeResult
from ringlab.check.topics import TEACHES, CourseMap, Progress, discover, read_topic

ROOT = Path(__file__).resolve().parents[1]


def _notebook(path, cells):
    nb = nbformat.v4.new_notebook()
    for kind, src, *tags in cells:
        cell = nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
        if tags:
            cell.metadata["tags"] = tags
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def test_title_is_the_first_heading_and_exercises_come_from_grader_cells(tmp_path):
    path = _notebook(tmp_path / "03_demo.ipynb", [
        ("md", "Some intro without a heading"),
        ("md", "text\n## 03 · A demo\n# later heading"),
        ("code", 'grade("ex99")'),  # not tagged: not an exercise of this notebook
        ("code", 'from ringlab.check import grade\ngrade("ex06")', "grader"),
        ("code", "grade('ex07')\ngrade('ex06')", "grader"),
    ])
    topic = read_topic(path)
    assert (topic.number, topic.title, topic.exercises) == ("03", "03 · A demo", ("ex06", "ex07"))
    assert topic.teaches == TEACHES["03"]


def test_a_notebook_without_heading_is_titled_by_its_file_name(tmp_path):
    assert read_topic(_notebook(tmp_path / "99_x.ipynb", [("code", "1")])).title == "99_x"


def test_bad_file_names_are_refused(tmp_path):
    with pytest.raises(ValueError, match="NN_topic.ipynb"):
        read_topic(tmp_path / "start.ipynb")


def test_discover_skips_the_start_page_and_other_files(tmp_path):
    for name in ["02_b.ipynb", "00_start_here.ipynb", "01_a.ipynb", "scratch.ipynb", "1_short.ipynb"]:
        _notebook(tmp_path / name, [("md", f"# {name}")])
    assert [t.path.name for t in discover(tmp_path)] == ["01_a.ipynb", "02_b.ipynb"]


def test_every_project_notebook_has_a_line_saying_what_it_teaches():
    topics = discover(ROOT / "notebooks")
    assert topics
    assert [t.path.name for t in topics if not t.teaches] == []


def _progress(statuses):
    exs = list(EXERCISES.values())[:len(statuses)]
    return Progress([(ex, GradeResult(ex.id, ex.function, st, "")) for ex, st in zip(exs, statuses)]), exs


def test_progress_rows_and_count_match_the_grades():
    progress, exs = _progress(["passed", "wrong", "not attempted"])
    lines = str(progress).splitlines()
    assert lines[1].split()[:3] == [exs[0].id, exs[0].problem, "passed"]
    assert lines[2].split()[2] == "wrong"
    assert lines[-1] == "1/3 passed"
    assert progress.status(exs[1].id) == "wrong" and progress.status("ex00") == "unknown"


def test_course_map_links_each_notebook_and_escapes_titles(tmp_path):
    _notebook(tmp_path / "01_a.ipynb", [("md", "# A <b>&</b> B"), ("code", 'grade("ex01")', "grader")])
    progress, _ = _progress(["passed"])
    page = CourseMap(discover(tmp_path), progress)
    assert "<a href='01_a.ipynb'>A &lt;b&gt;&amp;&lt;/b&gt; B</a>" in page._repr_html_()
    assert "ex01 passed" in page._repr_html_() and "1/1 exercises passed" in str(page)
