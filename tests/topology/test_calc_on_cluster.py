"""DP/FSDP/HSDP and TP times from the cluster model, against closed forms of the rails and NVLink."""

import json

import pytest

from ringlab.calc import grad_comm_bytes
from ringlab.cli import main as cli
from ringlab.topology import get_cluster
from ringlab.topology.timing import group_cluster, rail_cluster, ring_link

M = 14_000_000_000  # 7e9 parameters in bf16


def test_p2_seven_b_at_64_h100s_orders_ddp_full_shard_hybrid_shard():
    c = get_cluster("dgx-h100", 8)
    t = {s: grad_comm_bytes(s, 7e9, 64, gpus_per_node=8).time_on_cluster(c)
         for s in ("ddp", "fsdp_full_shard", "hybrid_shard")}
    alpha = 5e-6  # one network step
    # DDP: 2(N-1)/N M over the node's 8 x 50 GB/s, 126 ring steps
    assert t["ddp"] == pytest.approx(2 * 63 / 64 * M / 400e9 + 126 * alpha)
    # FULL_SHARD: three (N-1)/N M collectives over the same rails
    assert t["fsdp_full_shard"] == pytest.approx(3 * 63 / 64 * M / 400e9 + 3 * 63 * alpha)
    # HYBRID_SHARD: three (G-1)/G M inside the node at 450 GB/s, then 2(K-1)/K x M/G on each GPU's 50 GB/s rail
    intra = 3 * (7 / 8 * M / 450e9 + 7 * 2e-6)
    inter = 2 * 7 / 8 * (M / 8) / 50e9 + 14 * alpha
    assert t["hybrid_shard"] == pytest.approx(intra + inter)
    assert t["ddp"] < t["fsdp_full_shard"] < t["hybrid_shard"]
    assert 0.065 < t["ddp"] < 0.075 and 0.10 < t["fsdp_full_shard"] < 0.11  # not the single-NIC 0.55 s / 0.83 s


def test_groups_map_onto_the_parts_of_the_cluster_they_use():
    c = get_cluster("dgx-h100", 4)
    assert group_cluster(c, 8).nodes == 1 and group_cluster(c, 4).gpus_per_node == 4
    assert group_cluster(c, 16).nodes == 2
    with pytest.raises(ValueError, match="part of a"):
        group_cluster(c, 12)
    assert rail_cluster(c).node_network_bandwidth == pytest.approx(50e9)  # each GPU's share: one NIC
    assert ring_link(group_cluster(c, 1), "all_reduce").alpha == 0.0


def test_cluster_shape_must_match_the_strategy():
    with pytest.raises(ValueError, match="differs"):
        grad_comm_bytes("ddp", 7e9, 32).time_on_cluster(get_cluster("dgx-h100", 8))
    with pytest.raises(ValueError, match="shards over 4"):
        grad_comm_bytes("hybrid_shard", 7e9, 64, gpus_per_node=4).time_on_cluster(get_cluster("dgx-h100", 8))


def test_calc_comm_cli_takes_the_topology(capsys):
    assert cli(["calc", "comm", "--strategy", "fsdp_full_shard", "--params", "7e9", "--topology", "dgx-h100",
                "--nodes", "8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["world_size"] == 64 and data["time_s"] == pytest.approx(3 * 63 / 64 * M / 400e9 + 3 * 63 * 5e-6)
    assert cli(["calc", "comm", "--strategy", "hybrid_shard", "--params", "7e9", "--world-size", "64",
                "--topology", "dgx-h100"]) == 0
    assert "143.0 ms" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--topology", "dgx-h100", "--world-size", "60"], "multiple of 8"),
    (["--topology", "dgx-h100", "--nodes", "2", "--world-size", "8"], "differs"),
    (["--nodes", "2", "--world-size", "16"], "needs --topology"),
    (["--topology", "dgx-h100", "--nodes", "2", "--bandwidth", "50GB"], "give one of them"),
])
def test_calc_comm_topology_errors(argv, message, capsys):
    assert cli(["calc", "comm", "--strategy", "ddp", "--params", "7e9"] + argv) == 2
    assert message in capsys.readouterr().err


def test_calc_decode_tp_inside_the_domain_is_far_cheaper_than_across_nodes(capsys):
    args = ["calc", "decode", "--model", "llama-2-70b", "--hardware", "h100-sxm", "--context", "4096",
            "--batch", "32", "--topology", "dgx-h100", "--json"]
    assert cli(args + ["--tp", "8"]) == 0
    inside = json.loads(capsys.readouterr().out)
    assert cli(args + ["--tp", "16"]) == 0
    across = json.loads(capsys.readouterr().out)
    assert inside["topology"]["bandwidth_Bps"] == pytest.approx(450e9)  # NVLink port
    assert across["topology"]["bandwidth_Bps"] == pytest.approx(400e9)  # the node's rails
    assert across["step"]["comm_time_s"] > 4 * inside["step"]["comm_time_s"]  # 30 network steps per all-reduce
    assert cli(args[:-1] + ["--tp", "8", "--fabric", "nvlink4"]) == 2
