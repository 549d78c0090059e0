"""The README is for a learner and true when run; CONTRIBUTING.md's layout table names every package of ringlab.

- The first code block holds what a learner runs (``make demo``, ``make lab``, ``ringlab practice --mock 3``) and
  ``make test``, labelled as the contributors' command; the first screen names the start page.
- The livelock example of ``serve-sim --policy naive`` shows the livelock, with the numbers the README quotes.
- The layout table (in CONTRIBUTING.md) names every top-level package and nothing that is gone.
"""

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _layout_rows() -> set[str]:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    table = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([^`]+)` \|", table, flags=re.MULTILINE))


def test_every_top_level_package_has_a_row():
    packages = {f"ringlab/{p.parent.name}/" for p in (ROOT / "ringlab").glob("*/__init__.py")}
    rows = _layout_rows()
    assert packages <= rows, f"missing from CONTRIBUTING.md's layout table: {sorted(packages - rows)}"


def test_every_row_names_something_that_exists():
    missing = [row for row in _layout_rows() if not (ROOT / row).exists()]
    assert not missing, f"CONTRIBUTING.md's layout table names paths that do not exist: {missing}"


def test_the_first_screen_is_what_a_learner_runs():
    first_block = re.search(r"```bash\n(.*?)```", README, flags=re.DOTALL).group(1)
    commands = {line.split("#")[0].strip(): line.split("#", 1)[1] for line in first_block.splitlines() if "#" in line}
    assert "make demo" in commands and "make lab" in commands and "make test" in commands
    assert any(re.fullmatch(r"(\.venv/bin/)?ringlab practice --mock 3", c) for c in commands)
    assert "contributor" in commands["make test"], "make test is the contributors' command"
    assert list(commands).index("make test") == len(commands) - 1, "the learner's commands come first"
    first_screen = README.split("\n## ", 1)[0]
    assert "00_start_here" in first_screen and "make lab" in first_screen
    assert README.index("## Topics") < README.index("## Installing"), "the topic table comes right after"


def test_contributor_material_is_below_the_learners():
    """Pins, portability passes and the layout live in CONTRIBUTING.md, which the README points to."""
    for heading in ("## Layout", "## Versions and other machines"):
        assert heading not in README and heading in (ROOT / "CONTRIBUTING.md").read_text()
    assert "CONTRIBUTING.md" in README


def _livelock_row() -> str:
    rows = [line for line in README.splitlines() if line.startswith("| `ringlab serve-sim") and "--policy naive" in line]
    assert len(rows) == 1, "the README shows the livelock with one serve-sim command"
    return rows[0]


def _serve_sim(argv: list[str], capsys) -> str:
    from ringlab.commands.serve_sim import main

    main(argv)
    return capsys.readouterr().out


def test_the_readme_livelock_command_shows_the_livelock(capsys):
    row = _livelock_row()
    argv = shlex.split(re.match(r"\| `ringlab serve-sim ([^`]+)`", row).group(1))
    out = _serve_sim(argv, capsys)
    requests, finished = map(int, re.search(r"(\d+) requests: (\d+) finished", out).groups())
    preemptions = int(re.search(r"preemptions: (\d+) recompute", out).group(1))
    assert "LIVELOCK" in out and finished == 0 and preemptions > 0, out
    claimed = re.search(r"\((\d+) preemptions\).*?(\d+) of (\d+) finished.*?all (\d+) finish", row)
    assert claimed, row
    assert (preemptions, finished, requests, requests) == tuple(map(int, claimed.groups())), (row, out)
    argv.remove("--policy"), argv.remove("naive")
    fixed = _serve_sim(argv, capsys)
    assert f"{requests} requests: {requests} finished" in fixed and "LIVELOCK" not in fixed, fixed


@pytest.mark.parametrize("extras, triton", [("Linux x86_64", True), ("Linux aarch64", True),
                                            ("Darwin arm64", False), ("Darwin x86_64", False)])
def test_make_installs_triton_only_where_it_has_wheels(extras, triton):
    """The Makefile's platform test, evaluated for each platform: triton joins the extras on Linux x86_64/aarch64."""
    makefile = (ROOT / "Makefile").read_text()
    probe = re.search(r'TRITON_WHEELS := \$\(shell \$\(PYTHON\) -c "([^"]+)"', makefile).group(1)
    system, machine = extras.split()
    namespace = {}
    fake = f"import types\nplatform = types.SimpleNamespace(machine=lambda: {machine!r})\nsys = types.SimpleNamespace(platform={('linux' if system == 'Linux' else 'darwin')!r})\n"
    code = probe.replace("import platform, sys; ", "").replace("print(", "result = (")
    exec(fake + code, namespace)
    assert namespace["result"] is triton
    assert "EXTRAS ?= torch,lab,shards,test$(if $(filter True,$(TRITON_WHEELS)),$(comma)triton)" in makefile
