"""Launcher prefixes and indentation: stripped without touching what nccl-tests and NCCL printed."""

import pytest
from hypothesis import given, settings, strategies as st

from ringlab.nccl import explain_texts, read_texts
from ringlab.nccl.lines import clean

from nccl_fixtures import MANIFEST, fixture_text

ROW = "     1048576        262144     float     sum      -1   477.32    2.20    2.20      96   492.81    2.13    2.13      32"


@pytest.mark.parametrize("raw,text", [
    ("[1,0]<stdout>:#  Rank  0 Group  0 Pid 1 on h device  0 [0x07] X", "#  Rank  0 Group  0 Pid 1 on h device  0 [0x07] X"),
    ("[1,12]<stderr>:n1:25:25 [0] NCCL INFO Bootstrap : Using eth0", "n1:25:25 [0] NCCL INFO Bootstrap : Using eth0"),
    ("(head, rank=0, pid=3808) [1,0]<stdout>:# Avg bus bandwidth    : 122.073", "# Avg bus bandwidth    : 122.073"),
    ("(worker1, rank=1, pid=2769, ip=10.100.10.12) Worker nodes", "Worker nodes"),
    ("3: " + ROW, ROW.strip()),
    ("    # Out of bounds values : 0 OK", "# Out of bounds values : 0 OK"),
    (">  " + ROW, ROW.strip()),
    ("[2026-04-28 14:14:47] w0:2345:3743 [7] NCCL INFO NVLS multicast support is available on dev 7",
     "w0:2345:3743 [7] NCCL INFO NVLS multicast support is available on dev 7"),
    ("10.3.35.83: #   Rank 15 Pid     42 on ip-10-3-60-130 device  7 [0xa0] A100-SXM4-40GB",
     "#   Rank 15 Pid     42 on ip-10-3-60-130 device  7 [0xa0] A100-SXM4-40GB"),
    # nccl-tests' own message keeps its host name; so do NCCL's host:pid:tid prefixes
    ("GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error'", "GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error'"),
    ("test1:5425:5439 [0] NCCL INFO Channel 00/02 :    0   1", "test1:5425:5439 [0] NCCL INFO Channel 00/02 :    0   1"),
    ("", ""),
])
def test_clean(raw, text):
    assert clean(raw) == text


def _prefixed(text: str, style: str, ranks: list[int]) -> str:
    out = []
    for i, line in enumerate(text.splitlines()):
        r = ranks[i % len(ranks)]
        out.append({"ompi": f"[1,{r}]<stdout>:{line}", "srun": f"{r}: {line}", "indent": f"    {line}",
                    "quote": f"> {line}", "ray": f"(worker{r}, rank={r}, pid={100 + r}) {line}",
                    "crlf": line + "\r"}[style])
    return "\n".join(out)


def _summary(text: str):
    reports = explain_texts([("x", text)])
    return [(r.facts.collective, r.facts.world_size, r.facts.nodes, r.facts.gpu, r.peak_busbw,
             [(row.size, row.busbw) for row in r.run.rows], [f.id for f in r.findings],
             r.facts.intra_node, r.facts.inter_node) for r in reports]


@settings(max_examples=40)
@given(name=st.sampled_from(sorted(e["file"] for e in MANIFEST if not fixture_text(e["file"]).startswith("{"))),
       style=st.sampled_from(["ompi", "srun", "indent", "quote", "ray", "crlf"]),
       ranks=st.lists(st.integers(0, 63), min_size=1, max_size=5))
def test_launcher_prefixes_and_interleaved_tags_change_nothing(name, style, ranks):
    # JSON fixtures are files rccl-tests / nccl-tests write themselves (-x, -J), never a launcher's tagged stdout
    """Every line of a real fixture behind a launcher's tag (any rank, interleaved) reads the same."""
    text = fixture_text(name)
    assert _summary(_prefixed(text, style, ranks)) == _summary(text)


def test_hash_less_oldest_layout_reads_the_same():
    """The oldest nccl-tests printed its header, devices and columns without '#': strip them all."""
    for name in ("nccl_tests_293_a100pcie_2node_gdr_sys.txt", "aws_efa_eks_p4d_2x8_efa_gdrdma.txt"):
        text = fixture_text(name)
        bare = "\n".join(line.replace("# ", "", 1) if line.lstrip().startswith("#") or "<stdout>:#" in line else line
                         for line in text.splitlines())
        assert bare != text
        assert _summary(bare) == _summary(text)
        assert len(read_texts([("x", bare)]).runs[0].devices) == len(read_texts([("x", text)]).runs[0].devices)
