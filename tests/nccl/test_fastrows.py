"""The block reader of result rows (ringlab.nccl.fastrows, issue 31 section 7) reads exactly what the per-line
reader reads, and reads a long table in memory that does not grow with it."""

from __future__ import annotations

import io
import json
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nccl_fixtures import FIXTURES, MANIFEST, fixture_text
from ringlab.nccl import explain, fastrows, read_texts, records
from ringlab.nccl import reader as reader_mod
from ringlab.nccl.lines import clean
from ringlab.nccl.reader import read_paths, read_streams

TABLE = "a100_sxm4_8gpu_nccl_tests_2_19.txt"
_LINES = fixture_text(TABLE).splitlines()
_FIRST_ROW = next(i for i, line in enumerate(_LINES) if line.strip()[:1].isdigit())
HEAD = _LINES[:_FIRST_ROW]  # banner, devices, column header
TAIL = [line for line in _LINES[_FIRST_ROW:] if not line.strip()[:1].isdigit()]
LOG = [line for name in sorted(f["file"] for f in MANIFEST) for line in fixture_text(name).splitlines()
       if "NCCL INFO" in line or "NCCL WARN" in line][::7]
SIZES = [8, 1024, 65536, 1048576, 134217728]
# (as nccl-tests prints them, unusual or refused): the second list is drawn with probability `odd`
TYPES = (["float", "bfloat16", "int32"], ["half", "f8e4m3", "int8", "bfloat17", "fp32x", "float_"])
REDOPS = (["sum", "max"], ["none", "avg", "xor", "Sum"])
ROOTS = (["-1", "0"], ["3", "-0", "07", "+1", "1234567890123456"])
VALUES = (["{:.2f}"], ["{:.0f}", "{:.3f}", "{:.1f}", "nan", "inf", "1e400", "-3.5", "1e3", "1.5e+02", "-0.00", ".5",
                       "12.", "1_0", "0x10", "１２", "1234567890.123456"])
WRONGS = (["0", "0", "0", "3", "N/A"], ["1.04858e+06", "00", "1234567890123456", "-1", "n/a"])
PREFIXES = ([""], ["[1,0]<stdout>:", "0: ", "> ", "(w, rank=1, pid=2) ", "\t", "h1: ", "[2026-01-01 10:00:00] "])
BREAKS = ["\r", "\x0c", "\x0b", "\x1c", "\x1f", "\xa0", "\x85", "\u2028", "\r  "]  # inside a line or at its end


def _pick(rng: np.random.Generator, choices: tuple[list, list], odd: float) -> str:
    return str(rng.choice(choices[rng.random() < odd]))


