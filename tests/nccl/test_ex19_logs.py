"""The logs 16a's grader writes read back through ringlab.nccl as described: an independent check of the
grader's line formats (ringlab.nccl's parsers were built on real logs, tests/fixtures/nccl)."""

from hypothesis import given, settings

from ringlab.check.graders.reading_nccl import diagnose_cases, diagnose_strategy, nccl_log, truth
from ringlab.nccl import explain_texts

LABEL = {"IB": "IB", "RoCE": "RoCE", "Socket": "Socket", "EFA": "EFA"}


def _check(case):
    (report,) = explain_texts([("16a", nccl_log(**case))])
    f = report.facts
    nodes, gpus = case["nodes"], case["gpus_per_node"]
    assert (f.nodes, f.gpus_per_node, f.world_size) == (nodes, gpus, nodes * gpus)
    assert len(report.run.rows) == len(case.get("wrong", ((0, 0),) * 4))
    checked = case.get("checked", True)
    wrong = checked and any(a or b for a, b in case.get("wrong", ()))
    assert report.correctness_failure == wrong
    if not checked:  # -c 0: every #wrong reads N/A, which ringlab keeps as "not checked"
        assert all(m.wrong is None for row in report.run.rows for m in (row.out_of_place, row.in_place))
    gdr = case.get("gdrdma", (True, True))
    if gpus > 1:
        assert f.intra_node == [case["intra"]]  # no GPU name in the log: P2P without its link class
    if nodes > 1:
        base = LABEL[case["inter"]]
        want = {base + ("+GDRDMA" if g and case["inter"] != "Socket" else "") for g in gdr}
        assert set(f.inter_node) == want
    transport, healthy, _ = truth(**case)
    assert transport in ("P2P", "SHM", "IB", "Socket", "EFA")
    if healthy:
        assert not wrong and "Socket" not in f.inter_node


def test_fixed_cases_read_back():
    for case in diagnose_cases():
        _check(case)


@settings(max_examples=40, deadline=None)
@given(diagnose_strategy())
def test_drawn_cases_read_back(case):
    _check(case)
