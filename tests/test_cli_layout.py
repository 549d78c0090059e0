"""Every command and calculator of ``ringlab``, run with representative arguments and with ``--help``, prints
lines of at most 100 columns, tables under a header row, and ``--json`` documents untouched by the wrapping.

The commands are found by walking the parsers (``cli_harness.command_parsers``), so a new command or
calculator is covered by construction: without representative arguments in ``cli_harness.REPRESENTATIVE``
it fails here.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "fuzz"))
import cli_harness  # noqa: E402

from ringlab.textfmt import WIDTH, table, wrap  # noqa: E402

PARSERS = cli_harness.command_parsers()
RUNS = [(path, argv) for path in sorted(PARSERS) for argv in cli_harness.REPRESENTATIVE.get(path, [])]
# bench prints nccl-tests' own fixed-column table (up to 120 columns) on purpose: `ringlab explain` and other
# nccl-tests readers parse it, so its data lines are exempt; its --help is not.
NCCL_TESTS_FORMAT = {("bench",)}


def _run(argv: list[str], tmp_path, monkeypatch) -> cli_harness.Outcome:
    monkeypatch.setenv("COLUMNS", "300")  # a wide terminal: the help must still stop at 100 columns
    argv = [a.replace("@TMP@", str(tmp_path)) for a in argv]
    return cli_harness.run_cli(argv, timeout=120)


def too_wide(text: str) -> list[str]:
    """Lines over WIDTH columns, except a line that is one unbreakable token (a path, a URL)."""
    return [line for line in text.splitlines() if len(line) > WIDTH and len(line.split()) > 1]


def headless_tables(text: str) -> list[str]:
    """Each rule of dashes (a table's header underline) not directly under a header whose columns it spans."""
    lines = text.splitlines()
    bad = []
    for i, line in enumerate(lines):
        if not re.fullmatch(r" *-+(?:  +-+)+ *", line):
            continue
        head = lines[i - 1] if i else ""
        spans = [m.span() for m in re.finditer(r"-+", line)]
        if not head.strip() or re.fullmatch(r"[ -]*", head) or \
                any(not head[a:b].strip() for a, b in spans if a < len(head)) or len(head) > len(line) + 1:
            bad.append(f"{head!r} / {line!r}")
    return bad


def test_every_command_has_representative_arguments():
    assert set(PARSERS) == set(cli_harness.REPRESENTATIVE), \
        "add representative arguments for new commands to tests/fuzz/cli_harness.py REPRESENTATIVE"


@pytest.mark.parametrize("path", sorted(PARSERS), ids=[" ".join(p) for p in sorted(PARSERS)])
def test_help_fits_100_columns(path, tmp_path, monkeypatch):
    outcome = _run([*path, "--help"], tmp_path, monkeypatch)
    assert outcome.code == 0 and outcome.error is None, outcome.describe()
    assert outcome.out.startswith("usage:") and not too_wide(outcome.out), too_wide(outcome.out)


def test_top_level_usage_fits(tmp_path, monkeypatch):
    for argv in ([], ["--help"], ["calc"], ["calc", "--help"]):
        outcome = _run(argv, tmp_path, monkeypatch)
        assert outcome.code == 0 and outcome.out and not too_wide(outcome.out), outcome.describe()


@pytest.mark.parametrize("path, argv", RUNS, ids=[" ".join(p + tuple(a))[:60] for p, a in RUNS])
def test_output_fits_100_columns_under_header_rows(path, argv, tmp_path, monkeypatch):
    outcome = _run([*path, *argv], tmp_path, monkeypatch)
    assert outcome.error is None and outcome.code in (0, 1), outcome.describe()
    assert outcome.out.strip() or outcome.err.strip(), outcome.describe()
    if path not in NCCL_TESTS_FORMAT:
        assert not too_wide(outcome.out + outcome.err), "\n".join(too_wide(outcome.out + outcome.err))
    assert not headless_tables(outcome.out), headless_tables(outcome.out)


JSON_RUNS = [(p, a) for p, a in RUNS if any("--json" in act.option_strings for act in PARSERS[p]._actions)]


@pytest.mark.parametrize("path, argv", JSON_RUNS, ids=[" ".join(p + tuple(a))[:60] for p, a in JSON_RUNS])
def test_json_is_not_wrapped(path, argv, tmp_path, monkeypatch):
    """``--json`` prints the canonical dump of its document: no line of it was wrapped or cut."""
    outcome = _run([*path, *argv, "--json"], tmp_path, monkeypatch)
    assert outcome.error is None and outcome.code in (0, 1), outcome.describe()
    data = json.loads(outcome.out)
    assert outcome.out.rstrip("\n") == json.dumps(data, indent=2)


def test_the_issue_examples():
    """`cost --topology` (196 columns under a 385-character line), `ringlab topic` and `calc train` had no
    header row, sizes came in MB at GB scale, explain's ceiling sentence was garbled, calc kv said its
    per-token figure twice."""
    out = cli_harness.run_cli(["cost", "--topology", "dgx-h100", "--nodes", "2", "--size", "1GiB"]).out
    assert max(map(len, out.splitlines())) <= WIDTH and out.count("\nalgorithm ") == 2
    out = cli_harness.run_cli(["cost", "--world-size", "64", "--size", "1GiB"]).out
    assert "ring beats double_binary_tree: above 3,283,200,000 B (3.28 GB)" in out
    out = cli_harness.run_cli(["topic"]).out
    assert out.splitlines()[0].split() == ["id", "slug", "min", "after", "title"]
    out = cli_harness.run_cli(cli_harness.REPRESENTATIVE[("calc", "train")][0] and
                              ["calc", "train", *cli_harness.REPRESENTATIVE[("calc", "train")][0]]).out
    head = next(i for i, line in enumerate(out.splitlines()) if line.split()[:2] == ["dim", "count"])
    assert out.splitlines()[head + 2].split()[0] == "tp"
    out = " ".join(cli_harness.run_cli(["explain", cli_harness.NCCL_TABLE]).out.split())
    assert "ceiling 300 GB/s; efficiency 61%: the line rate of ring_channels on 1 node(s) x 8 GPUs" in out
    assert "(line rate of" not in out and "benchmarks with)" not in out
    out = cli_harness.run_cli(["calc", "kv", "--model", "llama-2-70b", "--tokens", "4096"]).out
    assert out.count("327,680 B") == 1


def test_table_helper():
    lines = table(["name", "bytes", "what"], [["a", "1,024", "x " * 80], ["bb", "7", "short"]])
    assert lines[0] == "name  bytes  what" and set(lines[1]) == {"-", " "}
    assert all(len(line) <= WIDTH for line in lines) and len(lines) == 5  # the long text wraps under itself
    assert lines[2].startswith("a     1,024  x x") and lines[3].startswith(" " * 13 + "x")
    assert lines[4] == "bb        7  short"
    path = "/" + "p" * 150
    assert wrap(f"see {path} now") == f"see\n    {path}\n    now"  # never split inside a token


def test_format_size_picks_the_unit_and_labels_it():
    from ringlab.calc.units import format_size

    assert format_size(3_283_200_000) == "3.28 GB" and format_size(2**30, binary=True) == "1.00 GiB"
    assert format_size(999_999) == "1.00 MB" and format_size(999_994) == "999.99 kB"  # rounding moves the unit
    assert format_size(512) == "512 B" and format_size(1023, binary=True) == "1,023 B"
    assert format_size(2**60, binary=True) == "1.00 EiB" and format_size(10**21) == "1,000.00 EB"
