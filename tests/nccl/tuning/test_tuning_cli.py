"""ringlab cost --nccl, ringlab explain with a TUNING table, the cluster estimate and the knobs."""

import json
import re
from pathlib import Path

import pytest

from ringlab.cli import main
from ringlab.nccl import findings as findings_module
from ringlab.nccl.tuning import FINDING_KNOBS, KNOBS, comm_for_cluster
from ringlab.nccl.tuning.sweep import sweep_sizes
from ringlab.topology import get_cluster

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "nccl" / "tuning" / \
    "nccl_2_29_7_rtx5090_2x1_socket_broadcast.txt"


def run(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as exc:
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_dgx_h100_graph_matches_the_published_graph_line():
    """NVIDIA/nccl#1197 (2.19.4, 8 H100): 'Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000', and
    NVLS 'nChannels 8, bw 40.000000/60.000000'; logs print '24 coll channels'."""
    comm = comm_for_cluster(get_cluster("dgx-h100", 1), "2.19").comm
    assert (comm.ring.n_channels, comm.ring.bw_intra, comm.ring.bw_inter) == (12, 30.0, 30.0)
    assert (comm.nvls.n_channels, comm.nvls.bw_intra, comm.nvls.bw_inter) == (8, 40.0, 60.0)
    assert comm.channels == 24


def test_cluster_refusals():
    with pytest.raises(ValueError, match="RCCL"):
        comm_for_cluster(get_cluster("mi300x-platform", 1))
    from ringlab.topology import custom_cluster

    with pytest.raises(ValueError, match="compcap is needed"):
        comm_for_cluster(custom_cluster(1, 4, 450e9))
    assert comm_for_cluster(custom_cluster(1, 4, 450e9), compcap=90).comm.min_compcap == 90


def test_cost_nccl_table(capsys):
    rc, out, err = run(capsys, "cost", "--topology", "dgx-h100", "--nodes", "2", "--size", "1MiB", "--nccl")
    assert rc == 0, err
    assert "NCCL 2.30's choice" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("1,048,576"))
    assert re.search(r"TREE/LL128\s+16\s+60\.4", row)
    assert len([ln for ln in out.splitlines() if re.match(r"\s*[\d,]+\s+[\d.]+ [KMG]iB", ln)]) == len(sweep_sizes(2**20))


def test_cost_nccl_json_and_env(capsys):
    rc, out, _ = run(capsys, "cost", "--topology", "dgx-h100", "--nodes", "2", "--size", "1MiB", "--nccl", "--json",
                     "--nccl-env", "NCCL_PROTO=Simple", "--nccl-version", "2.19")
    data = json.loads(out)["nccl"]
    assert rc == 0 and data["version"] == "2.19" and data["env"] == {"NCCL_PROTO": "Simple"}
    assert {s["protocol"] for s in data["sizes"]} == {"Simple"}


@pytest.mark.parametrize("argv, message", [
    (["--topology", "dgx-h100", "--nccl", "--nccl-env", "NCCL_ALGO=Foo"], "NCCL_ALGO"),
    (["--topology", "dgx-h100", "--nccl", "--nccl-env", "PROTO"], "NAME=VALUE"),
    (["--topology", "dgx-h100", "--nccl", "--nccl-env", "NCCL_MAX_NCHANNELS=0"], "NCCL_MAX_NCHANNELS"),
    (["--topology", "mi300x-platform", "--nccl"], "RCCL"),
    (["--topology", "dgx-h100", "--collective", "all_to_all", "--nccl"], "send/recv"),
    (["--nccl"], "needs --topology"),
    (["--topology", "dgx-h100", "--nccl-env", "NCCL_PROTO=LL"], "--nccl-env needs --nccl"),
    (["--topology", "dgx-h100", "--nccl-version", "2.19", "--compcap", "90"],
     "--nccl-version and --compcap need --nccl"),
    (["--nccl-version", "2.19"], "--nccl-version needs --topology"),
    (["--topology", "dgx-h100", "--nccl", "--nccl-version", "2.4"], "invalid choice"),
])
def test_cost_nccl_refusals(capsys, argv, message):
    rc, _out, err = run(capsys, "cost", "--size", "1MiB", *argv)
    assert rc == 2 and message in err and "Traceback" not in err


def test_explain_says_what_nccl_expected(capsys):
    rc, out, err = run(capsys, "explain", str(FIXTURE))
    assert rc == 0, err
    assert "1,048,576 B: NCCL expected 459.3 us with Ring/Simple; measured 2,396.0 us" in out
    assert "16,384 B: NCCL expected 23.0 us with Ring/LL" in out
    rc, out, _ = run(capsys, "explain", "--json", str(FIXTURE))
    exp = json.loads(out)["nccl_expected"]
    first = exp[0]
    # 1 KiB on Ring/LL: 9.3 us + 1024 B / (1000 x 1.2 GB/s), from the printed table
    assert first["bytes"] == 1024 and first["expected_s"] == pytest.approx((9.3 + 1024 / 1200) * 1e-6)
    assert first["measured_s"] == pytest.approx(2239.78e-6)


def test_findings_name_their_variables(capsys):
    _rc, out, _ = run(capsys, "explain", "--json", str(FIXTURE))
    found = {f["id"]: f["message"] for f in json.loads(out)["findings"]}
    assert "NCCL_P2P_DISABLE" in found["p2p-disabled-shm"] and "NCCL_SHM_DISABLE" in found["p2p-disabled-shm"]


def test_knob_tables():
    ids = set(re.findall(r"^``([a-z0-9-]+)``", findings_module.__doc__, re.MULTILINE))
    assert set(FINDING_KNOBS) <= ids
    for name in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE",
                 "NCCL_NET_GDR_LEVEL", "NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_HCA",
                 "NCCL_CROSS_NIC", "NCCL_BUFFSIZE", "NCCL_NTHREADS"):
        assert name in KNOBS and KNOBS[name].source
    assert {k for k, v in KNOBS.items() if v.modelled} >= {"NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS",
                                                           "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE"}


def test_explain_reads_the_time_on_old_choice_lines():
    """NVIDIA/nccl#1595 quotes such a line: '[0] NCCL INFO 1026048 Bytes -> Algo 1 proto 2 time 34.693867'."""
    from ringlab.nccl import explain_texts

    (report,) = explain_texts([("log", "[0] NCCL INFO 1026048 Bytes -> Algo 1 proto 2 time 34.693867\n")])
    (exp,) = report.as_dict()["nccl_expected"]
    assert (exp["bytes"], exp["algorithm"], exp["protocol"]) == (1026048, "Ring", "Simple")
    assert exp["expected_s"] == pytest.approx(34.693867e-6) and exp["measured_s"] is None
    assert "1,026,048 B: NCCL expected 34.7 us with Ring/Simple; measured no row" in report.text()
