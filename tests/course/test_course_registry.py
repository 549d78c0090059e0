"""One topic, one number: every artifact of a topic is found from its registry entry, and nothing in the
tree is outside the registry."""

import importlib
import json
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from ringlab.check import EXERCISES, get_exercise, grade, load
from ringlab.check.cards import card_ids, load_card
from ringlab.check.registry import RenamedIdWarning
from ringlab.course import RECOMMENDED_ORDER, TOPICS, get_topic, resolve_card, resolve_exercise

ROOT = Path(__file__).resolve().parents[2]
TOPIC_IDS = [t.id for t in TOPICS]


@pytest.mark.parametrize("topic", TOPICS, ids=TOPIC_IDS)
def test_every_listed_artifact_exists(topic):
    for path in (topic.notebook, topic.exercise_file, topic.solution_file, topic.card_file, *topic.tests):
        assert (ROOT / path).exists(), f"topic {topic.id}: {path} is missing"
    assert re.fullmatch(r"\d\d", topic.id) and re.fullmatch(r"[a-z][a-z0-9_]*", topic.slug)
    assert topic.minutes > 0 and set(topic.needs) <= {"torch", "triton", "httpx", "safetensors"}


@pytest.mark.parametrize("topic", TOPICS, ids=TOPIC_IDS)
def test_listed_modules_import(topic):
    for name in (*topic.implements, *topic.draws, topic.grader_module):
        importlib.import_module(name)


@pytest.mark.parametrize("topic", TOPICS, ids=TOPIC_IDS)
def test_notebook_heading_is_the_registry_title_and_grades_the_topics_exercises(topic):
    cells = json.loads((ROOT / topic.notebook).read_text())["cells"]
    heading = next(line for c in cells if c["cell_type"] == "markdown" for line in "".join(c["source"]).splitlines()
                   if line.startswith("# "))
    assert heading == f"# {topic.id} · {topic.title}"
    graded = [ex for c in cells if "grader" in c.get("metadata", {}).get("tags", [])
              for ex in re.findall(r"""grade\(\s*["'](\w+)["']""", "".join(c["source"]))]
    assert sorted(set(graded)) == sorted(ex.id for ex in topic.exercises)


@pytest.mark.parametrize("topic", TOPICS, ids=TOPIC_IDS)
def test_exercise_file_defines_each_exercise_function(topic):
    for ex in topic.exercises:
        if ex.file:  # another language (19b, Go): its own learner's and solution files
            for path in (ex.file, ex.solution_file):
                source = (ROOT / path).read_text()
                assert re.search(rf"^func {ex.function}\(", source, re.M), f"{path}: {ex.function}"
            continue
        for folder in ("exercises", "solutions"):
            source = (ROOT / folder / f"{topic.stem}.py").read_text()
            assert re.search(rf"^(async def|def|class) {ex.function}\b", source, re.M), \
                f"{folder}/{topic.stem}.py: {ex.function}"
        assert get_exercise(ex.id).module == topic.stem and get_exercise(ex.id).function == ex.function


def test_card_of_every_topic_loads_by_number():
    assert set(card_ids()) == set(TOPIC_IDS)
    for topic in TOPICS:
        assert load_card(topic.id).title


def test_nothing_in_the_tree_is_outside_the_registry():
    """Every notebook, exercise, solution, card and grader module belongs to a registered topic."""
    stems = {t.stem for t in TOPICS}
    notebooks = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")} - {"00_start_here"}
    assert notebooks == stems
    assert {p.stem for p in (ROOT / "exercises").glob("*.py")} == {t.stem for t in TOPICS if t.exercises}
    assert {p.stem for p in (ROOT / "solutions").glob("*.py")} == {t.stem for t in TOPICS if t.exercises}
    assert {p.stem for p in (ROOT / "ringlab/check/cards").glob("*.md")} == set(TOPIC_IDS)
    graders = {p.stem for p in (ROOT / "ringlab/check/graders").glob("*.py")} - {"__init__"}
    assert graders == {t.slug for t in TOPICS if t.exercises}
    assert set(EXERCISES) == {ex.id for t in TOPICS for ex in t.exercises}
    for path in (ROOT / "tests/mutants").glob("*.py"):
        assert path.stem.split("_", 1)[0] in EXERCISES, f"{path.name} does not start with an exercise id"


def test_recommended_order_is_every_topic_once_with_prerequisites_first():
    assert sorted(RECOMMENDED_ORDER) == sorted(TOPIC_IDS)
    seen = set()
    for topic_id in RECOMMENDED_ORDER:
        assert set(get_topic(topic_id).prerequisites) <= seen, f"{topic_id} comes before a prerequisite"
        seen.add(topic_id)


