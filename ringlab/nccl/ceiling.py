"""The busbw a run should reach: the line-rate ceiling of ringlab's cluster model for what NCCL could run.

:func:`ceiling_busbw` builds the cluster nearest to the facts (:func:`cluster_for`: GPUs per node and
their link class from the device name, NICs in use and their line rate from the log or the
overrides) and takes, over the algorithms NCCL could have run, the highest **line-rate busbw** of
:mod:`ringlab.topology.timing`: the busbw at which the busiest link of the whole run is saturated,
with no latency and no protocol overhead. A healthy run approaches it from below; nothing that moves
those bytes over those links can exceed it.

The algorithms considered (NCCL ``src/graph``; ``NCCL_ALGO``): all_reduce on one node: rings (NCCL's
channels), and NVLS when the log shows NVLS channels; on several nodes: rings, the tree (double
binary tree between nodes, chains inside) and NVLS_TREE when NVLS is shown. The tree is why a
2-node all_reduce can beat the NICs' rate: it sends each node's data across the network once per
direction where a ring sends it almost twice (A. Laddy, NVIDIA/nccl#812; S. Jeaugey,
NVIDIA/nccl-tests#196). reduce_scatter and all_gather: rings. broadcast and reduce: each channel's
ring as a pipelined chain from or to the root (busbw = algbw: every link on the chain carries S once).
all_to_all: every GPU sends S/N to each peer, (N - G)/N of S through its own NIC, which no ring
spreads over the node's rails, so busbw = (N - 1)/(N - G) x that NIC's rate (on one node the NVLink
port's or, on a mesh, one link's N - 1 times). sendrecv: rank r to r + 1, so one NIC's rate across
nodes. gather, scatter and the others have no model (no ceiling). Every ceiling is computed from the
closed forms of :mod:`ringlab.topology` on the whole cluster, whatever its size.

What the ceiling does not contain: protocol overhead (LL128/Simple framing, ~5-20%: "450GB/s is the
line rate. With the protocol overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s",
S. Jeaugey, NVIDIA/nccl-tests#212), NVLS's own reduction throughput (H100 NVLS peaks at ~480 GB/s
busbw against the model's 700, same thread: the switch moves M (1 + 1/N) each way per GPU, so
2 (N - 1) / (N + 1) x 450 GB/s, NVIDIA/nccl#828 and #1506), congestion and adaptive routing. Healthy runs measured
against it: DGX A100 with 8 x 200 Gb/s "192GB/s AllReduce BusBW" (nccl#812) against 200; "around
48GB/s from each CX7 NIC at 400Gbps ... up to ~396GB/s with the RING protocol" (nccl-tests#319)
against 400.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ringlab.calc.hardware import HARDWARE
from ringlab.collectives.cost import LINKS, bus_factor
from ringlab.topology import PRESETS, custom_cluster
from ringlab.topology import closed_forms as cf
from ringlab.topology.algorithms import TREE_PIECES, closed_form_link_bytes, default_channels
from ringlab.topology.scale import ring_rule, rule_link_bytes


@dataclass(frozen=True)
class LinkClass:
    """The link a GPU's collective traffic leaves by: ``bandwidth`` bytes/s per direction per GPU."""

    name: str
    kind: str  # NVLink | xGMI | PCIe
    bandwidth: float
    source: str


def _hw(preset: str) -> float:
    return float(HARDWARE[preset].interconnect_bandwidth)


