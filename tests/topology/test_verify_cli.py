"""``ringlab verify --topology``: the topology-aware algorithms checked from the command line."""

import json

import pytest

from ringlab.cli import main


def test_verify_on_a_cluster_reports_every_check(capsys):
    assert main(["verify", "--topology", "dgx-h100", "--algorithm", "nvls_tree", "--nodes", "2,3", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] and [r["nodes"] for r in data["rows"]] == [2, 3]
    assert all(r["closed_form"] is True and r["results"] for r in data["rows"])


def test_default_node_counts_are_those_the_algorithm_applies_to(capsys):
    assert main(["verify", "--topology", "dgx-h100", "--algorithm", "nvls"]) == 0
    out = capsys.readouterr().out
    assert "ALL CHECKS PASSED: 1/1 node counts" in out  # NVLS is one NVLink domain


@pytest.mark.parametrize("argv, message", [
    (["--topology", "mi300x-platform", "--algorithm", "nvls"], "no in-switch reduction"),
    (["--topology", "dgx-h100", "--dtype", "bf16"], "leave --world-sizes"),
    (["--nodes", "2"], "--nodes needs --topology"),
    (["--topology", "dgx-h10"], "did you mean dgx-h100"),
])
def test_verify_topology_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["verify"] + argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err
