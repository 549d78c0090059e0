"""Hypothesis against the readers: any text, cut, shuffled or prefixed, either reads or raises ParseError."""

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ringlab.nccl import ParseError, explain, read_texts

from nccl_fixtures import MANIFEST, fixture_text

NAMES = sorted(e["file"] for e in MANIFEST)
TEXTS = {n: fixture_text(n) for n in NAMES}
# bits of real lines, so that random text often looks almost like nccl-tests output
SHARDS = ["# nThread 1 nGpus 8 minBytes 8 maxBytes 128 ", "#  Rank  0 Group  0 Pid 1 on h device  0 [0x1] ",
          "#       size         count      type   redop    root     time   algbw   busbw #wrong", "     8     2     float ",
          "sum      -1 ", "N/A ", "1.04858e+06 ", "   17.49    0.00 ", "NCCL INFO ", "h:1:2 [0] ", "Channel 00/02 : ",
          " -> ", "via NET/IB/0/GDRDMA", "[1,0]<stdout>:", "0: ", "> ", "# Out of bounds values : ", "# Avg bus bandwidth : ",
          "nan ", "inf ", "-1 ", "\t", "\n", "\r\n", "{", "}", "[", "\"results\"", "Trees [0] ", "comm 0x1 rank 0 nRanks ",
          "Collective test starting: all_reduce_perf", "rccl-tests: Version x", "NCCL version 2.1.1", "²", "٣"]


def _survives(inputs):
    try:
        doc = read_texts(inputs)
    except ParseError:
        return
    for report in explain(doc):  # inference, ceiling, fit and findings must not fail on what the reader accepted
        report.as_dict()
        report.text()


@pytest.mark.timeout(120)
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000))
def test_random_text(text):
    _survives([("fuzz", text)])


@pytest.mark.timeout(120)
@settings(max_examples=300)
@given(st.lists(st.sampled_from(SHARDS) | st.text(max_size=12), max_size=80).map("".join))
def test_text_built_from_fragments_of_real_lines(text):
    _survives([("fuzz", text)])


@pytest.mark.timeout(120)
@settings(max_examples=150)
@given(name=st.sampled_from(NAMES), cut=st.floats(0, 1), end=st.floats(0, 1))
def test_any_slice_of_a_real_fixture(name, cut, end):
    text = TEXTS[name]
    a, b = sorted((int(cut * len(text)), int(end * len(text))))
    _survives([("slice", text[a:b])])


@pytest.mark.timeout(120)
@settings(max_examples=100)
@given(name=st.sampled_from(NAMES), data=st.data())
def test_shuffled_dropped_duplicated_and_prefixed_lines(name, data):
    lines = TEXTS[name].splitlines()
    picked = data.draw(st.lists(st.sampled_from(lines), max_size=len(lines) + 10)) if lines else []
    prefixes = data.draw(st.lists(st.sampled_from(["", "[1,3]<stdout>:", "12: ", "    ", "> ", "(w, rank=1, pid=2) "]),
                                  min_size=1, max_size=4))
    _survives([("shuffled", "\n".join(prefixes[i % len(prefixes)] + ln for i, ln in enumerate(picked)))])


@pytest.mark.timeout(120)
@settings(max_examples=100)
@given(st.binary(max_size=3000))
def test_random_bytes(data):
    _survives([("bytes", data.decode("utf-8", errors="replace"))])


def test_pathological_long_lines_finish():
    """Regexes are linear: a megabyte line of digits, spaces or brackets reads quickly."""
    for line in ("9 " * 500_000, "[" * 1_000_000, "1:" * 500_000 + " NCCL INFO x", "#" + " " * 1_000_000 + "Rank"):
        _survives([("long", line)])
