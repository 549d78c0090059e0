"""``ncclTopoTuneModel``: NCCL's latency and bandwidth for every function x algorithm x protocol.

A line-by-line port of ``src/graph/tuning.cc`` (the releases and line ranges are in
:mod:`ringlab.nccl.tuning.versions`). Its inputs are what NCCL's graph search leaves in ``ncclTopoGraph``
(``src/include/graph.h``): channels, per-channel bandwidth inside and between nodes, path types,
pattern; and the communicator's shape (``comm->nRanks``, ``nNodes``, compute capabilities, CPU).

NCCL computes in ``float`` (32-bit) where its variables are ``float`` and in ``double`` where its
constants are; :func:`f32` rounds to float32 at the same places so that the table printed with
``%8.1f/%6.1f`` is the one NCCL prints (:func:`ringlab.nccl.tuning.logread.format_table`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from .versions import (
    FUNCTIONS,
    LL128_MAX_NTHREADS,
    LL_MAX_NTHREADS,
    MAX_NTHREADS,
    PCI_BW,
    PROTOCOLS,
    SIMPLE_MAX_NTHREADS,
    THREAD_THRESHOLD,
    WARP_SIZE,
    Version,
    get_version,
)

HW_NVLINK, HW_PCI, HW_NET = 0, 1, 2
PATTERNS = {"balanced_tree": 1, "split_tree": 2, "tree": 3, "ring": 4, "nvls": 5, "collnet_direct": 6}
CPU_ARCHES = ("x86", "power", "arm")
CPU_VENDORS = ("intel", "amd", "zhaoxin", "mixed", "other")


def f32(x: float) -> float:
    """``x`` stored in a C ``float`` (32-bit): NCCL keeps its latencies, bandwidths and times in floats."""
    return float(np.float32(x))


def log2i(n: int, version: Version) -> int:
    """NCCL's ``log2i``: floor(log2 n); for n < 1, 0 in 2.19 (a shift loop) and -1 later (``log2Down``)."""
    if n >= 1:
        return n.bit_length() - 1
    return 0 if version.name == "2.19" else -1


