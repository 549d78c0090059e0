"""nccl-tests -J JSON and rccl-tests JSON lines.

No public run saved either format, so each document here is written from a real text fixture with the
writers' key names (nccl-tests src/util.cu, JSON_FILE_VERSION 3; rccl-tests src/common.cu
Reporter::addResult) and must read back to the same rows and facts as the text.
"""

import json

import pytest

from ringlab.nccl import ParseError, explain_texts, read_texts

from nccl_fixtures import fixture_text

NAME = "nccl_tests_369_gh200_2node_wrong.txt"


def _half(m):
    return None if m is None else {"time": m.time_us, "alg_bw": m.algbw, "bus_bw": m.busbw,
                                   "nwrong": None if m.wrong is None else float(m.wrong)}


def _nccl_tests_json(run) -> str:
    """What nccl-tests -J writes for ``run`` (root is written as the padded string of '%6i')."""
    return json.dumps({
        "version": 3, "start_time": "2026-01-23 10:00:00", "args": ["./build/all_reduce_perf", "-b", "8", "-e", "128M"],
        "env": ["NCCL_DEBUG=WARN"], "nccl_version": 22902,
        "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": 8, "maximum_bytes": 134217728, "step_factor": 2,
                   "devices": [{"rank": d.rank, "group": 0, "pid": 1, "hostname": d.host, "device": d.device,
                                "device_hex": d.bus_id, "device_info": d.name} for d in run.devices.values()]},
        "results": [{"size": r.size, "count": r.count, "type": r.dtype, "redop": r.redop, "root": f"{r.root:6d}",
                     "out_of_place": _half(r.out_of_place), "in_place": _half(r.in_place),
                     "actual_iterations": 20, "experiment_name": ""} for r in run.rows],
        "out_of_bounds": {"count": run.out_of_bounds, "okay": run.out_of_bounds == 0},
        "average_bus_bandwidth": {"bandwidth": run.avg_busbw, "okay": "unchecked"},
        "errors": [""], "end_time": "2026-01-23 10:00:05"}, indent=1)


def test_nccl_tests_json_reads_as_the_text_does():
    text_run = read_texts([("t", fixture_text(NAME))]).runs[0]
    (json_run,) = read_texts([("j.json", _nccl_tests_json(text_run))]).runs
    assert [(r.size, r.count, r.dtype, r.redop, r.root, r.out_of_place, r.in_place) for r in json_run.rows] == \
        [(r.size, r.count, r.dtype, r.redop, r.root, r.out_of_place, r.in_place) for r in text_run.rows]
    assert json_run.versions == {"nccl": "2.29.2"} and json_run.collective == "all_reduce"
    assert json_run.out_of_bounds == 4 and json_run.avg_busbw == text_run.avg_busbw
    (t,) = explain_texts([("t", fixture_text(NAME))])
    (j,) = explain_texts([("j.json", _nccl_tests_json(text_run))])
    assert (j.facts.world_size, j.facts.nodes, j.facts.gpu, j.peak_busbw) == \
        (t.facts.world_size, t.facts.nodes, t.facts.gpu, t.peak_busbw)
    assert j.findings[0].id == "correctness-failure"


def test_rccl_tests_json_lines():
    text_run = read_texts([("t", fixture_text("rccl_1129_mi100_iommu_pt.txt"))]).runs[0]
    lines = []
    for r in text_run.rows:
        for in_place, m in ((0, r.out_of_place), (1, r.in_place)):
            lines.append(json.dumps({"name": "AllReduce", "gpus": 2, "size": r.size, "type": r.dtype, "redop": r.redop,
                                     "inPlace": in_place, "time": m.time_us, "algBw": m.algbw, "busBw": m.busbw,
                                     "wrong": str(m.wrong)}, separators=(", ", ":")))
    (run,) = read_texts([("r.json", "\n".join(lines))]).runs
    assert run.collective == "all_reduce" and run.header["ranks"] == 2
    assert [(r.size, r.out_of_place, r.in_place) for r in run.rows] == \
        [(r.size, r.out_of_place, r.in_place) for r in text_run.rows]
    (rep,) = explain_texts([("r.json", "\n".join(lines))])
    assert rep.facts.world_size == 2 and rep.peak_busbw == pytest.approx(23.34e9)


@pytest.mark.parametrize("doc,message", [
    ({"results": "x"}, "needs a 'results' list"),
    ({"results": [{"size": 8}]}, r"results\[0\]"),
    ({"results": [{"size": 8, "count": 2, "type": "float", "out_of_place": {"time": 1.0}}]}, "alg_bw"),
    ({"hello": 1}, "neither nccl-tests"),
])
def test_json_of_another_shape_is_a_clear_error(doc, message):
    with pytest.raises(ParseError, match=message):
        read_texts([("bad.json", json.dumps(doc))])


def test_text_that_merely_starts_with_a_brace_is_read_as_text():
    with pytest.raises(ParseError, match=r"x:1: not nccl-tests output"):
        read_texts([("x", "{ not json at all")])
    text = "[1,0]<stdout>:" + fixture_text(NAME).replace("\n", "\n[1,0]<stdout>:")
    assert len(read_texts([("x", text)]).runs[0].rows) == 25
