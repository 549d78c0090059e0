"""``ringlab cost``: table, JSON, errors."""

import json

import pytest

from ringlab.cli import main as cli_main
from ringlab.collectives import algorithms_for
from ringlab.commands.cost import main


def test_issue_example_prints_every_algorithm(capsys):
    assert cli_main(["cost", "--collective", "all_reduce", "--world-size", "64", "--size", "1GiB",
                     "--fabric", "nvlink4"]) == 0
    out = capsys.readouterr().out
    for name in algorithms_for("all_reduce"):
        assert name in out
    assert "1,073,741,824 B" in out and "450 GB/s per direction" in out
    # ring at N=64 on 1 GiB: 2 * 2**30 - 2 * 2**30 // 64 bytes from the busiest rank, 126 steps
    ring_line = next(line for line in out.splitlines() if line.startswith("ring "))
    assert "2,113,929,216" in ring_line and " 126 " in ring_line
    assert "ring beats double_binary_tree: above 3,283,200,000 B" in out


def test_json_output(capsys):
    assert main(["--collective", "broadcast", "--world-size", "16", "--size", "64MB", "--fabric", "ib-ndr",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["message_bytes"] == 64_000_000 and data["fabric"]["bandwidth_Bps"] == 50e9
    assert [r["algorithm"] for r in data["algorithms"]] == ["binomial_tree", "scatter_allgather"]
    assert data["crossover_bytes"]["against"] == "scatter_allgather"


def test_custom_alpha_and_bandwidth(capsys):
    assert main(["--world-size", "2", "--size", "1000", "--alpha", "0", "--bandwidth", "1000", "--json"]) == 0
    ring = json.loads(capsys.readouterr().out)["algorithms"][0]
    assert ring["algorithm"] == "ring" and ring["seconds"] == pytest.approx(1.0)  # 1000 B at 1000 B/s


@pytest.mark.parametrize("argv, message", [(["--fabric", "nvlnk4"], "did you mean nvlink4"),
                                           (["--size", "12XB"], "cannot parse size"),
                                           (["--world-size", "0"], "world-size")])
def test_errors_exit_2_with_a_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_all_to_all_has_no_crossover_line(capsys):
    assert main(["--collective", "all_to_all", "--world-size", "8", "--size", "8MiB"]) == 0
    out = capsys.readouterr().out
    assert "pairwise" in out and "beats" not in out


def test_identical_costs_are_reported_as_ties(capsys):
    from ringlab.commands.cost import main as cost_main

    assert cost_main(["--collective", "all_reduce", "--world-size", "2", "--size", "1MB", "--fabric", "ib-ndr"]) == 0
    out = capsys.readouterr().out
    # at N=2 ring, Rabenseifner and the double binary tree all send M/2 twice in 2 steps: the same line
    assert "ring ties with rabenseifner" in out and "ring beats rabenseifner" not in out