# Line rates, one per link class; presets of ringlab.calc.hardware and ringlab.collectives.cost are
# reused where they exist (their sources are in those modules).
LINK_CLASSES: dict[str, LinkClass] = {c.name: c for c in (
    LinkClass("nvlink2", "NVLink", 150e9, "NVIDIA Tesla V100 datasheet: NVLink 300 GB/s total = 150 GB/s per direction"),
    LinkClass("nvlink3", "NVLink", _hw("a100-sxm-80gb"), "A100 SXM, see ringlab.calc.hardware (600 GB/s total)"),
    LinkClass("nvlink-400", "NVLink", 200e9, "NVIDIA A800 / H800 datasheets: NVLink 400 GB/s total = 200 GB/s per direction"),
    LinkClass("nvlink4", "NVLink", LINKS["nvlink4"].bandwidth, LINKS["nvlink4"].source.split(";")[0]),
    LinkClass("nvlink5", "NVLink", LINKS["nvlink5"].bandwidth, LINKS["nvlink5"].source.split(";")[0]),
    LinkClass("xgmi-mi300x", "xGMI", _hw("mi300x"), "AMD Instinct MI300X, see ringlab.calc.hardware (7 x 64 GB/s)"),
    LinkClass("pcie3-x16", "PCIe", _hw("t4"), "PCIe 3.0 x16, 16 GB/s per direction (ringlab.calc.hardware, T4)"),
    LinkClass("pcie4-x16", "PCIe", _hw("l4"), "PCIe 4.0 x16, 32 GB/s per direction (ringlab.calc.hardware, L4)"),
    LinkClass("pcie5-x16", "PCIe", LINKS["pcie5-x16"].bandwidth, LINKS["pcie5-x16"].source.split(";")[0]),
)}

# Device names as nccl-tests prints them (cudaDeviceProp.name / rocminfo marketing names) -> link class.
# First match wins, so specific names come before general ones. Sources: the vendors' datasheets above;
# PCIe generations from the same datasheets (A100/H100 PCIe: Gen4/Gen5; GeForce 30/40: Gen4, 50: Gen5).
_GPU_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\b(H100|H200)\b.*\bNVL\b", ""),  # NVLink bridge boards: pairs or quads, not a full mesh; no single bound
    (r"\bH100\b.*PCIe", "pcie5-x16"),
    (r"\bA100\b.*PCIE|A100 80GB PCIe", "pcie4-x16"),
    (r"\bA800\b|\bH800\b", "nvlink-400"),
    (r"\bB200\b|\bGB200\b|\bB300\b", "nvlink5"),
    (r"\bH100\b|\bH200\b|\bH20\b|\bGH200\b", "nvlink4"),
    (r"\bA100\b", "nvlink3"),
    (r"V100-SXM", "nvlink2"),
    (r"V100S?-PCIE|\bT4\b|\bP100-PCIE", "pcie3-x16"),
    (r"MI300X|MI325X", "xgmi-mi300x"),
    (r"RTX 50\d0", "pcie5-x16"),
    (r"RTX [34]0\d0|RTX A\d000|\bA10G?\b|\bL4\b|\bL40S?\b|\bA40\b|MI100", "pcie4-x16"),
)


def gpu_link(name: str | None) -> LinkClass | None:
    """The link class of a GPU from its nccl-tests device name, or None when unknown or ambiguous.

    ``"NVIDIA H100 80GB HBM3"`` -> nvlink4; ``"NVIDIA A100-PCIE-40GB"`` -> pcie4-x16; ``"AMD Instinct
    MI100"`` -> pcie4-x16 (no Infinity Fabric bridge assumed).
    """
    if not name:
        return None
    for pattern, key in _GPU_PATTERNS:
        if re.search(pattern, name, flags=re.IGNORECASE):
            return LINK_CLASSES[key] if key else None
    return None


