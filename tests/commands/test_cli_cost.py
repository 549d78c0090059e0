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
                                           (["--size", "12XB"], "12XB"),
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


def test_a_million_ranks_in_closed_form(capsys):
    """Closed forms are vectorised: a million ranks is as valid an input as 64 (timing is in benchmarks/)."""
    n = 1_000_000
    assert main(["--collective", "all_reduce", "--world-size", str(n), "--size", "1GiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    ring = next(r for r in data["algorithms"] if r["algorithm"] == "ring")
    # 2 (N - 1) steps; the busiest rank skips two of the smaller chunks (ceil(2**30 / N) - 1 bytes each)
    assert ring["steps"] == 2 * (n - 1)
    chunk = -(-2**30 // n)  # array_split: the first 2**30 % N chunks hold one byte more
    assert ring["bytes_per_rank_max"] == 2 * 2**30 - 2 * (chunk - 1)


def test_topology_json_keeps_the_keys_and_adds_the_cluster_view(capsys):
    assert main(["--topology", "dgx-h100", "--nodes", "2", "--size", "1GiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["algorithm"]: r for r in data["algorithms"]}
    assert data["world_size"] == 16 and data["topology"]["nic_bandwidth_Bps"] == 50e9  # 400 Gb/s
    ring = rows["ring_channels"]
    assert ring["line_rate_busbw"] == pytest.approx(400e9) and ring["bottleneck_class"] == "nic"
    assert ring["inter_node_fraction"] == pytest.approx(2 / 16)  # each GPU sends one channel of 8 off the node
    assert ring["busbw"] == pytest.approx(2 * 15 / 16 * 2**30 / ring["seconds"])
    assert rows["ring"]["busbw"] < 50e9  # one ring: every crossing through one NIC, the single-NIC picture
    assert {"nvlink", "pcie", "nic"} <= set(ring["bytes_per_link_class"])
    assert [s["algorithm"] for s in data["skipped"]] == ["nvls"]


def test_topology_table_names_the_bottleneck(capsys):
    assert main(["--topology", "mi300x-platform", "--size", "256MB", "--algorithm", "ring_channels"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the header wraps at 100 columns
    assert "node 0 xgmi gpu" in out and "full mesh, 64 GB/s per link" in out


def test_custom_topology_from_flags(capsys):
    assert main(["--topology", "custom", "--gpus-per-node", "4", "--gpu-gbs", "100", "--nodes", "2", "--nics", "4",
                 "--nic-gbps", "200", "--size", "64MB", "--algorithm", "ring_channels", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["algorithms"][0]
    assert row["line_rate_busbw"] == pytest.approx(4 * 25e9)


@pytest.mark.parametrize("argv, message", [
    (["--topology", "dgx-h10"], "did you mean dgx-h100"),
    (["--topology", "dgx-h100", "--nodes", "2", "--world-size", "8"], "disagrees"),
    (["--topology", "dgx-h100", "--nodes", "2", "--algorithm", "nvls"], "one NVLink domain"),
    (["--topology", "dgx-h100", "--fabric", "ib-ndr", "--alpha", "1"], "flat link"),
    (["--topology", "custom", "--nodes", "2"], "--gpus-per-node"),
    (["--topology", "dgx-h100", "--nics", "4"], "custom only"),
    (["--nodes", "2"], "need --topology"), (["--channels", "4"], "needs --topology"),
    (["--topology", "dgx-h100", "--nodes", "0"], "nodes"),
])
def test_topology_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_busiest_rank_never_sends_more_than_n_minus_one_messages():
    """The premise of collectives.cost.BYTES_MAX: no algorithm's busiest rank sends more than (N - 1) M bytes."""
    from ringlab.collectives import ALGORITHMS
    from ringlab.collectives.cost import busiest_bytes

    for collective, algorithm in ALGORITHMS:
        for n in range(1, 34):
            for m in (1, 7, 64, 1000, 4097):
                assert busiest_bytes(collective, algorithm, n, m) <= max(n - 1, 1) * m, (collective, algorithm, n, m)


@pytest.mark.parametrize("world_size, size", [(64, 2**61 // 63), (2, 2**60), (2**21, 2**40), (2**22, 1)])
def test_byte_counts_up_to_the_bound_are_exact(world_size, size, capsys):
    """Issue 31: --world-size 64 --size 1000PiB and --world-size 2097152 overflowed int64 (direct all-reduce)."""
    assert main(["--world-size", str(world_size), "--size", str(size), "--json"]) == 0
    rows = {r["algorithm"]: r for r in json.loads(capsys.readouterr().out)["algorithms"]}
    assert rows["direct"]["bytes_per_rank_max"] == (world_size - 1) * size  # Python ints: the exact count
    q, r = divmod(size, world_size)  # ring: the busiest rank skips the smallest two adjacent chunks
    skipped = 2 * q + (1 if world_size - r < 2 else 0) if world_size > 1 else size * 2
    assert rows["ring"]["bytes_per_rank_max"] == (2 * size - skipped if world_size > 1 else 0)


@pytest.mark.parametrize("argv", [["--world-size", "64", "--size", "1000PiB"], ["--world-size", "4194304", "--size",
                                                                                "1PiB"],
                                  ["--topology", "dgx-h100", "--nodes", "2", "--size", "1000PiB"]])
def test_byte_counts_beyond_the_bound_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "2**" in err and "Traceback" not in err


def test_large_world_sizes_print_their_crossovers(capsys):
    for n in ("2097152", "4194303"):
        assert main(["--world-size", n]) == 0
        assert "ring beats direct: above" in capsys.readouterr().out
