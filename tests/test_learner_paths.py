"""Every name a learner reads points somewhere.

Text a learner reads: every notebook cell (source and text outputs), the practice cards, the README,
CONTRIBUTING.md and docs/, and the docstrings, comments and messages (string literals) of ringlab/,
exercises/ and solutions/; plus what the CLI prints for each topic and what ``grade()`` says for each
exercise. In all of it:

- every repository path (``exercises/05_kv_cache.py``, ``tests/fixtures/nccl/`` ...) exists, and every relative
  markdown link resolves from the file that holds it;
- every exercise id (``05a``) is registered, and an old exercise id (``ex08``) or problem-set card id (``P5``)
  appears only in the rename table and the few modules that accept old ids on input;
- nothing cites files the learner does not have (the maintainers' problem set and design notes, or the
  folder beside the repository they live in), and no notebook, card or page tells the project's history.

Also here: the properties that keep JupyterLab from marking a notebook modified the moment it is opened.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from ringlab.course import TOPICS, exercise_refs

ROOT = Path(__file__).resolve().parents[1]

# A repository path: one of the top-level folders, then path characters; not part of a longer path
# (an absolute path or a URL is not a repository path).
PATH = re.compile(r"(?<![\w./-])((?:exercises|solutions|notebooks|ringlab|docs|tests|benchmarks|go)/[\w./*{}<>-]*)")
# Placeholders in a path that names a family of files (``exercises/NN_slug.py``, ``docs/tour_*.png``).
TEMPLATE = re.compile(r"NN|slug|\*|<|\{|\.\.\.|XX")
EXERCISE_ID = re.compile(r"(?<![\w.:%/-])((?:0[1-9]|[1-9][0-9])[a-f])(?![\w-])")  # not "{n:02d}", "7b/13b"
OLD_EXERCISE_ID = re.compile(r"(?<![\w.-])(ex\d\d)(?![\w-])")
# A problem-set card id; "P5" also names an AWS instance family, which is allowed in that sense.
OLD_CARD_ID = re.compile(r"(?<![\w.-])(P\d{1,2})(?![\w-])")
AWS_P5 = re.compile(r"(?:EC2|AWS) P5|P5 \(p5")
NOT_THE_LEARNERS = re.compile(r"PROBLEMS(?:\.md)?\b|DESIGN\.md|\.\./shared")
HISTORY = re.compile(r"\bwas ex\d\d|\bwas P\d|formerly|the newer ones|renamed from|used to be called|old id"
                     r"|the old (?:notebook|card|version|exercise)",
                     re.IGNORECASE)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")

# The modules that accept an old id on input and document that they do; nowhere else names one.
RENAME_MODULES = {"ringlab/course/registry.py", "ringlab/check/registry.py", "ringlab/check/cards/__init__.py",
                  "ringlab/check/__init__.py", "ringlab/commands/check.py", "ringlab/commands/topic.py",
                  "ringlab/commands/practice.py"}


def _old_ids() -> tuple[set[str], set[str]]:
    return ({ex.old_id for t in TOPICS for ex in t.exercises if ex.old_id},
            {t.old_card for t in TOPICS if t.old_card})


def _python_text(path: Path) -> str:
    """The docstrings, comments and string literals of a Python file (what a reader or a user sees)."""
    parts = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING) or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            parts.append(tok.string)
    return "\n".join(parts)


def _notebook_text(path: Path) -> str:
    parts = []
    for cell in json.loads(path.read_text())["cells"]:
        parts.append("".join(cell["source"]))
        for out in cell.get("outputs", []):
            parts.append("".join(out.get("text", "")))
            parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def learner_texts(root: Path = ROOT) -> dict[str, str]:
    """Relative file name -> the text of it a learner reads (see the module docstring)."""
    texts = {}
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        texts[str(path.relative_to(root))] = _notebook_text(path)
    markdown = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md")),
                *sorted((root / "ringlab").rglob("*.md")), root / "go" / "README.md"]
    for path in markdown:
        if path.is_file():
            texts[str(path.relative_to(root))] = path.read_text()
    for folder in ("ringlab", "exercises", "solutions"):
        for path in sorted((root / folder).rglob("*.py")):
            texts[str(path.relative_to(root))] = _python_text(path)
    for path in sorted((root / "go").rglob("*.go")):  # exercise 19b: the learner reads the Go module too
        texts[str(path.relative_to(root))] = path.read_text()
    return texts


def broken_paths(name: str, text: str, root: Path = ROOT) -> list[str]:
    """Repository paths in ``text`` that do not exist under ``root`` (placeholders are skipped)."""
    bad = []
    for match in PATH.finditer(text):
        path = match.group(1).split("::")[0].rstrip(".,;:")
        if TEMPLATE.search(path):
            continue
        if not (root / path).exists():
            bad.append(f"{name}: {path}")
    return bad


def broken_links(name: str, text: str, root: Path = ROOT) -> list[str]:
    """Relative markdown links in ``text`` that do not resolve from the folder of ``name``."""
    bad = []
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.DOTALL))  # code is not a link
    for target in MARKDOWN_LINK.findall(prose):
        target = target.split("#")[0]
        if not target or re.match(r"^[a-z]+:", target):
            continue
        if not ((root / name).parent / target).exists():
            bad.append(f"{name}: link {target}")
    return bad


def id_problems(name: str, text: str) -> list[str]:
    """Unregistered exercise ids, old ids outside the rename modules, and citations of the maintainers' files."""
    registered = set(exercise_refs())
    old_exercises, old_cards = _old_ids()
    bad = [f"{name}: exercise {i} is not registered" for i in EXERCISE_ID.findall(text) if i not in registered]
    for old in OLD_EXERCISE_ID.findall(text):
        if old not in old_exercises:
            bad.append(f"{name}: {old} is no exercise, old or new")
        elif name not in RENAME_MODULES:
            bad.append(f"{name}: old id {old} (say {dict(_renames())[old]})")
    if name not in RENAME_MODULES:
        for match in OLD_CARD_ID.finditer(AWS_P5.sub("", text)):
            if match.group(1) in old_cards:
                bad.append(f"{name}: old card id {match.group(1)} (say card {dict(_renames())[match.group(1)]})")
    bad += [f"{name}: cites {m.group(0)}, which learners do not have" for m in NOT_THE_LEARNERS.finditer(text)]
    return bad