def _row(rng: np.random.Generator, odd: float) -> str:
    """A result row of the modern layout: mostly as nccl-tests prints it, sometimes with a field no reader
    accepts, an unusual spelling or width, a launcher prefix, a line break or space of another kind, a cut
    or an extra field."""
    size = int(rng.choice(SIZES))
    fields = [str(size), str(size // 4), _pick(rng, TYPES, odd), _pick(rng, REDOPS, odd), _pick(rng, ROOTS, odd)]
    for _ in range(2):
        fields += [_pick(rng, VALUES, odd).format(rng.uniform(0, 2000) * rng.choice([1e-3, 1, 1e3]))
                   for _ in range(3)] + [_pick(rng, WRONGS, odd)]
    if rng.random() < odd:
        fields = fields[:rng.integers(1, 13)] if rng.random() < 0.5 else fields + ["17"]
    if rng.random() > odd:  # nccl-tests' widths; a wider number pushes the rest right
        widths = [12, 14, 10, 8, 8, 9, 8, 8, 8, 9, 8, 8, 8, 8]
        cells = [f"{f:>{w}}" if len(f) < w else " " + f for f, w in zip(fields, widths)]
    else:  # any widths: numbers may run together
        cells = [f"{f:>{w}}" for f, w in zip(fields, rng.integers(1, 14, len(fields)).tolist())]
    line = _pick(rng, PREFIXES, odd) + ("\t" if rng.random() < 0.05 else "").join(cells)
    if rng.random() < odd:
        at = int(rng.integers(0, len(line) + 1))
        line = line[:at] + str(rng.choice(BREAKS)) + line[at:]
    return line


def _document(seed: int, rows: int, odd: float, other: float, runs: int) -> str:
    rng = np.random.default_rng(seed)
    lines = list(HEAD)
    for k in range(rows):
        if runs > 1 and k % max(1, rows // runs) == 0 and k:
            lines += HEAD[1:] if rng.random() < 0.8 else ["# nThread 1 nGpus 8 minBytes 8 maxBytes 128"]
        if rng.random() < other:
            lines.append(str(rng.choice(LOG + ["", "#", "garbage ² line", "# Out of bounds values : 0 OK",
                                               "Test NCCL failure common.cu:1 'x'"])))
        lines.append(_row(rng, odd))
    lines += TAIL
    eol = str(rng.choice(["\n", "\r\n"]))
    return eol.join(lines) + (eol if rng.random() < 0.8 else "")


def _dump(reports) -> str:
    return json.dumps([r.as_dict() for r in reports], sort_keys=True, default=str) + "\n".join(
        r.text(100) for r in reports)


def _read_both(monkeypatch, read) -> tuple[str, str]:
    """(block reader, per-line reader) reports of ``read()``: the second with no line taken for a fast row."""
    fast = _dump(explain(read()))
    with monkeypatch.context() as m:
        m.setattr(fastrows, "shape_of", lambda shape: None)
        slow = _dump(explain(read()))
    return fast, slow


def _small(monkeypatch, block: int, kept: int, few: int) -> None:
    """Small blocks, few rows kept as read and short runs of rows read with numpy: every path on small inputs."""
    monkeypatch.setattr(reader_mod, "BLOCK_BYTES", block)
    monkeypatch.setattr(reader_mod, "ROWS_KEPT", kept)
    monkeypatch.setattr(records, "ROWS_KEPT", kept)
    monkeypatch.setattr(reader_mod, "_FEW_ROWS", few)


@pytest.mark.timeout(300)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), rows=st.integers(0, 400), odd=st.sampled_from([0.0, 0.01, 0.1, 0.5]),
       other=st.sampled_from([0.0, 0.02, 0.3]), runs=st.integers(1, 3),
       block=st.integers(40, 5000) | st.sampled_from([1 << 16, 1 << 20]),
       kept=st.integers(1, 40), few=st.integers(1, 40))
def test_block_reader_agrees_with_the_line_reader_on_random_tables(monkeypatch, seed, rows, odd, other, runs, block,
                                                                   kept, few):
    text = _document(seed, rows, odd, other, runs)
    _small(monkeypatch, block, kept, few)
    fast, slow = _read_both(monkeypatch, lambda: read_streams([("t.txt", io.BytesIO(text.encode()))]))
    assert fast == slow
    fast, slow = _read_both(monkeypatch, lambda: read_texts([("t.txt", text)]))
    assert fast == slow
    lines = [row.line for run in read_texts([("t.txt", text)]).runs for row in run.rows]
    assert all(line.text == clean(line.raw) for line in lines)  # the text the line reader would give


@pytest.mark.parametrize("name", sorted(f["file"] for f in MANIFEST))
def test_block_reader_agrees_with_the_line_reader_on_fixtures(name, monkeypatch):
    _small(monkeypatch, 97, 3, 2)
    fast, slow = _read_both(monkeypatch, lambda: read_paths([str(FIXTURES / name)]))
    assert fast == slow


def test_a_launcher_prefix_under_a_wide_number_is_read_apart(monkeypatch):
    """Rows whose numbers end at the same columns share a reading of each number over its widest span,
    unless that span reaches a digit in another row: here the rank srun puts in front of a row."""
    rest = "             2     float     sum      -1    34.84    0.00    0.00       0    36.18    0.00    0.00       0"
    lines = HEAD + ["123456789012345" + rest, "7:" + " " * 12 + "8" + rest] * 20 + TAIL
    _small(monkeypatch, 1 << 16, 2, 1)
    text = "\n".join(lines) + "\n"
    fast, slow = _read_both(monkeypatch, lambda: read_texts([("x", text)]))
    assert fast == slow
    assert [row.size for row in read_texts([("x", text)]).runs[0].rows] == [123456789012345, 8]


def test_rows_are_read_as_the_line_reader_reads_them():
    """Values straight from the digits: exact integers, decimals equal to float() of their text, N/A, signs."""
    lines = HEAD + ["     1048576        262144  bfloat16     max      -1    67.31   15.58   27.26       0"
                    "    65.27   16.07  28.115     N/A",
                    "  999999999999999  3  int32  sum  07  0.1  0.2  0.30000000000000004  12  1e3  2  3  0"] + TAIL
    doc = read_texts([("x", "\n".join(lines))])
    first, second = doc.runs[0].rows
    assert (first.size, first.count, first.dtype, first.redop, first.root) == (1048576, 262144, "bfloat16", "max", -1)
    assert first.out_of_place.busbw == 27.26 and first.in_place.busbw == 28.115 and first.in_place.wrong is None
    assert second.size == 999999999999999 and second.root == 7 and second.out_of_place.busbw == 0.30000000000000004
    assert second.in_place.time_us == 1000.0  # an exponent: read by the line reader
    shape = fastrows.shape_of(lines[len(HEAD)].translate(str.maketrans("012345678", "999999999")).encode())
    assert shape is not None and shape.dtype == "bfloat99" and shape.type_span is not None
    assert fastrows.shape_of(lines[len(HEAD) + 1].encode()) is None  # 1e3 is not in the grammar


def _table(path, megabytes: float) -> None:
    """The fixture's rows repeated (all_reduce_perf -N cycles) with busbw varying, to ``megabytes`` MB."""
    rows = [line.split() for line in _LINES[_FIRST_ROW:] if line.strip()[:1].isdigit()]
    rng = np.random.default_rng(0)
    with open(path, "w") as fh:
        fh.write("\n".join(HEAD) + "\n")
        written = 0
        while written < megabytes * 1e6:
            cycle = []
            for t in rows:
                t = list(t)
                t[7] = f"{float(t[7]) * rng.uniform(0.5, 1.5):.2f}"
                cycle.append("".join(f"{x:>{w}}" for x, w in zip(t, [12, 14, 10, 8, 8, 9, 8, 8, 8, 9, 8, 8, 8])))
            block = "\n".join(cycle) + "\n"
            fh.write(block)
            written += len(block)
        fh.write("\n".join(TAIL) + "\n")


def _peak(path) -> int:
    tracemalloc.start()
    try:
        for report in explain(read_paths([str(path)])):
            report.as_dict()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.timeout(300)
def test_a_long_table_is_read_in_bounded_memory(tmp_path):
    small, big = tmp_path / "small.txt", tmp_path / "big.txt"
    _table(small, 3)
    _table(big, 30)
    peak_small, peak_big = _peak(small), _peak(big)
    assert peak_big < 32 * 2**20  # the whole file, as lines, would be several times its 30 MB
    assert peak_big < 1.25 * peak_small + 2**20  # ten times the rows, about the same memory
