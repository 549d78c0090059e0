"""NCCL_DEBUG lines, one format at a time (formats from NCCL's sources; the example lines are real, quoted
from public logs), and the facts and findings they lead to."""

import pytest

from ringlab.nccl import explain_texts
from ringlab.nccl.debuglog import LogFacts
from ringlab.nccl.lines import split_lines


def _log(*lines):
    facts = LogFacts()
    for line in split_lines("\n".join(lines)):
        assert facts.add(line), line.raw
    return facts


@pytest.mark.parametrize("line,transport,net,nic,gdr", [
    ("tpgds-aihub0008:207007:207007 [0] NCCL INFO Channel 00/0 : 1[1] -> 8[0] [receive] via NET/IB/0/GDRDMA", "NET", "IB", 0, True),
    ("test1:3595:3609 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IBext_v8/0", "NET", "IB", 0, False),
    ("n013:101855:101890 [0] NCCL INFO Channel 00/1 : 1[81000] -> 0[81000] [receive] via NET/IB/1/GDRDMA/Shared", "NET", "IB", 1, True),
    ("NCCL INFO Channel 03/0 : 11[3] -> 3[3] [send] via NET/NCCL RDMA Plugin v9/3/GDRDMA", "NET", "IB", 3, True),
    ("nid001261:1906368:1908389 [0] NCCL INFO Channel 01/1 : 4[0] -> 0[0] [receive] via NET/AWS Libfabric/7/GDRDMA/Shared",
     "NET", "OFI", 7, True),
    ("esm2-worker-0:53:271 [0] NCCL INFO Channel 00/0 : 2[0] -> 3[0] [receive] via NET/Socket/0", "NET", "Socket", 0, False),
    ("ip-192-168-2-54:14:20 [0] NCCL INFO Ring 01 : 0[160] -> 1[160] [send] via NET/AWS Libfabric/0", "NET", "OFI", 0, False),
    ("nf5688m7-1:422771:422787 [1] NCCL INFO Channel 00/0 : 1[1] -> 2[2] via P2P/direct pointer", "P2P", None, None, False),
    ("3767c65d25c4:880:887 [0] NCCL INFO Channel 10/0 : 0[0] -> 1[1] via P2P/direct pointer/read", "P2P", None, None, False),
    ("ip-172-31-6-104:9922:9980 [1] NCCL INFO Channel 01 : 9[101d0] -> 8[101c0] via P2P/IPC/read", "P2P", None, None, False),
    ("NCCL INFO Channel 00 : 2[2] -> 1[1] via P2P/CUMEM", "P2P", None, None, False),
    ("GENOA-06:4766:4787 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct", "SHM", None, None, False),
    ("node:1:2 [0] NCCL INFO Channel 00 : 0[2000] -> 1[3000] via direct shared memory", "SHM", None, None, False),
])
def test_connections(line, transport, net, nic, gdr):
    (c,) = _log(line).connections
    assert (c.transport, c.net, c.nic, c.gdrdma) == (transport, net, nic, gdr)


def test_communicator_rings_trees_channels():
    facts = _log("test1:5425:5439 [0] NCCL INFO comm 0x563a62844c90 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
                 "3767c65d25c4:855:864 [0] NCCL INFO Channel 23/24 :    0   1   2   3",
                 "GENOA-06:4766:4781 [1] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] -1/-1/-1->1->0",
                 "3767c65d25c4:880:888 [1] NCCL INFO 24 coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels, "
                 "32 p2p channels per peer")
    assert (facts.nranks, facts.nnodes, facts.local_ranks) == (2, 2, 1)
    assert facts.ring_channels == 24 and facts.trees == 2 and facts.coll_channels == 24 and facts.nvls_channels == 0
    assert facts.hosts == {"test1", "3767c65d25c4", "GENOA-06"}


def test_older_communicator_and_channel_lines():
    facts = _log("server2:23920:24013 [7] NCCL INFO comm 0x7f5780001ca0 rank 15 nranks 32 cudaDev 7 nvmlDev 7 - Init COMPLETE",
                 "ip-172-31-6-104:9921:9986 [0] NCCL INFO 2 coll channels, 2 p2p channels, 1 p2p channels per peer")
    assert facts.nranks == 32 and facts.nnodes is None and facts.coll_channels == 2


def test_versions_nics_networks_env():
    facts = _log("NCCL version 2.16.5+cuda11.8",
                 "RCCL version 2.18.3+hip6.0 HEAD:2f6d59e+",
                 "n013:101855:101885 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_2:1/IB [RO]; OOB ibp209s0f0:10.128.3.13<0>",
                 "n013:101855:101885 [0] NCCL INFO Using network IB",
                 "test1:5425:5439 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to SYS",
                 "test1:5425:5439 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.",
                 "test-nccl-efa-worker-0:21:21 [0] NCCL INFO NET/OFI Selected Provider is efa (found 1 nics)")
    assert facts.versions == {"nccl": "2.16.5+cuda11.8", "rccl": "2.18.3+hip6.0"}
    assert facts.ib_devices == [("mlx5_0", "RoCE"), ("mlx5_2", "IB")] and list(facts.networks) == ["IB"]
    assert {k: v for k, (v, _) in facts.env.items()} == {"NCCL_NET_GDR_LEVEL": "SYS", "NCCL_SHM_DISABLE": "1"}
    assert (facts.ofi_provider, facts.ofi_nics) == ("efa", 1)