def _renames() -> list[tuple[str, str]]:
    return ([(ex.old_id, ex.id) for t in TOPICS for ex in t.exercises if ex.old_id]
            + [(t.old_card, t.id) for t in TOPICS if t.old_card])


def history(name: str, text: str) -> list[str]:
    if name in RENAME_MODULES:
        return []
    return [f"{name}: {m.group(0)!r}" for m in HISTORY.finditer(text)]


TEXTS = learner_texts()
PROSE = {name: text for name, text in TEXTS.items() if not name.endswith(".py") or "/cards/" in name}


def test_the_learners_texts_are_found():
    assert len([n for n in TEXTS if n.startswith("notebooks/")]) == len(TOPICS) + 1
    assert {"README.md", "ringlab/check/cards/05.md", "exercises/05_kv_cache.py", "ringlab/check/result.py"} <= set(TEXTS)


def test_every_path_a_learner_reads_exists():
    bad = [b for name, text in TEXTS.items() for b in broken_paths(name, text)]
    assert not bad, "paths that do not exist:\n" + "\n".join(bad)


def test_every_markdown_link_resolves():
    bad = [b for name, text in TEXTS.items() if not name.endswith(".py") for b in broken_links(name, text)]
    assert not bad, "links that do not resolve:\n" + "\n".join(bad)


def test_every_id_a_learner_reads_is_registered_and_current():
    bad = [b for name, text in TEXTS.items() for b in id_problems(name, text)]
    assert not bad, "\n".join(bad)


