"""Every real fixture read and explained; the facts equal what its source states (tests/fixtures/nccl/MANIFEST.json)."""

import math
import re

import pytest

from ringlab.nccl import explain_texts, read_texts

from nccl_fixtures import FIXTURES, MANIFEST, fixture_text

BY_FILE = {entry["file"]: entry for entry in MANIFEST}


def _report(name, **overrides):
    reports = explain_texts([(name, fixture_text(name))], **overrides)
    assert len(reports) == 1, f"{name}: expected one run, got {len(reports)}"
    return reports[0]


def test_manifest_lists_every_fixture_and_at_least_fifteen():
    on_disk = {p.name for p in FIXTURES.glob("*.txt")}
    assert on_disk == set(BY_FILE), on_disk ^ set(BY_FILE)
    assert len(on_disk) >= 15
    for entry in MANIFEST:
        assert entry["source"].startswith(("https://github.com/", "code-index:")) and entry["established"] and entry["retrieved"]


def _check(report, expect, name):
    facts, run = report.facts, report.run
    simple = {"collective": facts.collective, "world_size": facts.world_size, "nodes": facts.nodes,
              "gpus_per_node": facts.gpus_per_node, "gpu": facts.gpu, "rows": len(run.rows),
              "truncated_rows": len(run.truncated), "channels": facts.channels, "nics": facts.nics,
              "out_of_bounds": run.out_of_bounds, "intra_node": facts.intra_node, "inter_node": facts.inter_node}
    for key, actual in simple.items():
        if key in expect:
            assert actual == expect[key], f"{name}: {key} is {actual!r}, the source says {expect[key]!r}"
    if "peak_busbw_GBps" in expect:
        assert report.peak_busbw == pytest.approx(expect["peak_busbw_GBps"] * 1e9, rel=1e-12)
    for lib, version in expect.get("versions", {}).items():
        assert facts.versions.get(lib) == version, (name, facts.versions)
    for key, value in expect.get("header", {}).items():
        assert run.header.get(key) == value
    for key, value in expect.get("env", {}).items():
        assert report.log.env[key][0] == value
    ids = [f.id for f in report.findings]
    for fid in expect.get("findings_include", []):
        assert fid in ids, f"{name}: expected finding {fid}, got {ids}"
    for fid in expect.get("findings_exclude", []):
        assert fid not in ids, f"{name}: unexpected finding {fid} in {ids}"
    if "first_finding" in expect:
        assert ids[0] == expect["first_finding"]
        assert expect["first_evidence_contains"] in report.findings[0].evidence
    if "warning_contains" in expect:
        assert any(expect["warning_contains"] in f.message for f in report.findings if f.id == "nccl-warning")
    if "exit_code" in expect:
        assert int(report.correctness_failure) == expect["exit_code"]
    if "zero_size_rows" in expect:
        assert sum(r.size == 0 for r in run.rows) == expect["zero_size_rows"]
    if "expected_busbw_GBps" in expect:
        assert report.expected_busbw == pytest.approx(expect["expected_busbw_GBps"] * 1e9)
    if "efficiency_between" in expect:
        lo, hi = expect["efficiency_between"]
        assert lo <= report.efficiency <= hi, f"{name}: efficiency {report.efficiency:.3f} not in [{lo}, {hi}]"


@pytest.mark.parametrize("name", sorted(BY_FILE))
def test_fixture_facts_match_the_source(name):
    entry = BY_FILE[name]
    _check(_report(name), entry["expect"], name)


@pytest.mark.parametrize("name", sorted(n for n, e in BY_FILE.items() if "derived" in e))
def test_fixture_against_the_line_rate_ceiling(name):
    derived = BY_FILE[name]["derived"]
    _check(_report(name, **derived["overrides"]), derived["expect"], name)


@pytest.mark.parametrize("name", sorted(n for n, e in BY_FILE.items() if e["expect"].get("avg_busbw_matches")))
def test_every_printed_busbw_was_read(name):
    """nccl-tests' '# Avg bus bandwidth' is the mean of every busbw it printed (out-of-place and in-place,
    src/common.cu: bw[0] += busBw per BenchTime); the printed values are rounded to 0.01 GB/s."""
    run = read_texts([(name, fixture_text(name))]).runs[0]
    values = [m.busbw for row in run.rows for m in row.measures()]
    assert len(values) == 2 * len(run.rows)
    assert sum(values) / len(values) == pytest.approx(run.avg_busbw, abs=0.006)


@pytest.mark.parametrize("name", sorted(n for n, e in BY_FILE.items() if e["expect"].get("rows_from_header")))
def test_row_count_follows_the_header(name):
    """With '-f 2', nccl-tests runs minBytes, 2 minBytes, ... up to maxBytes: floor(log2(max/min)) + 1 sizes."""
    run = read_texts([(name, fixture_text(name))]).runs[0]
    assert run.header["step"] == "2(factor)"
    lo, hi = run.header["min_bytes"], run.header["max_bytes"]
    assert len(run.rows) == math.floor(math.log2(hi / lo)) + 1
    sizes = [r.size for r in run.rows]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("name,other,factor", [
    (n, *e["expect"]["slower_than"]) for n, e in BY_FILE.items() if "slower_than" in e["expect"]] + [
    (e["expect"]["faster_than"][0], n, e["expect"]["faster_than"][1]) for n, e in BY_FILE.items()
    if "faster_than" in e["expect"]])
def test_diagnosed_slow_run_is_slower_than_its_healthy_twin(name, other, factor):
    slow, fast = _report(name), _report(other)
    assert fast.peak_busbw > factor * slow.peak_busbw


def test_row_lines_are_exactly_the_rows_read():
    """Independent count: lines with a size, a count, a data type and then a reduction op or a root."""
    pattern = re.compile(r"\d\s+\d+\s+(?:float|half|bfloat16|double|u?int\d+)\s+(?:sum|prod|min|max|avg|none|-?\d+)\s+-?\d")
    for name in BY_FILE:
        text = fixture_text(name)
        if text.lstrip().startswith("{"):
            continue  # JSON records, not table lines: tests/nccl/test_json.py counts those
        expected = sum(bool(pattern.search(line)) for line in text.splitlines())
        doc = read_texts([(name, text)])
        read = sum(len(r.rows) + sum(len(t.text.split()) >= 3 for t in r.truncated) for r in doc.runs)
        assert read == expected, name
