"""What a run was: collective, ranks, nodes, GPU, transports per path, channels, algorithms.

Each fact comes with the line it was read from (``evidence``), so findings can quote it. Sources, in
the order trusted: the nccl-tests device lines (``#  Rank 3 ... on host device 3 [..] NAME``), the
NCCL_DEBUG lines (:mod:`ringlab.nccl.debuglog`), the command line (:mod:`ringlab.nccl.launch`: the
launcher's processes x ``-t`` x ``-g``), the columns (a gathered collective prints ``size = count x
itemsize x N``), and last the numbers themselves:
nccl-tests prints ``busbw = algbw x factor`` with the factor of doc/PERFORMANCE.md (taken from
:func:`ringlab.collectives.cost.bus_factor`), so the printed ratio tells the collective and the rank
count when nothing else does.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field

from ringlab.collectives import COLLECTIVES
from ringlab.collectives.cost import bus_factor

from .ceiling import gpu_link
from .debuglog import LogFacts, net_kind
from .launch import launch_of
from .lines import Line
from .records import Run

# bytes per element of the data types nccl-tests prints (src/common.cu test_typenames)
_ITEMSIZE = {"int8": 1, "uint8": 1, "char": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "f8e4m3": 1, "f8e5m2": 1,
             "half": 2, "bfloat16": 2, "fp16": 2, "bf16": 2, "int32": 4, "uint32": 4, "float": 4, "int": 4,
             "fp32": 4, "int64": 8, "uint64": 8, "double": 8}


@dataclass
class Facts:
    """The inferred shape of one run. ``nic_bandwidth`` is bytes/s per NIC and direction."""

    collective: str | None = None
    world_size: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    gpu: str | None = None
    hosts: list[str] = field(default_factory=list)
    intra_node: list[str] = field(default_factory=list)
    inter_node: list[str] = field(default_factory=list)
    channels: int | None = None
    graphs: list[str] = field(default_factory=list)  # Ring / Tree / NVLS built at init
    algorithms: list[str] = field(default_factory=list)  # ALGO/PROTO chosen, from NCCL_DEBUG_SUBSYS=TUNING
    nics: int | None = None
    nic_layer: str | None = None
    nic_bandwidth: float | None = None
    versions: dict[str, str] = field(default_factory=dict)
    bus_ratio: float | None = None  # median printed busbw / algbw
    evidence: dict[str, Line] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _median_ratio(run: Run) -> float | None:
    """Median busbw/algbw over halves whose algbw is printed with enough digits (>= 1 GB/s)."""
    ratios = [m.busbw / m.algbw for r in run.rows for m in r.measures() if m.algbw >= 1.0]
    return statistics.median(ratios) if ratios else None


def _from_structure(run: Run, world: int | None, ratio: float | None) -> str | None:
    """The collective from redop/root, size vs count, and the busbw/algbw ratio."""
    if not run.rows:
        return None
    row = max(run.rows, key=lambda r: r.size)
    item = _ITEMSIZE.get(row.dtype)
    gathered = (item is not None and world is not None and world > 1 and row.count > 0
                and row.size == row.count * item * world)
    if row.root is not None and row.root >= 0:
        if row.redop not in (None, "none"):
            return "reduce"
        if gathered or (ratio is not None and ratio < 0.999):
            return None  # gather or scatter: nccl-tests prints both with the whole buffer as size
        return "broadcast"
    if row.redop == "none":
        if gathered:
            return "all_gather"
        return "all_to_all" if ratio is None or ratio < 0.999 else "sendrecv"
    if row.redop is None:
        return None
    if gathered or (ratio is not None and ratio < 0.999 and (world is None or world > 1)):
        return "reduce_scatter"
    return "all_reduce"


def _world_from_ratio(collective: str | None, ratio: float | None, largest: int = 1024) -> int | None:
    """The rank count whose nccl-tests factor (:func:`bus_factor`) matches the printed busbw/algbw within 0.5%."""
    if ratio is None or collective not in COLLECTIVES or collective in ("broadcast", "reduce"):
        return None
    best = min(range(2, largest + 1), key=lambda n: abs(bus_factor(collective, n) - ratio))
    return best if abs(bus_factor(collective, best) - ratio) <= 0.005 * ratio else None


def _transports(facts: Facts, log: LogFacts, host_of: dict[int, str]) -> None:
    link = gpu_link(facts.gpu)
    intra, inter = [], []
    nics_used: set[int] = set()
    for c in log.connections:
        remote = (c.transport == "NET" or (c.src in host_of and c.dst in host_of and host_of[c.src] != host_of[c.dst]))
        if c.transport == "P2P":
            label = f"P2P/{link.kind}" if link else "P2P"
        elif c.transport == "SHM":
            label = "SHM"
        elif c.transport == "NET":
            label = _net_label(c.net, log, c.nic)
            nics_used.add(c.nic if c.nic is not None else -1)
            if c.gdrdma:
                label += "+GDRDMA"
        else:
            label = c.transport
        target = inter if remote else intra
        if label not in target:
            target.append(label)
            facts.evidence.setdefault(f"transport:{label}", c.line)
    multi = (facts.nodes or 1) > 1
    if multi and not inter:  # no connection lines: fall back to what the network setup said
        for name, line in log.networks.items():
            label = _net_label(net_kind(name), log, None)
            inter.append(label)
            facts.evidence.setdefault(f"transport:{label}", line)
        if not inter and log.no_ib_lines and not log.ofi_lines:
            inter.append("Socket")
            facts.evidence["transport:Socket"] = log.no_ib_lines[0]
            facts.notes.append("inter-node transport inferred: the IB verbs library is missing, leaving NCCL only "
                               "its TCP socket transport")
    facts.intra_node, facts.inter_node = intra, inter
    if multi:
        listed = len(log.ib_devices) or log.ofi_nics
        used = len(nics_used - {-1}) or None
        facts.nics = used or listed
        if log.ib_devices:
            layers = {layer for _, layer in log.ib_devices}
            facts.nic_layer = layers.pop() if len(layers) == 1 else "IB/RoCE"
        if log.nic_speed_gbs:
            facts.nic_bandwidth = log.nic_speed_gbs * 1e9
            facts.evidence["nic_speed"] = log.nic_speed_lines[0]


def _net_label(kind: str | None, log: LogFacts, nic: int | None) -> str:
    if kind == "IB":
        layers = {layer for _, layer in log.ib_devices}
        if nic is not None and nic < len(log.ib_devices):
            return "RoCE" if log.ib_devices[nic][1] == "RoCE" else "IB"
        return "RoCE" if layers == {"RoCE"} else "IB"
    if kind == "OFI":  # aws-ofi-nccl: EFA on AWS, other libfabric providers elsewhere (cxi on Slingshot)
        if log.ofi_provider is None:
            return "OFI"
        return "EFA" if log.ofi_provider == "efa" else f"Libfabric/{log.ofi_provider}"
    if kind == "Socket":
        return "Socket"
    if kind == "TCPX":
        return "GPUDirect-TCPX"
    return kind or "NET"


def infer(run: Run, log: LogFacts, nics: int | None = None, nic_gbps: float | None = None) -> Facts:
    """The :class:`Facts` of ``run`` given its NCCL log lines parsed into ``log``.

    ``nics`` / ``nic_gbps`` override the NIC count and per-NIC line rate (Gb/s, as NICs are sold);
    raises ValueError when they are not positive. Each kind of fact has its own reader below, in the
    order of the module docstring's trust.
    """
    for value, name in ((nics, "nics"), (nic_gbps, "nic_gbps")):
        if value is not None and not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")
    facts = Facts(versions={**log.versions, **run.versions})
    _devices(facts, run)
    _declared_shape(facts, run, log)
    facts.bus_ratio = _median_ratio(run)
    _collective(facts, run)
    _counted_world(facts, run)
    _gpus_per_node(facts, log)
    _check_factor(facts)
    _transports(facts, log, {d.rank: d.host for d in run.devices.values()})
    _channels_and_algorithms(facts, log)
    if nics is not None:
        facts.nics = int(nics)
    if nic_gbps is not None:
        facts.nic_bandwidth = nic_gbps * 1e9 / 8
    return facts


def _devices(facts: Facts, run: Run) -> None:
    """World size, GPU and hosts from nccl-tests' ``#  Rank ...`` device lines (the most trusted source)."""
    if not run.devices:
        return
    facts.world_size = max(run.devices) + 1
    facts.evidence["world_size"] = run.devices[max(run.devices)].line
    names = Counter(d.name for d in run.devices.values())
    facts.gpu = names.most_common(1)[0][0]
    facts.evidence["gpu"] = next(d.line for d in run.devices.values() if d.name == facts.gpu)
    facts.hosts = list(dict.fromkeys(d.host for d in sorted(run.devices.values(), key=lambda d: d.rank)))
    facts.nodes = len(facts.hosts)


