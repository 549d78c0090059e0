"""The course map behind notebooks/00_start_here.ipynb and the progress of ``ringlab check --all``."""

from ringlab.check import EXERCISES
from ringlab.check.result import GradeResult
from ringlab.check.topics import CourseMap, Progress, start_here
from ringlab.course import RECOMMENDED_ORDER, TOPICS, get_topic


def _progress(statuses):
    exs = list(EXERCISES.values())[:len(statuses)]
    return Progress([(ex, GradeResult(ex.id, ex.function, st, "")) for ex, st in zip(exs, statuses)]), exs


def test_progress_rows_and_count_match_the_grades():
    progress, exs = _progress(["passed", "wrong", "not attempted"])
    lines = str(progress).splitlines()
    assert lines[1].split()[:3] == [exs[0].id, exs[0].topic.slug, "passed"]
    assert lines[2].split()[2] == "wrong"
    assert lines[-1] == "1/3 passed"
    assert progress.status(exs[1].id) == "wrong" and progress.status("00z") == "unknown"


def test_course_map_links_each_notebook_in_the_recommended_order_and_escapes_titles():
    topic = get_topic("05")
    progress, _ = _progress(["passed"])
    page = CourseMap([get_topic("01"), topic], progress)
    html = page._repr_html_()
    assert f"<a href='{topic.stem}.ipynb'>" in html and "01a passed" in html
    assert "after 01, 02" in str(CourseMap([get_topic("04")], progress))
    assert "needs torch, triton" in str(CourseMap([get_topic("12")], progress))
    assert "1/1 exercises passed" in str(page)
    escaped = CourseMap([type(topic)(**{**topic.__dict__, "title": "A <b>&</b> B"})], progress)._repr_html_()
    assert "A &lt;b&gt;&amp;&lt;/b&gt; B" in escaped


def test_start_page_lists_every_topic_once(monkeypatch):
    monkeypatch.setattr("ringlab.check.topics.progress", lambda: _progress(["passed"])[0])
    page = start_here()
    assert [t.id for t in page.topics] == list(RECOMMENDED_ORDER)
    assert sorted(t.id for t in page.topics) == sorted(t.id for t in TOPICS)