def test_topic_is_found_by_number_slug_exercise_and_old_ids():
    assert get_topic("5") is get_topic("05") is get_topic("kv_cache") is get_topic("05a") is get_topic("ex08")
    assert get_topic("P5") is get_topic("P05") is get_topic("05")
    with pytest.raises(ValueError, match="kv_cache"):
        get_topic("kv-cache")


def test_old_ids_resolve_with_a_note_naming_the_new_one():
    assert resolve_exercise("ex08") == ("05a", "ex08 is now 05a (topic 05 kv_cache)")
    assert resolve_exercise("05a") == ("05a", None) and resolve_exercise("05") == ("05a", None)
    assert resolve_card("P12") == ("02", "card P12 is now 02 (topic 02 collectives_and_costs)")
    with pytest.raises(ValueError, match="known"):
        resolve_exercise("01")  # topic 01 has three exercises: name one
    with pytest.raises(ValueError, match="known"):
        resolve_card("P99")
    with pytest.warns(RenamedIdWarning, match="ex01 is now 01a"):
        assert get_exercise("ex01").id == "01a"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RenamedIdWarning)
        assert grade("ex02", load("ex02")).exercise == "01b"


def test_old_ids_are_unique_and_every_exercise_is_lettered_in_order():
    old = [ex.old_id for t in TOPICS for ex in t.exercises if ex.old_id]
    assert len(old) == len(set(old))
    for topic in TOPICS:
        assert [ex.id for ex in topic.exercises] == [f"{topic.id}{chr(97 + i)}" for i in range(len(topic.exercises))]


def test_pytest_marker_selects_a_topics_tests():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "kv_cache", "-p",
                          "no:cacheprovider", str(ROOT / "tests")], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    files = {line.split("::")[0] for line in out.stdout.splitlines() if "::" in line}
    assert files and files <= {path for path in get_topic("05").tests}, files


def test_cli_check_accepts_a_topic_and_an_old_id(tmp_path):
    env_run = dict(capture_output=True, text=True, cwd=ROOT, timeout=300)
    out = subprocess.run([sys.executable, "-m", "ringlab", "check", "ex09"], **env_run)
    assert "note: ex09 is now 06a" in out.stderr and "06a" in out.stdout
    out = subprocess.run([sys.executable, "-m", "ringlab", "check", "kv-cache"], **env_run)
    assert out.returncode == 2 and "unknown exercise or topic" in out.stderr


def test_cli_topic_lists_every_artifact_of_a_topic():
    from ringlab.commands.topic import describe

    for topic in TOPICS:
        text = describe(topic)
        for path in (topic.notebook, topic.exercise_file, topic.solution_file, topic.card_file, topic.grader_module,
                     f"pytest -m {topic.marker}", *topic.tests, *topic.implements):
            assert path in text, f"ringlab topic {topic.id} does not name {path}"
    out = subprocess.run([sys.executable, "-m", "ringlab", "topic"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    rows = [line[:2] for line in out.stdout.splitlines()[2:] if line[:2].isdigit()]  # under the header row
    assert out.returncode == 0 and out.stdout.startswith("id ") and rows == list(RECOMMENDED_ORDER)
    out = subprocess.run([sys.executable, "-m", "ringlab", "topic", "P5"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("topic 05 kv_cache")


def test_worked_answer_of_a_multi_exercise_topic_is_that_exercise_only():
    from ringlab.check import worked_answer

    shown = repr(worked_answer("01b"))
    assert "def ring_chunk_to_send" in shown and "def ring_allreduce" not in shown
    assert "### BEGIN SOLUTION" not in shown
    whole = repr(worked_answer("05a"))
    assert "def kv_cache_bytes" in whole and whole.count('"""') >= 2  # the file, docstring included


def test_stubs_name_the_exercise_of_the_function_they_sit_in():
    text = (ROOT / "exercises" / "01_ring_allreduce.py").read_text()
    stubs = re.findall(r'NotImplementedError\("(\w+): ', text)
    assert stubs == ["01a", "01b", "01c"]


def readme_topics_table() -> str:
    """The README's topic table, written from the registry in the recommended order."""
    lines = ["| # | notebook | what it teaches | exercises | after | time |", "|---|---|---|---|---|---|"]
    for topic_id in RECOMMENDED_ORDER:
        t = get_topic(topic_id)
        exercises = ", ".join(ex.id for ex in t.exercises) or "-"
        needs = f", needs {' + '.join(t.needs)}" if t.needs else ""
        lines.append(f"| {t.id} | [`{t.stem}`]({t.notebook}) | {t.teaches} | {exercises} | "
                     f"{', '.join(t.prerequisites) or '-'} | {t.minutes} min{needs} |")
    return "\n".join(lines)


def test_readme_lists_every_topic_as_the_registry_does():
    readme = (ROOT / "README.md").read_text()
    assert readme_topics_table() in readme, ("README's topic table differs from the registry; paste:\n"
                                             + readme_topics_table())
