"""``ringlab explain``: text, JSON keys, stdin, several files as one run, --plot, exit codes 0 / 1 / 2."""

import io
import json
import subprocess
import sys

import pytest

from ringlab.cli import main as cli_main

from nccl_fixtures import FIXTURES, fixture_text

ISSUE_KEYS = ["collective", "nodes", "gpus_per_node", "world_size", "gpu", "transports", "peak_busbw",
              "expected_busbw", "efficiency", "findings"]


def test_text_report_and_exit_zero(capsys):
    assert cli_main(["explain", str(FIXTURES / "nccl_tests_293_a100pcie_2node_nps4_no_gdr.txt"), "--nic-gbps", "200"]) == 0
    out = capsys.readouterr().out
    assert "all_reduce, 2 ranks, 2 node(s), 1 GPU(s)/node, NVIDIA A100-PCIE-40GB" in out
    assert "[no-gdrdma]" in out and "[low-efficiency]" in out and "peak busbw 9.00 GB/s" in out


def test_json_has_the_issue_keys_in_bytes_per_second(capsys):
    assert cli_main(["explain", str(FIXTURES / "skypilot_gke_h200_2x8_all_gather_rdma.txt"), "--json",
                     "--nics", "8", "--nic-gbps", "400"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data)[:len(ISSUE_KEYS)] == ISSUE_KEYS
    assert data["peak_busbw"] == pytest.approx(332.58e9) and data["expected_busbw"] == pytest.approx(400e9)
    assert data["efficiency"] == pytest.approx(332.58 / 400)
    assert all(set(f) == {"id", "message", "evidence"} for f in data["findings"])
    assert data["transports"] == {"intra_node": [], "inter_node": []}


def test_correctness_failure_exits_one(capsys):
    assert cli_main(["explain", str(FIXTURES / "nccl_tests_369_gh200_2node_wrong.txt")]) == 1
    assert "[correctness-failure]" in capsys.readouterr().out.split("findings:")[1].splitlines()[1]


def test_stdin(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(fixture_text("rccl_1129_mi100_iommu_pt.txt")))
    assert cli_main(["explain", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["source"] == "<stdin>"


def test_table_and_separate_log_files_make_one_run(tmp_path, capsys):
    """A table in one file and NCCL_DEBUG lines in another (NCCL_DEBUG_FILE) describe the same run."""
    lines = fixture_text("nccl_tests_293_a100pcie_2node_gdr_sys.txt").splitlines()
    log = [ln for ln in lines if " NCCL INFO " in ln or ln.startswith("NCCL version")]
    table = [ln for ln in lines if ln not in log]
    (tmp_path / "out.txt").write_text("\n".join(table))
    (tmp_path / "nccl.test1.5425.log").write_text("\n".join(log))
    assert cli_main(["explain", str(tmp_path / "out.txt"), str(tmp_path / "nccl.test1.5425.log"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["transports"]["inter_node"] == ["IB+GDRDMA"] and data["versions"]["nccl"] == "2.21.5+cuda12.4"
    assert data["world_size"] == 2 and len(data["rows"]) == 28


def test_several_runs_give_a_json_list(capsys):
    assert cli_main(["explain", str(FIXTURES / "rccl_1129_mi100_p2p_disabled.txt"),
                     str(FIXTURES / "rccl_1129_mi100_iommu_pt.txt"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["peak_busbw"] for d in data] == [pytest.approx(11.01e9), pytest.approx(23.34e9)]


def test_plot_writes_a_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "busbw.png"
    assert cli_main(["explain", str(FIXTURES / "cscs_gh200_2x4_slingshot_cxi.txt"),
                     str(FIXTURES / "cscs_gh200_2x4_cxi_hook_disabled.txt"), "--nics", "4", "--nic-gbps", "200",
                     "--plot", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv,message", [
    (["explain", "/nonexistent/file.txt"], "No such file"),
    (["explain", str(FIXTURES / "MANIFEST.json")], "neither nccl-tests"),
    (["explain", str(FIXTURES / "nccl_tests_293_a100pcie_2node_gdr_sys.txt"), "--nics", "0"], "argument --nics: '0': integer must be >= 1"),
    (["explain", "-", "-"], "stdin"),
])
def test_usage_errors_exit_two_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli_main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_unparseable_file_names_the_line(tmp_path, capsys):
    bad = tmp_path / "notes.txt"
    bad.write_text("\n\nhello, this is my training log\nloss 0.3\n")
    with pytest.raises(SystemExit) as exc:
        cli_main(["explain", str(bad)])
    assert exc.value.code == 2
    assert f"{bad}:3: not nccl-tests output" in capsys.readouterr().err


def test_import_stays_light():
    code = ("import sys, ringlab.nccl, ringlab.commands.explain; "
            "print(sorted(m for m in ('torch', 'matplotlib', 'ipywidgets') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_listed_in_ringlab_help(capsys):
    assert cli_main(["--help"]) == 0
    assert "explain" in capsys.readouterr().out