def _declared_shape(facts: Facts, run: Run, log: LogFacts) -> None:
    """Ranks and nodes stated outright where the device lines say nothing: the NCCL log's ``nranks``, rccl-tests
    JSON's fields, then the command line's launcher and ``-t`` / ``-g`` (the header's nThread / nGpus win
    over the flags: the program printed them)."""
    if facts.world_size is None:
        if log.nranks:
            facts.world_size = log.nranks
            facts.evidence["world_size"] = log.comm_lines[0]
        elif run.header.get("ranks"):
            facts.world_size = run.header["ranks"]
        elif run.command is not None and (launch := launch_of(run.command.text)) is not None:
            threads, gpus = run.header.get("nthread", launch.threads), run.header.get("ngpus", launch.gpus)
            facts.world_size = launch.processes * threads * gpus
            facts.evidence["world_size"] = run.command
            facts.notes.append(f"rank count from the command line: {launch.processes} process(es) x {threads} "
                               f"thread(s) x {gpus} GPU(s) = {facts.world_size}")
    if facts.nodes is None:
        if log.nnodes:
            facts.nodes = log.nnodes
            facts.evidence["nodes"] = log.comm_lines[0]
        elif run.header.get("nodes"):
            facts.nodes = run.header["nodes"]
        elif log.hosts:
            facts.hosts, facts.nodes = sorted(log.hosts), len(log.hosts)