def test_nic_speed_from_virtual_devices_and_topology():
    # NCCL prints the device speed in Mb/s, the topology's NET links in GB/s
    assert _log("NET/IB : Made virtual device [0] name=mlx5_1 speed=100000 ndevs=1 rail=-1 plane=-1").nic_speed_gbs == 12.5
    assert _log("n013:101855:101885 [0] NCCL INFO               + NET[25.0] - NET/1 (7a852d0003f6ceb8/1/25.000000)"
                ).nic_speed_gbs == 25.0


def test_p2p_nvls_tuning():
    facts = _log("GENOA-06:4766:4780 [0] NCCL INFO Check P2P Type intraNodeP2pSupport 0 directMode 1",
                 "nf5688m7-1:422771:422790 [4] NCCL INFO NVLS multicast support is available on dev 4",
                 # NCCL_DEBUG_SUBSYS=TUNING, src/enqueue.cc (2.24+) and the older TRACE form (algorithm/protocol indices)
                 "n0:1:2 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}",
                 "n0:1:2 [0] NCCL TRACE 8 Bytes -> Algo 0 proto 0 time 7.450000")
    assert facts.p2p_support is False and facts.nvls_available is True
    assert [(f, b, a, p) for f, b, a, p, _ in facts.tuning] == [("AllReduce", 1048576, "RING", "SIMPLE"), (None, 8, "Tree", "LL")]


def test_warn_lines_are_kept():
    facts = _log("GENOA-06:4766:4781 [1] graph/search.cc:1135 NCCL WARN Could not find a path for pattern 4, falling back")
    assert len(facts.warnings) == 1


def test_not_a_log_line():
    assert not LogFacts().add(split_lines("Warning: Permanently added 'host' (ECDSA) to the list of known hosts.")[0])


TWO_NODES = ["# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
             "#  Rank  0 Group  0 Pid 1 on nodeA device  0 [0x01] NVIDIA H100 80GB HBM3",
             "#  Rank  1 Group  0 Pid 2 on nodeB device  0 [0x01] NVIDIA H100 80GB HBM3"]


def _explain(*log):
    (report,) = explain_texts([("x", "\n".join(TWO_NODES + list(log)))])
    return report


def test_socket_between_nodes_is_a_finding():
    r = _explain("nodeA:1:3 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0")
    (socket,) = [f for f in r.findings if f.id == "net-socket"]
    assert r.facts.inter_node == ["Socket"] and "via NET/Socket/0" in socket.evidence


def test_roce_with_gdr_and_an_unused_nic():
    r = _explain("nodeA:1:3 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>",
                 "nodeA:1:3 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA")
    assert r.facts.inter_node == ["RoCE+GDRDMA"] and r.facts.nic_layer == "RoCE" and r.facts.nics == 1
    assert [f.id for f in r.findings if f.id in ("unused-nics", "no-gdrdma")] == ["unused-nics"]


def test_tcpx_and_unknown_plugins_are_named():
    r = _explain("nodeA:1:3 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/GPUDirectTCPX/0")
    assert r.facts.inter_node == ["GPUDirect-TCPX"]
    assert "no-gdrdma" not in [f.id for f in r.findings]


def test_few_channels_on_an_nvlink_node():
    (r,) = explain_texts([("x", "\n".join([
        "#  Rank  0 Group  0 Pid 1 on n device  0 [0x01] NVIDIA H100 80GB HBM3",
        "#  Rank  1 Group  0 Pid 1 on n device  1 [0x02] NVIDIA H100 80GB HBM3",
        "n:1:2 [0] NCCL INFO Channel 00/02 :    0   1",
        "n:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM"]))])
    assert r.facts.intra_node == ["P2P/NVLink"] and r.facts.channels == 2
    assert "few-channels" in [f.id for f in r.findings]


def test_p2p_disabled_on_the_command_line_is_evidence():
    """nccl-tests#287: 'NCCL_P2P_DISABLE=1 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 2' on two RTX 5090."""
    text = "\n".join(["user@GENOA-06:~/nccl-tests$ NCCL_P2P_DISABLE=1 ./build/all_reduce_perf -b 8 -e 128M -f 2 -g 2",
                      "# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
                      "validation: 1 graph: 0",
                      "#  Rank  0 Group  0 Pid   5068 on   GENOA-06 device  0 [0x21] NVIDIA GeForce RTX 5090",
                      "#  Rank  1 Group  0 Pid   5068 on   GENOA-06 device  1 [0x61] NVIDIA GeForce RTX 5090",
                      "GENOA-06: Test NCCL failure common.cu:392 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / '"])
    (r,) = explain_texts([("x", text)])
    (p2p,) = [f for f in r.findings if f.id == "p2p-disabled-shm"]
    assert "NCCL_P2P_DISABLE=1" in p2p.evidence and r.facts.collective == "all_reduce"
    assert [f.id for f in r.findings][:2] == ["test-aborted", "no-results"]


def test_graphs_built_and_algorithms_chosen():
    (r,) = explain_texts([("x", "\n".join([
        "n:1:2 [0] NCCL INFO Channel 00/02 :    0   1",
        "n:1:2 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1 [1] -1/-1/-1->0->1",
        "n:1:2 [0] NCCL INFO 16 coll channels, 0 collnet channels, 16 nvls channels, 16 p2p channels, 2 p2p channels per peer",
        "n:1:2 [0] NCCL INFO AllReduce: 1048576 Bytes -> Algo NVLS proto SIMPLE channel{Lo..Hi}={0..15}",
        "n:1:2 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"]))])
    assert r.facts.graphs == ["Ring", "Tree", "NVLS"] and r.facts.algorithms == ["NVLS/SIMPLE", "RING/LL"]
