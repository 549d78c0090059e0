"""The inputs of NCCL's tuning model for a ringlab cluster, estimated: what its graph search would find.

NCCL's search (``src/graph/search.cc``, ``ncclTopoCompute``) tries per-channel speeds from a table
(``speedArrayIntra``/``Inter``, per architecture) and keeps the most channels x speed that the links
carry; then it doubles the ring channels at half the speed (``ncclTopoDupChannels``) when the speed
is at least 25 GB/s (and, after Ampere, at least 50 GB/s or at most 4 channels). This module replays
that arithmetic on the cluster's totals instead of searching paths:

* per-GPU NVLink bandwidth as NCCL counts it: links x ``SM80/SM90/SM100_NVLINK_BW`` (20.0, 20.6 (20.0
  in 2.19), 40.1 GB/s per link, ``src/graph/topo.h``), the links being the datasheet's per-GPU
  bandwidth over 25 GB/s (50 for NVLink 5); PCIe GPUs: 24 GB/s (Gen4 x16 as NCCL counts it);
* between nodes the node's NICs at their line rate (400 Gb/s -> 50 GB/s), one channel per NIC;
* the NVLS graph: one channel per GPU (at most 8 in 2.19), the fastest intra speed that fits, and
  ``bwInter`` the fastest speed of the table on one node (as the GRAPH line of NVIDIA/nccl#1197 shows:
  ``Pattern 5, crossNic 0, nChannels 8, bw 40.000000/60.000000`` on 8 H100) or the NICs' across nodes.

It reproduces the graph lines published for one DGX H100 (12 ring channels at 30 GB/s, NVIDIA/nccl#1197;
``24 coll channels`` in logs) but is an estimate elsewhere: when a log prints the ``Pattern ...`` lines
(``NCCL_DEBUG_SUBSYS=GRAPH``), build :class:`~ringlab.nccl.tuning.model.Graph` from them instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from .knobs import apply_channel_limits
from .model import Comm, Graph
from .versions import Version, get_version

# search.cc speed tables (GB/s per channel); the same in v2.19.3-1 (lines 838-846) and v2.29.7-1 (977-988)
SPEEDS_INTRA = (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0)
SPEEDS_INTER = (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12)
SM90_SPEEDS_INTRA = (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0)  # 2.19: no 11.0
SM90_SPEEDS_INTER = (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12)
SM100_SPEEDS_INTRA = (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0)  # 2.29+
SM100_SPEEDS_INTER = (96.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
                      1.2, 0.24, 0.12)
MAX_GRAPH_CHANNELS = 16  # MAXCHANNELS / 2: what one search may return before duplication

# compute capability of each preset's GPU (CUDA programming guide, compute capabilities table)
PRESET_COMPCAP = {"dgx-h100": 90, "hgx-h200": 90, "aws-p5": 90, "dgx-a100": 80, "dgx-b200": 100,
                  "gb200-nvl72": 100, "pcie-8gpu": 89}
NVLS_CHANNELS = {90: 16, 100: 24}  # NVLS_NCHANNELS_SM90, _SM100_NVL (32 across nodes), src/transport/nvls.cc


@dataclass(frozen=True)
class Estimate:
    """The :class:`Comm` built for a cluster, and one line per guess it rests on."""

    comm: Comm
    notes: tuple[str, ...]


def _speeds(compcap: int, version: Version, inter: bool) -> tuple[float, ...]:
    if compcap >= 100 and version.name != "2.19":
        return SM100_SPEEDS_INTER if inter else SM100_SPEEDS_INTRA
    if compcap >= 90:
        if inter:
            return SM90_SPEEDS_INTER
        return tuple(s for s in SM90_SPEEDS_INTRA if version.name != "2.19" or s != 11.0)
    return SPEEDS_INTER if inter else SPEEDS_INTRA


def nvlink_total(compcap: int, datasheet_bw: float, version: Version) -> float:
    """Per-GPU NVLink bandwidth (GB/s, one direction) as NCCL's topology counts it."""
    per_link, raw = (40.1, 50e9) if compcap >= 100 else (20.6 if version.name != "2.19" else 20.0, 25e9) \
        if compcap >= 90 else (20.0, 25e9)
    return max(1, round(datasheet_bw / raw)) * per_link