@dataclass(frozen=True)
class Graph:
    """What NCCL's graph search found for one algorithm (``struct ncclTopoGraph``, the line
    ``Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1`` that
    ``NCCL_DEBUG_SUBSYS=GRAPH`` prints): ``n_channels``, ``bw_intra``/``bw_inter`` in GB/s per channel,
    ``type_intra``/``type_inter`` path types (``"NVL"``, ``"PIX"``, ``"PHB"``, ``"NET"`` ...)."""

    n_channels: int
    bw_intra: float
    bw_inter: float
    type_intra: str = "NVL"
    type_inter: str = "PIX"
    pattern: str = "ring"
    same_channels: bool = True
    latency_inter: float = 0.0  # us, the network plugin's latency (0 for IB and sockets)

    def __post_init__(self):
        if not isinstance(self.n_channels, int) or self.n_channels < 0:
            raise ValueError(f"n_channels must be an integer >= 0, got {self.n_channels!r}")
        for name in ("bw_intra", "bw_inter", "latency_inter"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0 (GB/s or us), got {v!r}")
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {self.pattern!r}")


NO_GRAPH = Graph(0, 0.0, 0.0, "LOC", "LOC", "ring")


@dataclass(frozen=True)
class Comm:
    """The communicator and its graphs: everything ``ncclTopoTuneModel`` reads.

    ``n_channels`` is ``comm->nChannels`` (after NCCL duplicates the ring channels: twice the ring
    graph's; the ``Channel 00/24`` line's 24); ``nvls_channels`` is ``comm->nvlsChannels``.
    ``collnet`` says the CollNet plugin (SHARP) is enabled; ``nvls`` that NVLink SHARP is supported;
    ``nvswitch`` that the node has NVSwitches (CollNetDirect needs them). ``env`` holds the
    variables of :mod:`ringlab.nccl.tuning.knobs` that the model reads (``NCCL_ALGO``, ``NCCL_PROTO``,
    ``NCCL_NTHREADS``, ``NCCL_LL128_NTHREADS``, ``NCCL_NET_OVERHEAD``, ``NCCL_PAT_ENABLE``,
    ``NCCL_LL128_C2C``).
    """

    n_ranks: int
    n_nodes: int
    min_compcap: int
    ring: Graph
    tree: Graph
    collnet_direct: Graph = NO_GRAPH
    collnet_chain: Graph = NO_GRAPH
    nvls: Graph = NO_GRAPH
    max_compcap: int | None = None
    n_channels: int | None = None
    nvls_channels: int = 0
    cpu_arch: str = "x86"
    cpu_vendor: str = "intel"
    collnet: bool = False
    nvls_support: bool = False
    nvswitch: bool = True
    max_local_ranks: int | None = None
    env: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("n_ranks", "n_nodes", "min_compcap"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
        if self.n_ranks % self.n_nodes:
            raise ValueError(f"n_ranks={self.n_ranks} is not a multiple of n_nodes={self.n_nodes}: NCCL's model "
                             "assumes the same GPUs per node")
        if self.cpu_arch not in CPU_ARCHES:
            raise ValueError(f"cpu_arch must be one of {', '.join(CPU_ARCHES)}, got {self.cpu_arch!r}")
        if self.cpu_vendor not in CPU_VENDORS:
            raise ValueError(f"cpu_vendor must be one of {', '.join(CPU_VENDORS)}, got {self.cpu_vendor!r}")

    @property
    def channels(self) -> int:
        return self.n_channels if self.n_channels is not None else 2 * self.ring.n_channels

    @property
    def local_ranks(self) -> int:
        return self.max_local_ranks or self.n_ranks // self.n_nodes

    def graphs(self, version: Version) -> tuple[Graph, ...]:
        """``graphs[]`` in algorithm order (``src/init.cc``): PAT reuses the tree graph, NVLSTree the NVLS one."""
        g = (self.tree, self.ring, self.collnet_direct, self.collnet_chain, self.nvls, self.nvls, self.tree)
        return g[:len(version.algorithms)]

    def with_env(self, **env: str) -> Comm:
        return replace(self, env={**self.env, **env})


@dataclass(frozen=True)
class Table:
    """``comm->latencies`` (us) and ``comm->bandwidths`` (GB/s of algorithm bandwidth) as
    ``[function][algorithm][protocol]`` lists, ``max_threads[algorithm][protocol]``, and what the choice
    needs besides: ``ring_backup`` (2.19's ``ringbdw``), thread thresholds, channels."""

    version: Version
    comm: Comm
    latency: list
    bandwidth: list
    max_threads: list
    thread_threshold: list
    ring_backup: list | None
    algo_enabled: list  # [function][algorithm] after NCCL_ALGO and the disable rules
    proto_enabled: list  # [function][protocol] after NCCL_PROTO

    def lat(self, function: str, algorithm: str, protocol: str) -> float:
        f, a, p = self.index(function, algorithm, protocol)
        return self.latency[f][a][p]

    def bw(self, function: str, algorithm: str, protocol: str) -> float:
        f, a, p = self.index(function, algorithm, protocol)
        return self.bandwidth[f][a][p]

    def index(self, function: str, algorithm: str, protocol: str) -> tuple[int, int, int]:
        """Indices of NCCL names (``"AllReduce"``, ``"Ring"``, ``"Simple"``; case-insensitive)."""
        return (_find(FUNCTIONS, function, "function"), _find(self.version.algorithms, algorithm, "algorithm"),
                _find(PROTOCOLS, protocol, "protocol"))


def _find(names, name: str, what: str) -> int:
    for i, n in enumerate(names):
        if n.lower() == str(name).lower().replace("_", ""):
            return i
    raise ValueError(f"unknown {what} {name!r}; accepted: {', '.join(names)}")


def parse_list(text: str, elements: tuple[str, ...], prefixes: tuple[str, ...] | None = None) -> list[list[int]]:
    """NCCL's ``parseList`` of ``NCCL_ALGO`` / ``NCCL_PROTO``: ``"Ring,Tree"``, ``"^LL128"``; from 2.24 also
    per function, ``"^LL128;allreduce:LL128"`` (``prefixes`` given). Returns one 0/1 list per prefix
    (one list when ``prefixes`` is None). Raises ValueError for an unknown element or prefix, as NCCL
    does (``ncclInvalidUsage``) since 2.24; 2.19 ignores unknown names, and so does this with no prefixes."""
    rows = len(prefixes) if prefixes else 1
    out = [[1] * len(elements) for _ in range(rows)]
    parts = text.split(";")
    for i, part in enumerate(parts):
        prefix, _, elems = part.partition(":")
        if not _:
            if i and prefixes:
                raise ValueError(f"{text!r}: every entry but the first needs a function prefix (allreduce:...)")
            prefix, elems = None, part
        if prefix is not None and not prefixes:
            raise ValueError(f"{text!r}: per-function prefixes need NCCL 2.24 or later")
        negate = elems.startswith("^")
        names = [e for e in elems.lstrip("^").split(",") if e]
        targets = [r for r in range(rows) if prefix is None or prefixes[r].lower() == prefix.lower()]
        if prefix is not None and not targets:
            raise ValueError(f"{text!r}: unknown function prefix {prefix!r}; accepted: {', '.join(prefixes)}")
        for r in targets:
            out[r] = [int(negate)] * len(elements)
            for name in names:
                hit = [j for j, e in enumerate(elements) if e.lower() == name.lower()]
                if not hit and prefixes:
                    raise ValueError(f"{text!r}: unknown element {name!r}; accepted: {', '.join(elements)}")
                for j in hit:
                    out[r][j] = int(not negate)
    return out


def _nthreads(env: dict, name: str, lo: int, hi: int, default: int) -> int:
    """``getNthreads``: the variable if set (a multiple of 32, clamped to [lo, hi]), else ``default``."""
    raw = env.get(name)
    if raw is None or int(raw) <= 0:
        return default
    nt = int(raw)
    if nt % WARP_SIZE:
        return hi
    return min(max(nt, lo), hi)


def _max_threads(comm: Comm, version: Version) -> list[list[int]]:
    env, na = comm.env, len(version.algorithms)
    mt = [[0, 0, 0] for _ in range(na)]
    ring = comm.ring
    simple_default = 256 if f32(ring.bw_intra) * ring.n_channels <= PCI_BW else SIMPLE_MAX_NTHREADS
    mt[1][2] = _nthreads(env, "NCCL_NTHREADS", 2 * WARP_SIZE, SIMPLE_MAX_NTHREADS, simple_default)
    mt[0][2] = _nthreads(env, "NCCL_NTHREADS", 2 * WARP_SIZE, SIMPLE_MAX_NTHREADS, SIMPLE_MAX_NTHREADS)
    for a in (2, 3, 4, 5):
        mt[a][2] = MAX_NTHREADS
    mt[0][0] = mt[1][0] = _nthreads(env, "NCCL_NTHREADS", 2 * WARP_SIZE, LL_MAX_NTHREADS, LL_MAX_NTHREADS)
    mt[0][1] = mt[1][1] = _nthreads(env, "NCCL_LL128_NTHREADS", LL128_MAX_NTHREADS // 4, LL128_MAX_NTHREADS,
                                    LL128_MAX_NTHREADS)
    return mt


def tune(comm: Comm, version: str | Version = "2.30") -> Table:
    """``ncclTopoTuneModel`` of NCCL ``version`` on ``comm``: the latency (us) and algorithm bandwidth
    (GB/s) NCCL predicts for each function, algorithm and protocol, with its enable rules and the
    ``NCCL_ALGO`` / ``NCCL_PROTO`` / ``NCCL_NTHREADS`` of ``comm.env`` applied.

    A bandwidth of 0 means NCCL will not use the pair. One rank gives an all-zero table (NCCL returns
    before the model). Raises ValueError for a malformed ``NCCL_ALGO``/``NCCL_PROTO`` (2.24+ syntax).
    """
    version = get_version(version)
    nf, na, npr = len(FUNCTIONS), len(version.algorithms), len(PROTOCOLS)
    lat = [[[0.0] * npr for _ in range(na)] for _ in range(nf)]
    bw = [[[0.0] * npr for _ in range(na)] for _ in range(nf)]
    mt = _max_threads(comm, version)
    backup = [[0.0] * npr for _ in range(nf)] if version.name == "2.19" else None
    if comm.n_ranks > 1:
        (_model_219 if version.name == "2.19" else _model_pat_era)(comm, version, lat, bw, backup)
    algo_on, proto_on = _enable(comm, version, bw, backup)
    thresholds = [[THREAD_THRESHOLD[p] for p in PROTOCOLS] for _ in range(na)]
    thresholds[1][0] *= comm.n_ranks
    thresholds[2][2] = thresholds[3][2] = 512
    return Table(version, comm, lat, bw, mt, thresholds, backup, algo_on, proto_on)


def _common(comm: Comm, version: Version):
    n_nodes, n_ranks = comm.n_nodes, comm.n_ranks
    cc = version.compcap_index(comm.min_compcap)
    index2 = n_nodes - 1 if n_nodes <= 2 else 2
    amd = comm.cpu_vendor == "amd" or (version.name != "2.19" and comm.cpu_vendor == "mixed")
    index1 = cc if n_nodes == 1 else (1 if amd else 0)
    hw_lat = [[list(p) for p in a] for a in version.hw_lat]
    if comm.cpu_arch == "power":  # de-penalise Tree/Simple on POWER (favours Tree)
        hw_lat[HW_PCI][0][2] = hw_lat[HW_PCI][1][2]
    graphs = comm.graphs(version)
    intra_hw = [HW_NVLINK if g.type_intra == "NVL" else HW_PCI for g in graphs]
    hw = [h if n_nodes == 1 else HW_NET for h in intra_hw]
    return cc, index1, index2, hw_lat, graphs, intra_hw, hw, f32(n_ranks / n_nodes)


def _net_overhead(comm: Comm) -> float:
    """``getNetOverhead`` (us): ``NCCL_NET_OVERHEAD`` (ns) if set; 2 on AMD x86, else 1."""
    if "NCCL_NET_OVERHEAD" in comm.env:
        return f32(int(comm.env["NCCL_NET_OVERHEAD"]) * .001)
    return 2.0 if comm.cpu_arch == "x86" and comm.cpu_vendor == "amd" else 1.0


def _nsteps(f: str, n_ranks: int) -> int:
    return 2 * (n_ranks - 1) if f == "AllReduce" else n_ranks - 1 if f in ("ReduceScatter", "AllGather") else n_ranks


def _model_219(comm: Comm, v: Version, lat, bw, ring_backup) -> None:
    """v2.19.3-1 ``src/graph/tuning.cc`` lines 120-263."""
    cc, index1, index2, hw_lat, graphs, intra_hw, hw, ppn = _common(comm, v)
    n_nodes, n_ranks = comm.n_nodes, comm.n_ranks
    ll_max = v.ll_max_bws[index1][index2]
    tree_max, ring_ll128_max, tree_ll128_max = (v.per_ch_max_tree[cc][index2], v.per_ch_max_ring_ll128[cc][index2],
                                                v.per_ch_max_tree_ll128[cc][index2])
    for c, fn in enumerate(FUNCTIONS):
        nsteps = _nsteps(fn, n_ranks)
        n_inter = (2 * n_nodes if n_nodes > 1 else 0) if fn == "AllReduce" else \
            n_nodes - 1 if fn in ("ReduceScatter", "AllGather") else n_nodes
        for a, algo in enumerate(v.algorithms):
            if fn in ("Broadcast", "Reduce") and algo != "Ring":
                continue
            if fn in ("ReduceScatter", "AllGather") and algo not in ("Ring", "NVLS"):
                continue
            g = graphs[a]
            for p, proto in enumerate(PROTOCOLS):
                if algo in ("NVLS", "NVLSTree") and proto != "Simple":
                    continue
                collnet = algo in ("CollNetDirect", "CollNetChain")
                b = f32(g.bw_intra if n_nodes <= 2 or collnet else g.bw_inter)
                if algo == "NVLS":
                    b = f32(min(g.bw_intra, g.bw_inter))
                if algo == "NVLSTree":
                    b = f32(min(g.bw_intra, g.bw_inter if n_nodes <= 2 else f32(g.bw_inter / 2)))
                bus = f32(g.n_channels * b)
                if algo == "Ring" and proto == "LL":
                    quarter = n_nodes > 1 or fn in ("AllReduce", "Reduce")
                    bus = f32(min(ll_max, bus * (1.0 / 4.0 if quarter else 1.0 / 3.0)))
                if algo == "Ring" and proto == "LL128":
                    bus = f32(min(bus * (0.7 if ppn < 2 else 0.92), g.n_channels * ring_ll128_max))
                if algo == "Tree":
                    bus = f32(min(bus * .92, g.n_channels * tree_max))
                if algo == "Tree" and proto == "LL":
                    bus = f32(min(bus * 1.0 / 3.8, ll_max))
                if algo == "Tree" and proto == "LL128":
                    bus = f32(min(bus * (7.0 / 9.0 if n_nodes == 1 else 120.0 / 128.0), g.n_channels * tree_ll128_max))
                if algo == "Tree" and g.pattern == "tree":
                    bus = f32(bus * .85)
                if collnet and proto != "Simple":
                    bus = 0.0
                if algo == "CollNetDirect" and proto == "Simple":
                    factor = f32(ppn / (1.0 * g.n_channels)) if g.n_channels else 0.0  # GPU/NIC ratio
                    factor = f32(factor - f32(factor - 1) / 2)
                    bus = f32(bus / factor) if factor else 0.0
                if algo == "CollNetDirect" and proto == "Simple" and comm.min_compcap >= 90:
                    bus = f32(bus * .85)
                ratio = f32(1.0 * n_ranks / nsteps) if algo == "Ring" else f32(5.0 / 6.0) if algo in ("NVLS", "NVLSTree") \
                    else .5
                bw[c][a][p] = f32(bus * ratio)
                if algo == "Ring":
                    ring_backup[c][p] = bw[c][a][p]
                lat[c][a][p] = f32(v.base_lat[a][p])
                intra_lat = f32(hw_lat[intra_hw[a]][a][p])
                inter_lat = f32(hw_lat[HW_NET][a][p] + g.latency_inter)
                if proto == "Simple":
                    inter_lat = f32(inter_lat + g.latency_inter)
                lat[c][a][p] = _add_latency(comm, v, fn, algo, proto, g, lat[c][a][p], intra_lat, inter_lat,
                                            hw_lat, hw[a], nsteps, n_inter)


def _add_latency(comm, v, fn, algo, proto, g, base, intra_lat, inter_lat, hw_lat, hw, nsteps, n_inter) -> float:
    """The latency formulas, the same in every release kept (only ``n_inter`` for rings changed)."""
    n_nodes, n_ranks = comm.n_nodes, comm.n_ranks
    local = n_ranks // n_nodes
    p = PROTOCOLS.index(proto)
    if algo == "Ring":
        ring_lat = f32(hw_lat[hw][1][p])
        if fn in ("Reduce", "Broadcast"):
            if g.same_channels:
                return f32(base + ring_lat)
            if proto == "Simple":
                ring_lat = f32(hw_lat[hw][0][p])  # chunk latency, waiting for proper chunk modelling
            return f32(base + f32(nsteps * ring_lat))
        overhead = 0.0
        if n_nodes > 1:
            overhead = _net_overhead(comm) * (3 if proto == "Simple" else 1)
        intra_lat = max(intra_lat, f32(overhead))
        return f32(base + f32(f32((nsteps - n_inter) * intra_lat) + f32(n_inter * inter_lat)))
    if algo == "Tree":
        if v.name != "2.19" and fn != "AllReduce":
            return base
        return f32(base + f32(2 * f32(f32((local - 1) * intra_lat) + f32(log2i(n_nodes, v) * inter_lat))))
    if algo == "CollNetDirect":  # + 0.4 us arity serialisation latency
        return f32(base + (2 * (min(1, local - 1) * intra_lat + (local - 1) * 0.4) + inter_lat))
    if algo == "CollNetChain":
        return f32(base + f32(f32(2 * (local - 1) * intra_lat) + inter_lat))
    if algo == "NVLS":
        return f32(intra_lat + inter_lat) if n_nodes > 1 else intra_lat
    if algo == "NVLSTree":
        return f32(base + f32(intra_lat + f32(2 * log2i(n_nodes, v) * inter_lat)))
    if algo == "PAT" and fn in ("AllGather", "ReduceScatter"):
        return f32(base + (log2i(n_nodes, v) * (inter_lat / 3.5) + n_ranks * 2.8))
    return base


def pat_enabled(comm: Comm) -> bool:
    """``ncclPatEnable`` (2.23+): ``NCCL_PAT_ENABLE`` if set, else one GPU per node (and the host network)."""
    if comm.min_compcap < 60:
        return False
    if "NCCL_PAT_ENABLE" in comm.env and int(comm.env["NCCL_PAT_ENABLE"]) != 2:
        return bool(int(comm.env["NCCL_PAT_ENABLE"]))
    return comm.n_nodes == comm.n_ranks


def _model_pat_era(comm: Comm, v: Version, lat, bw, _backup) -> None:
    """v2.29.7-1 ``src/graph/tuning.cc`` lines 231-436 (v2.30.7-1 lines 243-436: the same formulas)."""
    cc, index1, index2, hw_lat, graphs, intra_hw, hw, ppn = _common(comm, v)
    n_nodes, n_ranks = comm.n_nodes, comm.n_ranks
    ll_max = v.ll_max_bws[index1][index2]
    tree_max, ring_ll128_max = v.per_ch_max_tree[cc][index2], v.per_ch_max_ring_ll128[cc][index2]
    tree_ll128_max, nvls_tree_max = v.per_ch_max_tree_ll128[cc][index2], v.per_ch_max_nvls_tree[cc][index2]
    pat = pat_enabled(comm)
    for c, fn in enumerate(FUNCTIONS):
        nsteps = _nsteps(fn, n_ranks)
        for a, algo in enumerate(v.algorithms):
            if fn in ("Broadcast", "Reduce") and algo != "Ring":
                continue
            if fn in ("ReduceScatter", "AllGather") and algo not in ("PAT", "Ring", "NVLS", "CollNetDirect"):
                continue
            if fn == "AllReduce" and algo == "PAT":
                continue
            g = graphs[a]
            for p, proto in enumerate(PROTOCOLS):
                if algo in ("NVLS", "NVLSTree") and proto != "Simple":
                    continue
                if fn in ("ReduceScatter", "AllGather") and algo == "PAT" and (proto != "Simple" or not pat):
                    continue
                collnet = algo in ("CollNetDirect", "CollNetChain")
                b = f32(g.bw_intra if n_nodes <= 2 or collnet else g.bw_inter)
                if algo in ("NVLS", "NVLSTree"):
                    if g.n_channels < 2:  # NVLS needs at least 2 channels
                        continue
                    intra = f32(f32(f32(g.bw_intra * v.nvls_efficiency[cc]) * (g.n_channels - 1)) / g.n_channels)
                    intra = f32(intra * 2.0) if fn == "AllReduce" else f32(intra * f32(f32(ppn - 1) / ppn))
                    inter = f32(g.bw_inter * (2 if n_nodes <= 2 and algo == "NVLSTree" else 1))
                    b = min(intra, inter, f32(nvls_tree_max) if algo == "NVLSTree" else math.inf)
                bus = f32(g.n_channels * b)
                if algo == "Ring" and proto == "LL":
                    bus = f32(min(ll_max, bus * .5))
                if algo == "Ring" and proto == "LL128":
                    bus = f32(min(bus * 0.92, g.n_channels * ring_ll128_max))
                if algo == "Tree" and fn == "AllReduce":
                    bus = f32(min(bus * .92, g.n_channels * tree_max))
                if algo == "Tree" and proto == "LL":
                    bus = f32(min(bus * 1.0 / 3.8, ll_max))
                if algo == "Tree" and proto == "LL128":
                    bus = f32(min(bus * (7.0 / 9.0 if n_nodes == 1 else 120.0 / 128.0), g.n_channels * tree_ll128_max))
                if algo == "Tree" and comm.tree.pattern == "tree":  # comm->maxTreePattern
                    bus = f32(bus * .85)
                if algo == "PAT":
                    bus = f32(bus * .75)
                if collnet and proto != "Simple":
                    bus = 0.0
                if algo == "CollNetDirect" and proto == "Simple":
                    if fn in ("AllGather", "ReduceScatter"):
                        bus = f32(ppn * min(g.bw_intra, f32(g.bw_inter * f32(0.9))))
                    else:  # needs every GPU to have a local NIC for full speed
                        factor = f32(f32(ppn / (1.0 * g.n_channels)) if g.n_channels else 0.0)
                        factor = f32(factor - f32(factor - 1) / 2)
                        bus = f32(bus / factor) if factor else 0.0
                        if comm.min_compcap >= 90:
                            bus = f32(bus * .85)
                if algo in ("NVLS", "CollNetDirect") and proto == "Simple" and fn in ("AllGather", "ReduceScatter") \
                        and n_nodes > 1:
                    # needs the CollNet plugin's iallgather/ireducescatter (assumed absent, as in IB SHARP's plugin)
                    # and a NIC head per local GPU (heads: the CollNetDirect channels); 2.30 no longer requires
                    # iallgather for AllGather
                    heads = comm.collnet_direct.n_channels
                    if fn == "ReduceScatter" or v.name == "2.29" or not comm.collnet or comm.local_ranks > heads:
                        bus = 0.0
                if not (algo != "Ring" and fn in ("AllGather", "ReduceScatter")):
                    ratio = f32(1.0 * n_ranks / nsteps) if algo in ("Ring", "NVLS", "NVLSTree") else .5
                    bus = f32(bus * ratio)
                bw[c][a][p] = bus
                lat[c][a][p] = f32(v.base_lat[a][p])
                intra_lat = f32(hw_lat[intra_hw[a]][a][p])
                inter_lat = f32(hw_lat[HW_NET][0 if ppn == 1 else a][p])  # with one GPU per node: Tree's
                inter_lat = f32(inter_lat + g.latency_inter)
                if proto == "Simple":
                    inter_lat = f32(inter_lat + g.latency_inter)
                n_inter = 0 if n_nodes == 1 else 2 * (n_nodes - 1) if fn == "AllReduce" else n_nodes - 1
                lat[c][a][p] = _add_latency(comm, v, fn, algo, proto, g, lat[c][a][p], intra_lat, inter_lat,
                                            hw_lat, hw[a], nsteps, n_inter)


def _ll128_allowed(comm: Comm, v: Version, g: Graph, fn: str, algo: str) -> bool:
    """LL128's default (``NCCL_PROTO`` unset): only where NVIDIA tested it (silent corruption elsewhere)."""
    max_cc = comm.max_compcap or comm.min_compcap
    intra_ok = v.path_rank(g.type_intra) <= v.path_rank("NVB")
    if v.name == "2.19":
        inter_ok = v.path_rank(g.type_inter) <= v.path_rank("PXB") or \
            (comm.min_compcap >= 90 and v.path_rank(g.type_inter) <= v.path_rank("PXN"))
        return inter_ok and intra_ok and comm.min_compcap == max_cc and comm.min_compcap in (70, 80, 90)
    c2c = int(comm.env.get("NCCL_LL128_C2C", 1))
    limit = "PXN" if c2c and comm.min_compcap >= 90 else "PXB"
    same_cc = comm.min_compcap == max_cc or (v.name != "2.29" and comm.min_compcap >= 90)
    return v.path_rank(g.type_inter) <= v.path_rank(limit) and intra_ok and same_cc and comm.min_compcap >= 70


def _enable(comm: Comm, v: Version, bw, backup) -> tuple[list, list]:
    """The enable rules and user overrides: ``NCCL_PROTO``, ``NCCL_ALGO``, NVLSTree off on one node,
    CollNet off without the plugin (and NVLS across nodes with it), CollNetDirect off without NVSwitch."""
    nf, na = len(FUNCTIONS), len(v.algorithms)
    prefixes = None if v.name == "2.19" else tuple(FUNCTIONS)
    proto = parse_list(comm.env["NCCL_PROTO"], PROTOCOLS, prefixes) if "NCCL_PROTO" in comm.env else None
    algo = parse_list(comm.env["NCCL_ALGO"], v.algorithms, prefixes) if "NCCL_ALGO" in comm.env else None
    proto_on = [list(proto[0 if len(proto) == 1 else f]) if proto else [1, 2, 1] for f in range(nf)]
    algo_on = [list(algo[0 if len(algo) == 1 else f]) if algo else [1] * na for f in range(nf)]
    names = v.algorithms
    for f in range(nf):
        for a, name in enumerate(names):
            off = comm.n_nodes == 1 and name == "NVLSTree"
            if not comm.collnet and (name in ("CollNetDirect", "CollNetChain") or (name == "NVLS" and comm.n_nodes > 1)):
                off = True
            if comm.collnet and not comm.nvswitch and name == "CollNetDirect":
                off = True
            if off:
                algo_on[f][a] = 0
        if v.name == "2.19" and not comm.collnet and not any(algo_on[f][a] for a, n in enumerate(names)
                                                               if n in ("Ring", "Tree", "NVLS", "NVLSTree")):
            algo_on[f][names.index("Ring")] = algo_on[f][names.index("Tree")] = 1  # NCCL_ALGO=COLLNET ignored
    graphs = comm.graphs(v)
    for f, fn in enumerate(FUNCTIONS):
        for a, name in enumerate(names):
            for p in range(len(PROTOCOLS)):
                on = proto_on[f][p]
                if on == 2:  # LL128 by default
                    on = int(_ll128_allowed(comm, v, graphs[a], fn, name))
                if not on or not algo_on[f][a]:
                    bw[f][a][p] = 0.0
        if v.name == "2.19" and not any(bw[f][a][p] for a in range(na) for p in range(3)):
            bw[f][names.index("Ring")] = list(backup[f])  # at least Ring: restored with every protocol
    return algo_on, [[int(x != 0) for x in row] for row in proto_on]
