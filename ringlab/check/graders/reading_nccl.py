"""Grader for 16a (topic 16, card 16): given an NCCL_DEBUG=INFO log with nccl-tests rows, name the transport and
say whether the run is healthy.

Each case is a log written here from its description (nodes, GPUs per node, the intra-node and
inter-node transports, GPUDirect RDMA on which NET connections, ``#wrong`` per row), in the line
formats NCCL prints (src/init.cc, src/transport/{p2p,shm,net}.cc; the same formats
:mod:`ringlab.nccl.debuglog` reads) and nccl-tests' row layout. The answer is known from the
description, not from a parser: ``transport`` is the inter-node one when there is more than one
node (RoCE is NCCL's IB verbs transport, answered ``"IB"``), else the intra-node one; ``healthy``
is no ``#wrong``, no Socket fallback and GDRDMA on every NET connection across nodes, no SHM inside
one node. The fixed cases are one per classic misreading: the first ``via`` line of a multi-node
log is intra-node P2P; a wrong count only in the in-place half; GDRDMA on some NICs only; ``#wrong``
printed ``N/A`` by a run with ``-c 0``, which checked nothing and found nothing wrong.
"""

from __future__ import annotations

import random
from ..engine import CaseFailure, run_grader
from ..exercise import Exercise

INTRA = ("P2P", "SHM")


INTER = ("IB", "RoCE", "Socket", "EFA")


_INTRA_VIA = {"P2P": "P2P/IPC/read", "SHM": "SHM/direct/direct"}


_INTER_VIA = {"IB": "NET/IB/{nic}", "RoCE": "NET/IB/{nic}", "Socket": "NET/Socket/{nic}",
              "EFA": "NET/AWS Libfabric/{nic}"}


_NIC_SETUP = {"IB": "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.{host}<0>",
              "RoCE": "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.{host}<0>",
              "Socket": "NET/Socket : Using [0]eth0:10.0.0.{host}<0>",
              "EFA": "NET/OFI Selected Provider is efa (found 2 nics)"}


def nccl_log(nodes: int, gpus_per_node: int, intra: str, inter: str, gdrdma: tuple[bool, ...] = (True, True),
             wrong: tuple[tuple[int, int], ...] = ((0, 0),) * 4, seed: int = 0, checked: bool = True) -> str:
    """The log of rank 0 of one ring all-reduce run, as ``NCCL_DEBUG=INFO all_reduce_perf`` prints it.

    ``gdrdma[c]``: whether channel c's NET connections use GPUDirect RDMA (Socket never does);
    ``wrong[i]``: (out-of-place, in-place) ``#wrong`` of row i (sizes 1 MiB, 2 MiB, ...);
    ``checked=False``: a run with ``-c 0`` (``validation: 0``), whose ``#wrong`` columns read ``N/A``.
    """
    rng = random.Random(seed)
    world = nodes * gpus_per_node
    pid = rng.randrange(1000, 99999)
    prefix = f"node0:{pid}:{pid + 7} [0] NCCL INFO "
    info = ["NCCL version 2.21.5+cuda12.4"]
    if nodes > 1:
        info.append(_NIC_SETUP[inter].format(host=1))
    info.append(f"comm 0x{rng.randrange(16**11):011x} rank 0 nRanks {world} nNodes {nodes} localRanks "
                f"{gpus_per_node} localRank 0 MNNVL 0")
    for ch, gdr in enumerate(gdrdma):
        info.append(f"Channel {ch:02d}/{len(gdrdma):02d} :    " + "   ".join(str(r) for r in range(world)))
        for r in range(gpus_per_node - 1):  # inside node 0 first: what a ring prints before it leaves the node
            info.append(f"Channel {ch:02d}/0 : {r}[{r}] -> {r + 1}[{r + 1}] via {_INTRA_VIA[intra]}")
        if nodes > 1:
            last, net = gpus_per_node - 1, _INTER_VIA[inter].format(nic=ch % 2)
            flag = "/GDRDMA" if gdr and inter != "Socket" else ""
            info.append(f"Channel {ch:02d}/0 : {world - 1}[{last}] -> 0[0] [receive] via {net}{flag}")
            info.append(f"Channel {ch:02d}/0 : {last}[{last}] -> {gpus_per_node}[0] [send] via {net}{flag}")
    info.append(f"{len(gdrdma)} coll channels, 0 collnet channels, 0 nvls channels, {2 * len(gdrdma)} p2p channels, "
                f"2 p2p channels per peer")
    info.append("Init COMPLETE")
    lines = [prefix + text for text in info]
    lines += ["# nThread 1 nGpus 1 minBytes 1048576 maxBytes 8388608 step: 2(factor) warmup iters: 5 iters: 20 "
              f"agg iters: 1 validation: {int(checked)} graph: 0", "#",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
              "algbw   busbw #wrong"]
    factor = 2 * (world - 1) / world
    for i, (bad_out, bad_in) in enumerate(wrong):
        size = 2**20 << i
        t = size / (rng.uniform(5e9, 40e9) / factor) * 1e6  # us at some healthy-looking busbw
        algbw = size / t / 1e3
        halves = [f"{t:8.1f} {algbw:7.2f} {algbw * factor:7.2f} {bad if checked else 'N/A':>6}"
                  for bad in (bad_out, bad_in)]
        lines.append(f"{size:12d} {size // 4:13d}     float     sum      -1 " + " ".join(halves))
    total = sum(a + b for a, b in wrong) if checked else 0
    lines.append(f"# Out of bounds values : {total} {'OK' if total == 0 else 'FAILED'}")
    return "\n".join(lines) + "\n"