def _collective(facts: Facts, run: Run) -> None:
    """The collective as named (header, command line), else from the columns and busbw/algbw."""
    if run.collective:
        facts.collective = run.collective
        facts.evidence["collective"] = run.collective_evidence
        return
    world = facts.world_size or _world_from_sizes(run)
    facts.collective = _from_structure(run, world, facts.bus_ratio)
    if facts.collective and run.rows:
        facts.evidence["collective"] = max(run.rows, key=lambda r: r.size).line
        facts.notes.append(f"collective inferred from the columns (redop, root, size/count) and busbw/algbw: "
                           f"{facts.collective}")


def _world_from_sizes(run: Run) -> int | None:
    """N from a gathered collective's columns: nccl-tests prints all_gather / reduce_scatter (and gather,
    scatter) with ``size = count x itemsize x N`` (the whole buffer, ``count`` per rank); None otherwise."""
    if not run.rows:
        return None
    row = max(run.rows, key=lambda r: r.size)
    item = _ITEMSIZE.get(row.dtype)
    if item is None or row.count <= 0 or row.size % (row.count * item):
        return None
    n = row.size // (row.count * item)
    return n if n > 1 else None


def _counted_world(facts: Facts, run: Run) -> None:
    """Last resorts for the rank count: size / count of a gathered collective, then busbw / algbw."""
    if facts.world_size is not None:
        return
    if facts.collective in ("all_gather", "reduce_scatter") and (n := _world_from_sizes(run)):
        facts.world_size = n
        facts.evidence["world_size"] = max(run.rows, key=lambda r: r.size).line
        facts.notes.append(f"rank count from size / (count x type size) of {facts.collective}: {n}")
        return
    facts.world_size = _world_from_ratio(facts.collective, facts.bus_ratio)
    if facts.world_size:
        facts.notes.append(f"rank count inferred from busbw/algbw = {facts.bus_ratio:.3f}: {facts.world_size}")


def _gpus_per_node(facts: Facts, log: LogFacts) -> None:
    if facts.nodes is None and facts.world_size is not None and log.local_ranks:
        facts.nodes = facts.world_size // log.local_ranks
    if facts.world_size and facts.nodes and facts.world_size % facts.nodes == 0:
        facts.gpus_per_node = facts.world_size // facts.nodes
    elif log.local_ranks:
        facts.gpus_per_node = log.local_ranks


def _channels_and_algorithms(facts: Facts, log: LogFacts) -> None:
    """Channels, the graphs NCCL built at init (rings and trees for every communicator, NVLS when it can), and
    the ALGO/PROTO it chose (NCCL_DEBUG_SUBSYS=TUNING lines)."""
    facts.channels = log.ring_channels or log.coll_channels
    if log.ring_lines or log.channel_lines:
        facts.evidence["channels"] = (log.ring_lines or log.channel_lines)[0]
    if log.ring_lines:
        facts.graphs.append("Ring")
    if log.trees:
        facts.graphs.append("Tree")
    if log.nvls_channels:
        facts.graphs.append("NVLS")
    for _, _, algo, proto, line in log.tuning:
        name = f"{algo.upper()}/{proto.upper()}"
        if name not in facts.algorithms:
            facts.algorithms.append(name)
            facts.evidence.setdefault(f"algorithm:{name}", line)


def _check_factor(facts: Facts) -> None:
    """Note when the printed busbw/algbw does not match nccl-tests' factor for the inferred collective."""
    if facts.bus_ratio is None or facts.collective not in COLLECTIVES or not facts.world_size:
        return
    expected = bus_factor(facts.collective, facts.world_size)
    if abs(facts.bus_ratio - expected) > 0.02 * max(expected, 0.05):
        facts.notes.append(f"busbw/algbw is {facts.bus_ratio:.3f}, but nccl-tests' factor for {facts.collective} "
                           f"at {facts.world_size} ranks is {expected:.3f}: the rank count or collective may be misread")