def test_no_project_history_in_notebooks_cards_and_pages():
    bad = [b for name, text in PROSE.items() for b in history(name, text)]
    assert not bad, "internal history a learner cannot use:\n" + "\n".join(bad)


@pytest.mark.parametrize("text, found", [
    ("open `exercises/ex16_nvlink_fabric.py`", "path"),
    ("see [the notes](notebooks/99_nothing.ipynb)", "path"),
    ("graded as 05d", "id"), ("as in PROBLEMS.md P14", "id"), ("(was ex08)", "id"), ("card P13's numbers", "id"),
    ("../shared/DESIGN.md", "id"), ("ex99", "id"),
])
def test_the_checks_catch_what_they_are_for(text, found):
    """Each kind of broken name is caught: the checks above are not vacuous."""
    name = "notebooks/05_kv_cache.ipynb"
    caught = broken_paths(name, text) + broken_links(name, text) if found == "path" else id_problems(name, text)
    assert caught, text


@pytest.mark.parametrize("text", ["llama-2-70b and gpt-oss-20b", "an AWS EC2 P5 instance", "P = 8 stages, (P-1)/M",
                                  "exercises/NN_slug.py", "0x7f3a", "for 30s", "see exercises/05_kv_cache.py."])
def test_the_checks_leave_alone_what_is_fine(text):
    name = "notebooks/05_kv_cache.ipynb"
    assert not broken_paths(name, text) + id_problems(name, text) + history(name, text), text


def test_the_command_line_names_existing_files_and_current_ids(capsys):
    """``ringlab topic NN`` for every topic: its paths exist, its ids are registered and current."""
    from ringlab.commands.topic import main

    for topic in TOPICS:
        assert main([topic.id]) == 0
        out = capsys.readouterr().out
        assert topic.exercise_file in out and topic.notebook in out
        problems = broken_paths(f"ringlab topic {topic.id}", out) + id_problems(f"ringlab topic {topic.id}", out)
        assert not problems + history("ringlab topic", out), problems


def test_not_attempted_names_the_file_to_edit_and_the_command(tmp_path, monkeypatch):
    """An untouched stub, and a missing file: the verdict says which file to edit and how to grade it."""
    from ringlab.check import grade
    from ringlab.course.make_exercises import generate

    stubs = generate(ROOT / "solutions", tmp_path / "exercises")
    for path, text in stubs.items():
        path.parent.mkdir(parents=True, exist_ok=True)  # a Go exercise's file sits deeper (19b)
        path.write_text(text)
    monkeypatch.setenv("RINGLAB_EXERCISES", str(tmp_path / "exercises"))
    monkeypatch.delenv("RINGLAB_USE_SOLUTIONS", raising=False)
    for ex_id, (topic, ref) in exercise_refs().items():
        if any(importlib.util.find_spec(name) is None for name in topic.needs):
            continue  # its grader reports what is missing instead; the path check below still covers its topic
        result = grade(ex_id)
        assert result.status == "not attempted", str(result)
        for shown in (str(result), result._repr_html_()):
            assert (ref.file or topic.exercise_file) in shown and f"ringlab check {ex_id}" in shown, shown
        assert not broken_paths(f"grade({ex_id})", str(result)) + id_problems(f"grade({ex_id})", str(result))
    (tmp_path / "exercises" / "05_kv_cache.py").unlink()
    missing = grade("05a")
    assert missing.status == "not attempted" and "exercises/05_kv_cache.py" in str(missing), str(missing)