def truth(nodes: int, gpus_per_node: int, intra: str, inter: str, gdrdma=(True, True), wrong=((0, 0),) * 4,
          seed: int = 0, checked: bool = True) -> tuple[str, bool, str]:
    """(transport, healthy, why) from a case's description. ``N/A`` (not checked) is no wrong count."""
    if checked and any(a or b for a, b in wrong):
        why = "a row reports #wrong > 0: the results are wrong, whatever the bandwidth"
        return ("IB" if inter == "RoCE" else inter) if nodes > 1 else intra, False, why
    if nodes > 1:
        name = "IB" if inter == "RoCE" else inter
        if inter == "Socket":
            return name, False, "inter-node traffic goes over NET/Socket: TCP, not the RDMA fabric"
        if not all(gdrdma):
            return name, False, "a NET connection lacks /GDRDMA: its bytes are staged through host memory"
        return name, True, "RDMA across nodes with GPUDirect on every connection, " + _NO_WRONG[checked]
    if intra == "SHM":
        return intra, False, "GPUs inside the node talk via SHM: peer-to-peer is disabled or unavailable"
    return intra, True, "peer-to-peer inside the node, " + _NO_WRONG[checked]


_NO_WRONG = {True: "no wrong results",
             False: "and #wrong N/A means the results were not checked (-c 0, validation: 0), not that any were wrong"}


def diagnose_cases() -> list[dict]:
    return [
        dict(nodes=1, gpus_per_node=8, intra="P2P", inter="IB"),
        dict(nodes=2, gpus_per_node=8, intra="P2P", inter="IB"),  # the first via line is P2P, inside the node
        dict(nodes=2, gpus_per_node=8, intra="P2P", inter="Socket"),
        dict(nodes=1, gpus_per_node=2, intra="SHM", inter="IB"),
        dict(nodes=2, gpus_per_node=4, intra="P2P", inter="IB", gdrdma=(False, False)),
        dict(nodes=2, gpus_per_node=8, intra="P2P", inter="EFA"),
        dict(nodes=2, gpus_per_node=8, intra="P2P", inter="RoCE"),
        dict(nodes=1, gpus_per_node=4, intra="P2P", inter="IB", wrong=((0, 0), (0, 0), (0, 3), (0, 0))),
        dict(nodes=2, gpus_per_node=1, intra="P2P", inter="IB"),  # no intra-node line at all
        dict(nodes=4, gpus_per_node=8, intra="P2P", inter="IB", gdrdma=(True, False, True, True)),
        dict(nodes=2, gpus_per_node=8, intra="SHM", inter="IB"),  # SHM inside is not the multi-node question
        dict(nodes=2, gpus_per_node=8, intra="P2P", inter="IB", checked=False),  # #wrong N/A: not checked
        dict(nodes=1, gpus_per_node=8, intra="P2P", inter="IB", checked=False, seed=3),
    ]


def diagnose_strategy():
    from hypothesis import strategies as st

    @st.composite
    def case(draw):
        nodes = draw(st.integers(1, 4))
        gpus = draw(st.integers(2 if nodes == 1 else 1, 8))
        channels = draw(st.integers(1, 4))
        return dict(nodes=nodes, gpus_per_node=gpus, intra=draw(st.sampled_from(INTRA)),
                    inter=draw(st.sampled_from(INTER)),
                    gdrdma=tuple(draw(st.lists(st.booleans(), min_size=channels, max_size=channels))),
                    wrong=tuple(draw(st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 7]), st.sampled_from([0, 0, 2])),
                                              min_size=1, max_size=5))),
                    seed=draw(st.integers(0, 2**16)), checked=draw(st.booleans()))

    return case()


def check_diagnose(fn, **case) -> None:
    answer = fn(nccl_log(**case))
    if not isinstance(answer, dict) or not {"transport", "healthy"} <= set(answer):
        raise CaseFailure(f"return a dict with keys 'transport' and 'healthy', got {answer!r}")
    transport, healthy, why = truth(**case)
    if answer["transport"] != transport:
        hint = (" In a multi-node run the transport that matters is the one between nodes: the 'via NET/...' "
                "lines, not the first 'via' line." if case["nodes"] > 1 else " With one node, read the 'via' "
                "lines between GPUs of the node.")
        if case.get("inter") == "RoCE" and case["nodes"] > 1:
            hint = " RoCE runs over NCCL's IB verbs transport (via NET/IB/...): answer 'IB'."
        raise CaseFailure(f"transport should be {transport!r}, you answered {answer['transport']!r}.{hint}")
    if not isinstance(answer["healthy"], bool):
        raise CaseFailure(f"healthy should be True or False, got {answer['healthy']!r}")
    if answer["healthy"] != healthy:
        raise CaseFailure(f"healthy should be {healthy}, you answered {answer['healthy']}: {why}")


def _diagnose(fn):
    return run_grader("16a", "diagnose", fn, check_diagnose, diagnose_cases(), diagnose_strategy(),
                      "transport and health right on every log")


EXERCISES = (
    Exercise("16a", "diagnose", "Read an NCCL log: name the transport, say if it is healthy", _diagnose, (
                 "Find nNodes in the 'comm 0x... rank 0 nRanks N nNodes K' line first: with K > 1 only the "
                 "'via NET/...' lines matter, with one node only the others.",
                 "The name follows 'via ': P2P/..., SHM/..., NET/IB/... (RoCE too), NET/Socket/..., "
                 "NET/AWS Libfabric/... (EFA). GPUDirect RDMA shows as '/GDRDMA' at the end of a NET line.",
                 "Result rows have 13 fields; #wrong is the 9th (out-of-place) and the 13th (in-place). "
                 "Any non-zero count makes the run unhealthy before anything else.",
             )),
)