def _search(total: float, speeds, max_channels: int, per_channel_cap: float = float("inf")) -> tuple[int, float]:
    """The most channels x speed under ``total``: the speed (first of the table, fastest, on ties)
    and ``floor(total / speed)`` channels, at most ``max_channels``."""
    best = (0, 0.0)
    for s in speeds:
        if s > per_channel_cap:
            continue
        n = min(int(total // s), max_channels)
        if n >= 1 and n * s > best[0] * best[1] + 1e-9:
            best = (n, s)
    return best if best[0] else (1, speeds[-1])


def _dup(n: int, s: float, compcap: int) -> tuple[int, float]:
    """``ncclTopoDupChannels``: twice the channels at half the speed, for fast rings."""
    if s < 25.0 or (compcap > 80 and s < 50.0 and n > 4):
        return n, s
    return min(2 * n, MAX_GRAPH_CHANNELS * 2), s / 2


def comm_for_cluster(cluster, version: str | Version = "2.30", env: dict | None = None,
                     compcap: int | None = None) -> Estimate:
    """The :class:`Comm` NCCL ``version`` would build on ``cluster`` (a :class:`ringlab.topology.Cluster`),
    with the environment ``env`` ({"NCCL_ALGO": "Ring", ...}, see :mod:`ringlab.nccl.tuning.knobs`).

    ``compcap`` (e.g. 90 for H100) defaults to the preset's GPU. Raises ValueError for a cluster NCCL
    does not run on (an AMD xGMI mesh: RCCL has its own tables), a DGX-1's NVLink mesh (its graph search is not
    ported) or an unknown compute capability."""
    version, env = get_version(version), dict(env or {})
    if cluster.fabric == "mesh" and cluster.mesh_class == "xgmi":
        raise ValueError(f"{cluster.name}: an xGMI mesh runs RCCL, whose tuning tables differ from NCCL's; "
                         "NCCL's model covers NVIDIA GPUs (nvswitch or pcie fabrics)")
    if cluster.fabric == "mesh":
        raise ValueError(f"{cluster.name}: NCCL's graph search over an NVLink mesh without switches (DGX-1) is not "
                         "ported; its tuning model here covers nvswitch and pcie fabrics")
    cc = compcap if compcap is not None else PRESET_COMPCAP.get(cluster.name)
    if cc is None:
        raise ValueError(f"compcap is needed for {cluster.name!r} (70 V100, 80 A100, 90 H100/H200, 100 B200/GB200)")
    if not isinstance(cc, int) or not 60 <= cc <= 120:
        raise ValueError(f"compcap must be an integer from 60 to 120 (90 for H100), got {cc!r}")
    nodes, g = cluster.nodes, cluster.gpus_per_node
    notes = []
    if cluster.fabric == "nvswitch":
        intra_total, type_intra = nvlink_total(cc, cluster.gpu_bandwidth, version), "NVL"
    else:
        intra_total, type_intra = 24.0, "PXB"
        notes.append("GPUs talk over PCIe: 24 GB/s per GPU as NCCL counts Gen4 x16; LL128 stays off")
    if g == 1:
        type_intra = "LOC"
    nic_gbs = cluster.nic_gbps / 8 if cluster.nics_per_node else 0.0
    if nodes == 1:
        n, s = _search(intra_total, _speeds(cc, version, False), MAX_GRAPH_CHANNELS)
        n, s = _dup(n, s, cc)
        ring = Graph(n, s, s, type_intra, "PIX", "ring")
        tree = Graph(n, s, s, type_intra, "PIX", "balanced_tree")
    else:
        total = min(intra_total, cluster.nics_per_node * nic_gbs) if g > 1 else nic_gbs * cluster.nics_per_node
        n0, s0 = _search(total, _speeds(cc, version, True), min(MAX_GRAPH_CHANNELS, max(1, cluster.nics_per_node)),
                         per_channel_cap=nic_gbs)
        n, s = _dup(n0, s0, cc)
        ring = Graph(n, s, s, type_intra, "PXN" if cc >= 90 else "PIX", "ring")
        tree = Graph(n, s, s, type_intra, "PXN" if cc >= 90 else "PIX", "tree" if g == 1 else "balanced_tree")
        doubled = f", doubled to {n} at {s:g} GB/s" if n != n0 else ""
        notes.append(f"ring graph: {n0} channel(s) at {s0:g} GB/s over {cluster.nics_per_node} x "
                     f"{cluster.nic_gbps:g} Gb/s NICs{doubled}")
    nvls_ok = bool(cluster.nvls) and cc >= 90 and g > 1 and env.get("NCCL_NVLS_ENABLE", "2") != "0"
    nvls = Graph(0, 0.0, 0.0, "LOC", "LOC", "nvls")
    nvls_channels = 0
    if nvls_ok:
        speeds = _speeds(cc, version, False)
        hn = min(g, version.nvls_max_arity)  # one channel per GPU: "the more the better" (search.cc)
        hs = next((sp for sp in speeds if hn * sp <= intra_total), speeds[-1])
        inter = speeds[0] if nodes == 1 else _search(nic_gbs, _speeds(cc, version, True), 1)[1]
        nvls = Graph(hn, hs, inter, "NVL", "PIX", "nvls", same_channels=False)
        nvls_channels = 32 if cc >= 100 and nodes > 1 else NVLS_CHANNELS[100 if cc >= 100 else 90]
    collnet = env.get("NCCL_COLLNET_ENABLE", "0") == "1" and bool(cluster.sharp) and nodes > 1
    coll_graph = Graph(ring.n_channels, ring.bw_intra, ring.bw_inter, type_intra, ring.type_inter, "tree") \
        if collnet else Graph(0, 0.0, 0.0, "LOC", "LOC", "ring")
    if env.get("NCCL_COLLNET_ENABLE", "0") == "1" and not collnet:
        notes.append("NCCL_COLLNET_ENABLE=1 has no effect: the cluster has no SHARP switches or one node")
    comm = Comm(n_ranks=nodes * g, n_nodes=nodes, min_compcap=cc, ring=ring, tree=tree,
                collnet_direct=coll_graph, collnet_chain=coll_graph, nvls=nvls, nvls_channels=nvls_channels,
                collnet=collnet, nvls_support=nvls_ok, nvswitch=cluster.fabric == "nvswitch", env=env)
    return Estimate(apply_channel_limits(comm), tuple(notes))