# JupyterLab writes the running kernel's spec and language into a notebook's metadata when it opens it, and
# adds an id to each cell of a notebook older than format 4.5: any difference marks the notebook modified
# before the learner has typed anything (and its autosave then rewrites the committed file).
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_opening_a_notebook_changes_nothing(path):
    nb = json.loads(path.read_text())
    assert (nb["nbformat"], nb["nbformat_minor"]) >= (4, 5), "cell ids need nbformat 4.5"
    ids = [cell.get("id") for cell in nb["cells"]]
    assert all(ids) and len(set(ids)) == len(ids), "every cell needs an id of its own"
    kernelspec = pytest.importorskip("ipykernel.kernelspec")
    spec = kernelspec.get_kernel_dict()
    assert nb["metadata"]["kernelspec"] == {"name": kernelspec.KERNEL_NAME, "display_name": spec["display_name"],
                                            "language": spec["language"]}
    kernel = pytest.importorskip("ipykernel.ipkernel").IPythonKernel
    expected = {k: v for k, v in kernel.language_info.items() if k != "version"}
    got = {k: v for k, v in nb["metadata"]["language_info"].items() if k != "version"}
    # the Python version is the one that executed the notebook; another interpreter writes its own
    assert got == expected


# `make lab`: JupyterLab on the repository root, the start page open.

def test_lab_command_serves_the_root_with_the_start_page(monkeypatch):
    from ringlab.course.lab import START_PAGE, lab_argv

    monkeypatch.setattr("os.geteuid", lambda: 1000)
    argv = lab_argv(ROOT, "--no-browser", executable="jupyter-lab")
    assert argv[0] == "jupyter-lab" and argv[-1] == "--no-browser" and "--allow-root" not in argv
    assert str(ROOT / START_PAGE) in argv and f"--ServerApp.root_dir={ROOT}" in argv
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert "--allow-root" in lab_argv(ROOT, executable="jupyter-lab")


def test_lab_command_refuses_a_folder_without_the_course(tmp_path):
    from ringlab.course.lab import find_root, lab_argv

    with pytest.raises(ValueError, match=r"^root: .*\(no notebooks/00_start_here\.ipynb in it\)"):
        lab_argv(tmp_path)
    with pytest.raises(ValueError, match="no notebooks/00_start_here.ipynb"):
        find_root(tmp_path)
    assert find_root(ROOT / "exercises") == ROOT


def test_make_lab_runs_the_lab_module():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^lab: install\n\t\$\(PY\) -m ringlab\.course\.lab \$\(LAB_ARGS\)$", makefile, re.MULTILINE)


def test_the_lab_server_lists_the_course_and_opens_the_start_page(tmp_path):
    """Start JupyterLab as `make lab` does (plus a port and no token): the file browser's root holds exercises/
    and solutions/ beside notebooks/, and both `/` and the printed address lead to the start page."""
    pytest.importorskip("jupyterlab")
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.error
    import urllib.request

    from ringlab.course.lab import START_PAGE, lab_argv

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"),
               JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "workspaces"),
               IPYTHONDIR=str(tmp_path / "ipython"))
    argv = lab_argv(ROOT, "--no-browser", "--ip=127.0.0.1", f"--port={port}", "--ServerApp.port_retries=0",
                    "--IdentityProvider.token=", "--ServerApp.password=", "--LabApp.news_url=None",
                    executable=str(Path(sys.executable).with_name("jupyter-lab")))
    log = tmp_path / "lab.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=5)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.3)
        listing = json.loads(urllib.request.urlopen(f"{url}/api/contents", timeout=10).read())
        names = {item["name"] for item in listing["content"]}
        assert {"exercises", "solutions", "notebooks"} <= names
        assert not any(n.endswith(".egg-info") for n in names), names  # make install's metadata stays hidden
        try:
            urllib.request.build_opener(NoRedirect).open(f"{url}/", timeout=10)
            raise AssertionError("/ did not redirect")
        except urllib.error.HTTPError as redirect:
            assert redirect.code in (301, 302) and redirect.headers["Location"].split("?")[0].endswith(f"/lab/tree/{START_PAGE}")
        assert urllib.request.urlopen(f"{url}/lab/tree/{START_PAGE}", timeout=10).status == 200
        assert f"/lab/tree/{START_PAGE}" in log.read_text(), "the address JupyterLab prints leads to the start page"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
