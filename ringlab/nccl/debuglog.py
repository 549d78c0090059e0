"""Read NCCL_DEBUG=INFO lines: version, communicator shape, rings, trees, transports, NICs, tuning.

NCCL documents the variable but not the log, so the formats here come from NCCL's sources
(``src/init.cc``, ``src/graph/rings.cc``, ``src/transport/{p2p,shm,net}.cc``,
``src/transport/net_ib/init.cc``, ``src/transport/net_socket.cc``, ``src/enqueue.cc``; NVIDIA/nccl at
5067397, and older releases through the fixtures) and from aws-ofi-nccl and RCCL logs:

* prefix ``host:pid:tid [dev] NCCL INFO message`` (WARN lines may add ``file.cc:123``); pastes often
  drop the prefix, keeping ``NCCL INFO message`` or even the message alone;
* ``NCCL version 2.21.5+cuda12.4`` / ``RCCL version 2.18.3+hip6.0 HEAD:2f6d59e+``;
* ``comm 0x55.. rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0`` (2.19+), older
  ``comm 0x7f.. rank 15 nranks 32 cudaDev 7 ... - Init COMPLETE``;
* rings ``Channel 00/24 :    0   1   2   3``; trees ``Trees [0] 1/-1/-1->0->-1 [1] ...``;
  ``24 coll channels, 0 collnet channels, 0 nvls channels, 32 p2p channels, ...`` (older: ``2 coll
  channels, 2 p2p channels, ...``);
* connections ``Channel 00/0 : 1[1] -> 0[0] via P2P/IPC/read`` (also ``P2P/CUMEM``, ``P2P/direct
  pointer``, ``P2P/indirect/2[2]``), ``via SHM/direct/direct`` (older: ``via direct shared memory``),
  ``Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA`` (``NET/IBext_v8``, ``NET/Socket``,
  ``NET/AWS Libfabric``, ``NET/NCCL RDMA Plugin v9``; ``/Shared`` may follow); older releases and
  aws-ofi-nccl's examples print ``Ring 01 : 0[160] -> 1[160] [send] via NET/AWS Libfabric/0``;
* ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>``,
  ``NET/Socket : Using [0]eth0:10.0.0.5<0>``, ``Using network IB``, ``NET/OFI Selected Provider is
  efa (found 4 nics)``, ``NET/IB : Made virtual device [0] name=mlx5_1 speed=100000`` (Mb/s),
  topology dumps ``+ NET[25.0] - NET/1`` (GB/s);
* ``NCCL_P2P_DISABLE set by environment to 1``; ``Check P2P Type intraNodeP2pSupport 0 ...``;
  ``NVLS multicast support is available on dev 0``;
* TUNING: the table of ``ncclTopoTuneModel`` (2.18+: ``  Algorithm   |   Tree ...``, ``    AllReduce |
  16.8/   0.5 | ...``; kept whole for :mod:`ringlab.nccl.tuning.logread`) and, 2.24+,
  ``AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..7}``;
  older TRACE: ``1048576 Bytes -> Algo 1 proto 2 time 36.4`` (algorithm and protocol indices).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .lines import Line
from .table import LIB_VERSION as _VERSION  # one pattern for "NCCL version 2.x.y" in logs and tables

_PREFIX = re.compile(r"^(?:(?P<host>[^\s:\[\]]+):(?P<pid>[0-9]+):(?P<tid>[0-9]+)\s+)?(?:\[(?P<dev>[0-9]+)\]\s+)?"
                     r"(?:(?P<file>[\w./-]+:[0-9]+)\s+)?NCCL (?P<level>INFO|WARN|TRACE|ABORT)\b ?(?P<msg>.*)$")
_COMM = re.compile(r"\bcomm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
                   r"localRanks (?P<local>\d+) localRank (?P<localrank>\d+)")
_COMM_OLD = re.compile(r"\bcomm 0x[0-9a-fA-F]+ rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)")
_RING = re.compile(r"^Channel (?P<ch>\d+)/(?P<n>\d+) :(?P<ranks>(?:\s+\d+)+)\s*$")
_TREES = re.compile(r"^Trees((?: \[\d+\] \S+)+)")
_CHANNELS = re.compile(r"^(?P<coll>\d+) coll channels, (?:(?P<collnet>\d+) collnet channels, )?"
                       r"(?:(?P<nvls>\d+) nvls channels, )?(?P<p2p>\d+) p2p channels")
_CONNECT = re.compile(r"^(?:Channel|Ring) (?P<ch>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)\[(?P<sdev>[0-9a-fA-F]+)\] -> "
                      r"(?P<dst>\d+)\[(?P<ddev>[0-9a-fA-F]+)\](?: \[(?P<dir>send|receive)\])? via (?P<via>.+?)\s*$")
_NET_VIA = re.compile(r"^NET/(?P<net>[^/]+)/(?P<dev>\d+)(?:\(\d+\))?(?P<flags>(?:/\w+)*)")
_IB_USING = re.compile(r"^NET/IB\s*:\s*Using\s*(?P<devs>(?:\[\d+\]\S+\s*)+)")
_IB_DEV = re.compile(r"\[(?P<i>\d+)\](?P<name>[^\s:\[\]]+):(?P<port>\d+)/(?P<layer>IB|RoCE)")
_SOCKET_USING = re.compile(r"^NET/Socket\s*:\s*Using\s*(?P<ifs>(?:\[\d+\]\S+\s*)+)")
_NETWORK = re.compile(r"^Using network (?P<name>.+?)\s*$")
_OFI_PROVIDER = re.compile(r"Selected [Pp]rovider is (?P<provider>\w+)(?:.*?found (?P<nics>\d+) nics)?")
_SPEED = re.compile(r"Made virtual device \[\d+\] name=\S+ speed=(?P<mbps>\d+)")
_TOPO_NET = re.compile(r"\+ NET\[(?P<gbs>\d+(?:\.\d+)?)\] - NET/")
_ENV = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]+) set by environment to (?P<value>\S+?)\.?$")
_P2P_CHECK = re.compile(r"Check P2P Type (?:intraNodeP2pSupport|isAllDirectP2p) (?P<ok>[01])")
_NVLS = re.compile(r"NVLS multicast support is (?P<not>not )?available on dev")
_TUNING = re.compile(r"^(?P<func>\w+): (?P<bytes>\d+) Bytes -> Algo (?P<algo>\w+) proto (?P<proto>\w+)")
_TUNING_OLD = re.compile(r"^(?P<bytes>\d+) Bytes -> Algo (?P<algo>\d+) proto (?P<proto>\d+) time")
# the tuning table of ncclTopoTuneModel (2.18+; read by ringlab.nccl.tuning.logread)
_TUNING_TABLE = re.compile(r"^(?:Algorithm|Protocol|Max NThreads|Broadcast|Reduce|AllGather|ReduceScatter|AllReduce)"
                           r"\s*\|")
_NO_IB = re.compile(r"NET/IB : No device found|Failed to open libibverbs")
_TCPX = re.compile(r"NET/(?P<name>GPUDirectTCPXO?|FasTrak)\b")

# NCCL's algorithm and protocol indices (src/include/device.h, NCCL_ALGO_* / NCCL_PROTO_*)
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")


def net_kind(name: str) -> str:
    """The fabric behind a NET transport name: ``IB`` (also RoCE; plugin names too), ``Socket``,
    ``OFI`` (aws-ofi-nccl: EFA or another libfabric provider), ``TCPX`` (Google GPUDirect-TCPX/O)."""
    low = name.lower()
    if low.startswith("socket"):
        return "Socket"
    if "libfabric" in low or low.startswith("ofi"):
        return "OFI"
    if "tcpx" in low or "fastrak" in low:
        return "TCPX"
    if low.startswith("ib") or "rdma" in low or "roce" in low:
        return "IB"
    return name


@dataclass(frozen=True)
class Connection:
    """One ``Channel cc/k : src[dev] -> dst[dev] via ...`` line: ``transport`` is P2P, SHM or NET."""

    channel: int
    src: int
    dst: int
    transport: str
    net: str | None  # for NET: IB, Socket, OFI, TCPX or the plugin's own name
    nic: int | None
    gdrdma: bool
    detail: str
    line: Line


@dataclass
class LogFacts:
    """Everything the NCCL_DEBUG lines of one run say. Lists keep the evidence lines."""

    versions: dict[str, str] = field(default_factory=dict)
    version_lines: list[Line] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    comm_lines: list[Line] = field(default_factory=list)
    ring_channels: int | None = None
    ring_lines: list[Line] = field(default_factory=list)
    coll_channels: int | None = None
    nvls_channels: int | None = None
    channel_lines: list[Line] = field(default_factory=list)
    trees: int = 0
    tree_lines: list[Line] = field(default_factory=list)
    connections: list[Connection] = field(default_factory=list)
    ib_devices: list[tuple[str, str]] = field(default_factory=list)  # (name, IB|RoCE)
    ib_lines: list[Line] = field(default_factory=list)
    socket_lines: list[Line] = field(default_factory=list)
    networks: dict[str, Line] = field(default_factory=dict)  # "Using network X" -> first line
    ofi_provider: str | None = None
    ofi_nics: int | None = None
    ofi_lines: list[Line] = field(default_factory=list)
    tcpx_lines: list[Line] = field(default_factory=list)
    nic_speed_gbs: float | None = None  # GB/s per NIC when the log prints it
    nic_speed_lines: list[Line] = field(default_factory=list)
    no_ib_lines: list[Line] = field(default_factory=list)
    env: dict[str, tuple[str, Line]] = field(default_factory=dict)
    p2p_support: bool | None = None
    p2p_lines: list[Line] = field(default_factory=list)
    nvls_available: bool | None = None
    nvls_lines: list[Line] = field(default_factory=list)
    tuning: list[tuple[str | None, int, str, str, Line]] = field(default_factory=list)
    tuning_table: list[Line] = field(default_factory=list)  # the TUNING table's lines, as printed
    warnings: list[Line] = field(default_factory=list)
    lines: int = 0  # NCCL log lines seen
    unparsed: int = 0  # of those, lines carrying nothing this reader uses

    def add(self, line: Line) -> bool:
        """Take one line if it is NCCL log output; return False when it is not."""
        text = line.text
        match = _PREFIX.match(text)
        if match:
            if match["host"]:
                self.hosts.add(match["host"])
            message, level = match["msg"].strip(), match["level"]
        else:
            message, level = text, None
            if not (_VERSION.match(text) or _CONNECT.match(text) or _RING.match(text) or _TREES.match(text)
                    or text.startswith(("NET/", "Using network ")) or _CHANNELS.match(text)):
                return False
        self.lines += 1
        if level == "WARN":
            self.warnings.append(line)
        if not self._message(message, line):
            self.unparsed += 1
        return True

    def _message(self, msg: str, line: Line) -> bool:  # noqa: C901 - one branch per documented line kind
        m = _VERSION.match(msg) or re.match(r"^(?P<lib>NCCL|RCCL) version (?P<version>\S+)", msg)
        if m:
            self.versions.setdefault(m["lib"].lower(), m["version"])
            self.version_lines.append(line)
            return True
        m = _COMM.search(msg)
        if m:
            self.nranks, self.nnodes, self.local_ranks = int(m["nranks"]), int(m["nnodes"]), int(m["local"])
            self.comm_lines.append(line)
            return True
        m = _COMM_OLD.search(msg)
        if m:
            self.nranks = self.nranks or int(m["nranks"])
            self.comm_lines.append(line)
            return True
        m = _RING.match(msg)
        if m:
            self.ring_channels = max(self.ring_channels or 0, int(m["n"]))
            self.ring_lines.append(line)
            return True
        m = _CONNECT.match(msg)
        if m:
            self.connections.append(_connection(m, line))
            return True
        m = _TREES.match(msg)
        if m:
            self.trees = max(self.trees, m[1].count("["))
            self.tree_lines.append(line)
            return True
        m = _CHANNELS.match(msg)
        if m:
            self.coll_channels = int(m["coll"])
            self.nvls_channels = int(m["nvls"]) if m["nvls"] else self.nvls_channels
            self.channel_lines.append(line)
            return True
        m = _IB_USING.match(msg)
        if m:
            self.ib_devices = [(d["name"], d["layer"]) for d in _IB_DEV.finditer(m["devs"])]
            self.ib_lines.append(line)
            return True
        if _SOCKET_USING.match(msg):
            self.socket_lines.append(line)
            return True
        m = _NETWORK.match(msg)
        if m:
            self.networks.setdefault(m["name"], line)
            return True
        m = _OFI_PROVIDER.search(msg)
        if m:
            self.ofi_provider = m["provider"].lower()
            self.ofi_nics = int(m["nics"]) if m["nics"] else self.ofi_nics
            self.ofi_lines.append(line)
            return True
        m = _SPEED.search(msg)
        if m:
            self.nic_speed_gbs = int(m["mbps"]) * 1e6 / 8 / 1e9
            self.nic_speed_lines.append(line)
            return True
        m = _TOPO_NET.search(msg)
        if m:
            self.nic_speed_gbs = max(self.nic_speed_gbs or 0.0, float(m["gbs"]))
            self.nic_speed_lines.append(line)
            return True
        if _NO_IB.search(msg):
            self.no_ib_lines.append(line)
            return True
        m = _ENV.match(msg)
        if m:
            self.env.setdefault(m["name"], (m["value"], line))
            return True
        m = _P2P_CHECK.search(msg)
        if m:
            self.p2p_support = m["ok"] == "1"
            self.p2p_lines.append(line)
            return True
        m = _NVLS.search(msg)
        if m:
            self.nvls_available = m["not"] is None
            self.nvls_lines.append(line)
            return True
        m = _TUNING.match(msg)
        if m:
            self.tuning.append((m["func"], int(m["bytes"]), m["algo"], m["proto"], line))
            return True
        m = _TUNING_OLD.match(msg)
        if m:
            algo, proto = int(m["algo"]), int(m["proto"])
            self.tuning.append((None, int(m["bytes"]), ALGORITHMS[algo] if algo < len(ALGORITHMS) else str(algo),
                                PROTOCOLS[proto] if proto < len(PROTOCOLS) else str(proto), line))
            return True
        if _TUNING_TABLE.match(msg):
            self.tuning_table.append(line)
            return True
        if _TCPX.search(msg):
            self.tcpx_lines.append(line)
            return True
        return False


def _connection(m: re.Match, line: Line) -> Connection:
    via = m["via"]
    net = nic = None
    gdr = False
    if via.startswith("NET/"):
        transport = "NET"
        n = _NET_VIA.match(via)
        if n:
            net, nic = net_kind(n["net"]), int(n["dev"])
            gdr = "/GDRDMA" in n["flags"]
    elif via.startswith("P2P"):
        transport = "P2P"
    elif via.startswith("SHM") or "shared memory" in via:
        transport = "SHM"
    elif via.startswith(("COLLNET", "CollNet")):
        transport = "COLLNET"
    else:
        transport = via.split("/")[0]
    return Connection(int(m["ch"]), int(m["src"]), int(m["dst"]), transport, net, nic, gdr, via, line)
