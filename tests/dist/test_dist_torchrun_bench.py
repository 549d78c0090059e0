"""``ringlab bench`` across "machines": two torchrun launches on loopback, read back by ``ringlab explain``.

The table the bench prints is checked against the CSV the same run wrote (what it measured): same
sizes, every ``#wrong`` 0, the peak busbw explain reports equal to the CSV's largest busbw as printed
(two decimals), and the world size and node count that torchrun was given.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ringlab.cli import main
from ringlab.dist.bench import BenchRow, format_table, torchrun_environment
from ringlab.nccl import explain_texts

pytestmark = pytest.mark.slow  # torchrun launches two nodes on loopback: seconds each

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")
FIXTURES = REPO / "tests" / "fixtures" / "nccl"
GENERATED = json.loads((FIXTURES / "MANIFEST.json").read_text())["generated"]
IMPLEMENTATIONS = ["torch.distributed", "ringlab ring"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_against_csv(text: str, rows: list[dict], source: str, nodes: int = 2, world_size: int = 2) -> None:
    """explain's reading of the bench's table equals what the bench measured (its CSV rows)."""
    reports = explain_texts([(source, text)])
    assert [r.run.implementation for r in reports] == IMPLEMENTATIONS
    for report, who in zip(reports, ("library", "ringlab")):
        f = report.facts
        assert (f.collective, f.world_size, f.nodes, f.gpus_per_node) == ("all_reduce", world_size, nodes,
                                                                          world_size // nodes)
        assert [r.size for r in report.run.rows] == [int(c["size_bytes"]) for c in rows]
        assert [r.count for r in report.run.rows] == [int(c["count"]) for c in rows]
        assert all(m.wrong == 0 for r in report.run.rows for m in r.measures())
        assert not report.correctness_failure
        measured = max(float(c[f"{who}{half}_busbw_GBps"]) for c in rows for half in ("", "_in_place"))
        assert report.peak_busbw == pytest.approx(round(measured, 2) * 1e9, abs=1e3)
        printed = [m.busbw for r in report.run.rows for m in r.measures()]
        assert report.run.avg_busbw == pytest.approx(sum(printed) / len(printed), abs=0.006)


def test_two_torchrun_nodes_on_loopback(tmp_path):
    """``--nnodes 2 --nproc-per-node 1``, node ranks 0 and 1, static rendezvous at 127.0.0.1: gloo."""
    port = free_port()
    procs = []
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                                                             "MASTER_PORT")}
    try:
        for node in (0, 1):
            cmd = [str(TORCHRUN), "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(node),
                   "--master-addr", "127.0.0.1", "--master-port", str(port), "-m", "ringlab", "bench",
                   "--min-bytes", "4KiB", "--max-bytes", "256KiB", "--iters", "2", "--warmup", "1",
                   "--timeout", "40", "--csv", str(tmp_path / f"node{node}.csv")]
            procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, start_new_session=True))
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:  # a hung or failed launch: kill it and the ranks it started (its own session)
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(10)
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, err[-3000:]
    (out0, _), (out1, _) = outputs
    assert out1 == "" and not (tmp_path / "node1.csv").exists()  # rank 0 prints and writes for every rank
    rows = list(csv.DictReader((tmp_path / "node0.csv").open()))
    assert [int(r["size_bytes"]) for r in rows] == [4096 * 2**k for k in range(7)]
    check_against_csv(out0, rows, "torchrun")


@pytest.mark.parametrize("entry", GENERATED, ids=lambda e: e["file"])
def test_stored_bench_run_reads_as_measured(entry):
    text = (FIXTURES / entry["file"]).read_text()
    rows = list(csv.DictReader((FIXTURES / entry["measured"]).open()))
    expect = entry["expect"]
    check_against_csv(text, rows, entry["file"], expect["nodes"], expect["world_size"])


def _devices(n, nodes):
    per_node = n // nodes
    return [{"rank": r, "pid": 100 + r, "host": "h", "node": r // per_node, "device": r % per_node,
             "bus": "cpu", "name": "CPU test"} for r in range(n)]


@settings(max_examples=25, deadline=None)
@given(n=st.sampled_from([2, 3, 4, 8]), collective=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]),
       times=st.lists(st.floats(1.0, 5e4), min_size=4, max_size=4), log2=st.integers(10, 24),
       wrong=st.integers(0, 3))
def test_table_round_trips_through_explain(n, collective, times, log2, wrong):
    """Hand-built rows: explain reads back sizes, busbw = S / t x nccl-tests' factor, #wrong and shape."""
    count = 2**log2 // 4 // n * n  # float32 elements, divisible by n as the bench makes them
    size = 4 * count
    factor = {"all_reduce": 2 * (n - 1) / n}.get(collective, (n - 1) / n)
    row = BenchRow(collective, n, "gloo", "float32", size, count, times[0], times[1], times[2], times[3],
                   0, wrong, 0, 0)
    text = format_table([row], _devices(n, 2 if n % 2 == 0 else 1), size, size, 2, 1)
    lib, ring = explain_texts([("t", text)])
    for report, (t_out, t_in) in ((lib, (times[0], times[2])), (ring, (times[1], times[3]))):
        (r,) = report.run.rows
        assert (r.size, r.count, report.facts.world_size, report.facts.collective) == (size, count, n, collective)
        assert report.facts.nodes == (2 if n % 2 == 0 else 1)
        for m, t in ((r.out_of_place, t_out), (r.in_place, t_in)):
            assert m.busbw == pytest.approx(size / (t * 1e-6) / 1e9 * factor, abs=0.006)
    assert lib.run.rows[0].in_place.wrong == wrong and lib.correctness_failure == (wrong > 0)
    assert not ring.correctness_failure


def test_two_launches_on_one_host_count_as_the_nodes_torchrun_ran():
    text = format_table([BenchRow("all_reduce", 2, "gloo", "float32", 1024, 256, 5.0, 6.0, 5.0, 6.0)],
                        _devices(2, 2), 1024, 1024, 1, 0)
    assert " h/node0 device" in text and " h/node1 device" in text
    real = [dict(d, host=f"host{d['node']}") for d in _devices(2, 2)]
    assert "/node" not in format_table([BenchRow("all_reduce", 2, "gloo", "float32", 1024, 256, 5.0, 6.0, 5.0, 6.0)],
                                       real, 1024, 1024, 1, 0)


def test_torchrun_environment_is_all_or_nothing():
    full = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert torchrun_environment({}) is None
    assert torchrun_environment(full) == full
    with pytest.raises(ValueError, match="MASTER_PORT"):
        torchrun_environment({k: v for k, v in full.items() if k != "MASTER_PORT"})
    with pytest.raises(ValueError, match="RANK='x'"):
        torchrun_environment(dict(full, RANK="x"))


def test_world_size_that_contradicts_torchrun_is_refused(monkeypatch, capsys):
    for key, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": "1"}.items():
        monkeypatch.setenv(key, value)
    assert main(["bench", "--world-size", "4"]) == 2
    assert "WORLD_SIZE is 2" in capsys.readouterr().err