def cluster_for(facts):
    """The :class:`~ringlab.topology.Cluster` nearest to ``facts``, or ``(None, reason)`` when the facts do not
    pin it down. Returns ``(cluster, None)`` otherwise.

    GPUs per node: ``facts.gpus_per_node`` (or all ranks on one node). Inside a node: NVLink classes as an
    NVSwitch port of the class's per-direction rate, xGMI as a full mesh of 64 GB/s links (MI300X
    platform: its rings use all seven, :func:`ringlab.topology.schedules.mesh_rings`), PCIe as one x16 link
    per GPU; 8 V100 SXM2 per node as the DGX-1's NVLink hybrid cube-mesh (preset ``dgx1-v100``: 6 links of
    25 GB/s per GPU, rings over NVLink pairs only, 150 GB/s, the same ring ceiling as a 150 GB/s switch port but
    not the same all-to-all, whose 12 unlinked pairs cross PCIe). NICs: ``facts.nics`` at ``facts.nic_bandwidth``. The whole cluster, at any node count.
    """
    if not facts.world_size or facts.world_size < 2:
        return None, "fewer than two ranks"
    link = gpu_link(facts.gpu)
    if link is None:
        return None, f"no line rate known for {facts.gpu or 'this GPU'}"
    nodes = facts.nodes or 1
    gpus = facts.gpus_per_node or (facts.world_size // nodes if facts.world_size % nodes == 0 else None)
    if gpus is None:
        return None, f"{facts.world_size} ranks do not split evenly over {nodes} nodes"
    nics, nic_gbps = (facts.nics or 0), (facts.nic_bandwidth or 0) * 8 / 1e9
    if nodes > 1 and not (nics and nic_gbps):
        return None, "a multi-node bound needs the NICs in use and their line rate"
    if nics > gpus and nics % gpus:
        nics = gpus * (nics // gpus)
    fabric = {"NVLink": "nvswitch", "xGMI": "mesh", "PCIe": "pcie"}[link.kind]
    per = PRESETS["mi300x-platform"].gpu_bandwidth if fabric == "mesh" else link.bandwidth
    nvls = fabric == "nvswitch" and ("NVLS" in facts.graphs or any(a.startswith("NVLS") for a in facts.algorithms))
    name = f"{link.name} x {gpus}" + (f", {nics} x {nic_gbps:g} Gb/s NICs" if nodes > 1 else "")
    if link.name == "nvlink2" and gpus == 8:  # 8 V100 SXM2: a DGX-1 (or HGX-1) hybrid cube-mesh, not a switch
        return replace(PRESETS["dgx1-v100"], nodes=nodes, nics_per_node=nics if nodes > 1 else 0, nic_gbps=nic_gbps,
                       name=f"dgx1-v100 cube-mesh x {gpus}" + name.removeprefix(f"{link.name} x {gpus}")), None
    return custom_cluster(nodes, gpus, per, nics_per_node=nics if nodes > 1 else 0,
                          nic_gbps=nic_gbps, fabric=fabric, nvls=nvls, name=name), None


MODELLED = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "sendrecv")


def _candidates(collective: str | None, cluster) -> list[str]:
    """ringlab's names of what NCCL could run for ``collective`` on ``cluster`` (empty: no ceiling model)."""
    if collective in ("all_reduce", "reduce_scatter", "all_gather"):
        names = ["ring_channels"]
        if collective == "all_reduce" and cluster.nodes > 1:
            names.append("tree_chains")
        if collective == "all_reduce" and cluster.nvls:
            names.append("nvls" if cluster.nodes == 1 else "nvls_tree")
        return names
    if collective in ("broadcast", "reduce"):
        return ["ring_chain"]  # NCCL's ring broadcast / reduce: a pipelined chain along each channel's ring
    if collective in ("all_to_all", "sendrecv"):
        return ["p2p"]  # NCCL's point-to-point sends, every rank to its peers at once
    return []


_HOW = {"ring_chain": "NCCL's ring broadcast / reduce: each channel's ring as a pipelined chain from (or to) the root",
        "p2p": "NCCL's point-to-point sends: a GPU's cross-node share leaves by its own NIC, no ring spreads it over "
               "the node's rails"}

# NCCL's algorithm names (TUNING lines, NCCL_ALGO) -> ringlab's schedule of it
_NCCL_ALGOS = {"RING": "ring_channels", "TREE": "tree_chains", "NVLS": "nvls", "NVLSTREE": "nvls_tree",
               "NVLS_TREE": "nvls_tree"}


def line_rate_busbw(collective: str, name: str, cluster) -> float:
    """The busbw (bytes/s) at which the busiest link of ``cluster`` is saturated for ``name`` (a name of
    :func:`_candidates`), from the closed forms of :mod:`ringlab.topology.closed_forms` and the ring rules of
    :mod:`ringlab.topology.scale`: O(channels x ranks) work, so any cluster size. The message is a size every
    algorithm cuts evenly; the ratio does not depend on it."""
    n, ch = cluster.world_size, default_channels(cluster)
    if name == "ring_channels":
        rule = ring_rule(collective, name, cluster)
        size = rule.chunks * 64
        per_link = rule_link_bytes(rule, cluster, size)[0]
    elif name in ("tree_chains", "nvls", "nvls_tree"):
        size = 2 * (ch if name == "tree_chains" else cluster.gpus_per_node) * TREE_PIECES * 64
        per_link = closed_form_link_bytes(collective, name, cluster, size)
    elif name == "ring_chain":
        size = ch * 64
        per_link = cf.chain_link_bytes(collective, cluster, ch, size)
    elif name == "p2p" and collective == "all_to_all":
        size = n * 64
        per_link = cf.all_to_all_link_bytes(cluster, size)
    elif name == "p2p" and collective == "sendrecv":
        size = 64
        per_link = cf.sendrecv_link_bytes(cluster, size)
    else:
        raise ValueError(f"no line-rate model for {collective} {name}")
    seconds = float((per_link / cluster.links.bandwidth).max())
    factor = 1.0 if collective == "sendrecv" else bus_factor(collective, n)  # nccl-tests: sendrecv busbw = algbw
    return factor * size / seconds


def ceilings(facts) -> dict[str, float]:
    """Line-rate busbw (bytes/s) of every algorithm NCCL could have run for ``facts``, by ringlab name
    (empty when :func:`cluster_for` cannot place the run or the collective has no model)."""
    cluster, _ = cluster_for(facts)
    if cluster is None:
        return {}
    return {name: line_rate_busbw(facts.collective, name, cluster) for name in _candidates(facts.collective, cluster)}


def ceiling_busbw(facts, peak: float | None = None) -> tuple[float, str] | None:
    """The busbw (bytes/s) ``facts`` should not exceed, and why; None when the facts do not bound it.

    ``facts`` is a :class:`ringlab.nccl.facts.Facts` (duck-typed: ``collective``, ``world_size``, ``nodes``,
    ``gpus_per_node``, ``gpu``, ``nics``, ``nic_bandwidth`` in bytes/s per NIC and direction, ``graphs``,
    ``algorithms``); ``peak``: the measured peak busbw, B/s, if known. The algorithm is the one the
    TUNING lines name when there are any; else the ring (how NCCL's maintainers benchmark a fabric),
    unless ``peak`` is above the ring's line rate: then the run cannot have been a ring, and the
    ceiling is the tightest of the others (the tree, NVLS) that is not below it.
    """
    by_name = ceilings(facts)
    if not by_name:
        return None
    tuned = [_NCCL_ALGOS.get(a.split("/")[0]) for a in facts.algorithms]
    tuned = [t for t in tuned if t in by_name]
    if tuned:
        name = max(tuned, key=by_name.get)
        how = "the algorithm the TUNING lines show"
    else:
        name = next(iter(by_name))  # the ring for the ring collectives, else the only model
        how = ("the ring NCCL's maintainers benchmark with, as the log has no TUNING lines" if name == "ring_channels"
               else _HOW[name])
        if peak is not None and peak > by_name[name] and len(by_name) > 1:
            above = [n for n in by_name if by_name[n] >= peak]
            first = name
            name = min(above, key=by_name.get) if above else max(by_name, key=by_name.get)
            how = f"as the measured busbw is above the ring's {by_name[first] / 1e9:.1f} GB/s"
    cluster, _ = cluster_for(facts)
    others = ", ".join(f"{n} {v / 1e9:.1f}" for n, v in by_name.items() if n != name)
    why = (f"the line rate of {name} on {facts.nodes or 1} node(s) x {cluster.gpus_per_node} GPUs ({cluster.name}), "
           f"{how}: {by_name[name] / 1e9:.1f} GB/s busbw with the busiest link saturated and no protocol overhead"
           + (f"; other algorithms, GB/s: {others}" if others else ""))
    return by_name[name], why
