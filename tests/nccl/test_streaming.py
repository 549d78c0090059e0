"""explain streams its inputs (issue 31, section 7): the same reports as reading whole texts, rows folded
per size in long tables (bounded memory), non-regular files refused, hostile values named as malformed."""

from __future__ import annotations

import io
import json
import os
import threading

import numpy as np
import pytest

from nccl_fixtures import FIXTURES, MANIFEST, fixture_text
from ringlab.cli import main as cli_main
from ringlab.nccl import ParseError, explain, explain_texts
from ringlab.nccl import reader as reader_mod
from ringlab.nccl.reader import read_paths, read_streams
from ringlab.nccl.records import ROWS_KEPT

TABLE = "a100_sxm4_8gpu_nccl_tests_2_19.txt"


def _same(a, b):
    return json.dumps([r.as_dict() for r in a], sort_keys=True, default=str) == \
        json.dumps([r.as_dict() for r in b], sort_keys=True, default=str)


@pytest.mark.parametrize("name", sorted(f["file"] for f in MANIFEST))
def test_streaming_gives_the_reports_of_whole_text(name, monkeypatch):
    whole = explain_texts([(str(FIXTURES / name), fixture_text(name))])
    assert _same(explain(read_paths([str(FIXTURES / name)])), whole)
    monkeypatch.setattr(reader_mod, "BLOCK_BYTES", 331)  # reads end within lines
    assert _same(explain(read_paths([str(FIXTURES / name)])), whole)


def test_line_breaks_across_blocks(monkeypatch):
    text = fixture_text(TABLE)
    for eol in ("\r\n", "\r"):
        data = eol.join(text.split("\n")).encode()
        monkeypatch.setattr(reader_mod, "BLOCK_BYTES", 61)  # lines longer than a read stay whole
        doc = read_streams([("x", io.BytesIO(data))])
        assert [r.line.number for r in doc.runs[0].rows] == \
            [r.line.number for r in explain_texts([("x", text)])[0].run.rows]


def _big_table(cycles: int, bad_cycle: int | None = None) -> tuple[str, list[list[str]]]:
    lines = fixture_text(TABLE).splitlines()
    rows = [i for i, line in enumerate(lines) if line.strip()[:1].isdigit()]
    head, body, tail = lines[:rows[0]], lines[rows[0]:rows[-1] + 1], lines[rows[-1] + 1:]
    rng = np.random.default_rng(5)
    out, cells = list(head), []
    for c in range(cycles):
        for line in body:
            t = line.split()
            t[7] = f"{float(t[7]) * rng.uniform(0.5, 1.5):.2f}"  # out-of-place busbw varies per cycle
            if c == bad_cycle and t[0] == "1024":
                t[8] = "3"
            cells.append(t)
            out.append("  ".join(t))
    return "\n".join(out + tail) + "\n", cells


def test_long_tables_fold_repeated_sizes_and_keep_peak_and_failures():
    cycles = ROWS_KEPT // 25 + 60  # well past the rows kept one by one
    text, cells = _big_table(cycles, bad_cycle=cycles - 3)
    (report,) = explain(read_streams([("big", io.BytesIO(text.encode()))]))
    run = report.run
    sizes = {int(t[0]) for t in cells}
    assert run.rows_read == len(cells)
    assert len(run.rows) <= ROWS_KEPT + len(sizes)
    peak = max(max(float(t[7]), float(t[11])) for t in cells)
    assert report.peak_busbw == pytest.approx(peak * 1e9)
    assert any(f.id == "correctness-failure" for f in report.findings)
    assert report.as_dict()["lines"]["rows_folded"] == len(cells) - len(run.rows)


@pytest.mark.parametrize("token,why", [("1e400", "not a finite number"), ("nan", "not a finite number"),
                                       ("inf", "not a finite number"), ("-3.5", "not a finite number"),
                                       ("fast", "not a number")])
def test_hostile_values_are_malformed_rows_named_by_line(token, why, tmp_path, capsys):
    lines = fixture_text(TABLE).splitlines()
    number = next(i for i, line in enumerate(lines, 1) if line.strip().startswith("1048576 "))
    t = lines[number - 1].split()
    t[7] = token
    lines[number - 1] = "  ".join(t)
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n")
    assert cli_main(["explain", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the report wraps long lines
    assert f"malformed row {path}:{number}: busbw is '{token}'" in out and why in out
    assert "inf GB/s" not in out and "inf%" not in out
    assert cli_main(["explain", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["malformed_rows"] == [{"line": f"{path}:{number}", "why": f"busbw is '{token}': not a finite number >= 0"
                                       if why != "not a number" else f"busbw is '{token}', not a number"}]


def test_all_rows_malformed_is_said_so(tmp_path, capsys):
    lines = [line if not line.strip()[:1].isdigit() else line.replace(" sum ", " sum ").rstrip() + "  nan"
             for line in fixture_text(TABLE).splitlines()]
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n")
    assert cli_main(["explain", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ids = [f["id"] for f in data["findings"]]
    assert "malformed-rows" in ids and "no-results" not in ids
    assert data["lines"]["malformed"] == 25


def test_json_with_an_overflowing_value_is_refused():
    doc = {"results": [{"size": 8, "count": 2, "type": "float", "redop": "sum",
                        "out_of_place": {"time": 1.0, "alg_bw": 1.0, "bus_bw": 1e400, "nwrong": 0}}]}
    text = json.dumps(doc).replace("Infinity", "1e400")
    with pytest.raises(ParseError, match="not a finite number"):
        explain_texts([("x.json", text)])


def test_a_fifo_is_refused_at_once(tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("code", _exit(["explain", str(fifo)])), daemon=True)
    worker.start()
    worker.join(60)  # generous: a refusal takes milliseconds; a blocking open would never return
    if worker.is_alive():  # unblock the reader so the test run can go on, then fail
        with open(fifo, "w"):
            pass
        pytest.fail("explain blocked on a FIFO with no writer")
    assert result["code"] == 2 and "FIFO" in capsys.readouterr().err


def test_a_device_is_refused(capsys):
    assert _exit(["explain", "/dev/zero"]) == 2
    assert "device" in capsys.readouterr().err


def _exit(argv):
    try:
        return cli_main(argv)
    except SystemExit as exc:
        return exc.code
