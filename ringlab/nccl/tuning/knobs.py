"""Which NCCL environment variable changes which decision, and whether the tuning model here covers it.

Each :class:`Knob` names the decision the variable takes over, says whether
:mod:`ringlab.nccl.tuning` models it (``modelled``: the port reads it, see :class:`~ringlab.nccl.tuning.model.Comm`
``env``), and gives its source: NCCL's documentation (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html,
the anchor after ``#``) and, for the modelled ones, the source file that reads it (NVIDIA/nccl v2.30.7-1).

:data:`FINDING_KNOBS` maps the ids of :mod:`ringlab.nccl.findings` to the variables that cause or cure
them; ``ringlab explain`` names them in its findings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .model import Comm, Graph, parse_list
from .versions import FUNCTIONS, PROTOCOLS

ENV_DOC = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"


@dataclass(frozen=True)
class Knob:
    """One environment variable: the ``decision`` it changes, ``modelled`` here or not, its ``source``."""

    name: str
    decision: str
    modelled: bool
    source: str


KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("NCCL_ALGO", "which algorithms the choice may pick (Ring, Tree, NVLS, NVLSTree, CollNetDirect, "
         "CollNetChain, PAT); '^' excludes; 2.24+ also per function ('allreduce:tree')", True,
         f"{ENV_DOC}#nccl-algo; src/graph/tuning.cc (parseList, algoEnable)"),
    Knob("NCCL_PROTO", "which protocols the choice may pick (LL, LL128, Simple); setting LL128 on forces it "
         "even where NCCL keeps it off by default", True, f"{ENV_DOC}#nccl-proto; src/graph/tuning.cc (protoEnable)"),
    Knob("NCCL_MIN_NCHANNELS", "the least number of channels (CTAs) per collective: more parallel rings/trees",
         True, f"{ENV_DOC}#nccl-min-nchannels; src/graph/connect.cc (ncclTopoPostset)"),
    Knob("NCCL_MAX_NCHANNELS", "the most channels: fewer channels cap the bandwidth of every algorithm", True,
         f"{ENV_DOC}#nccl-max-nchannels; src/graph/search.cc, src/graph/connect.cc"),
    Knob("NCCL_NVLS_ENABLE", "NVLink SHARP (in-switch reduction: NVLS and NVLSTree); 0 turns it off", True,
         f"{ENV_DOC}#nccl-nvls-enable; src/transport/nvls.cc"),
    Knob("NCCL_COLLNET_ENABLE", "network in-switch reduction (SHARP) through the CollNet plugin", True,
         f"{ENV_DOC}#nccl-collnet-enable; src/graph/tuning.cc (collnetEnable)"),
    Knob("NCCL_NTHREADS", "CUDA threads per channel for Simple and LL (64 to 512, multiple of 32); the Simple "
         "ring default is 256 on PCIe-class bandwidth", True,
         f"{ENV_DOC}#nccl-nthreads; src/graph/tuning.cc (getNthreads)"),
    Knob("NCCL_NET_GDR_LEVEL", "how far (PIX, PXB, PHB, SYS) a NIC may be from a GPU and still use GPUDirect "
         "RDMA; beyond it data is staged through host memory", False, f"{ENV_DOC}#nccl-net-gdr-level"),
    Knob("NCCL_P2P_LEVEL", "how far apart two GPUs may be (NVL, PIX, PXB, PHB, SYS) and still use P2P; "
         "beyond it they use SHM (host memory)", False, f"{ENV_DOC}#nccl-p2p-level"),
    Knob("NCCL_P2P_DISABLE", "1 turns off GPU-to-GPU P2P (NVLink and PCIe): traffic in a node goes through SHM",
         False, f"{ENV_DOC}#nccl-p2p-disable"),
    Knob("NCCL_SHM_DISABLE", "1 turns off the host shared-memory transport: without P2P too, the node's GPUs "
         "talk through the network", False, f"{ENV_DOC}#nccl-shm-disable"),
    Knob("NCCL_IB_HCA", "which InfiniBand/RoCE adapters (and ports) NCCL opens; leaving rails out caps the "
         "inter-node bandwidth", False, f"{ENV_DOC}#nccl-ib-hca"),
    Knob("NCCL_CROSS_NIC", "whether a ring may leave a node on one NIC and enter the next on another (rails); "
         "0 keeps each channel on one rail", False, f"{ENV_DOC}#nccl-cross-nic"),
    Knob("NCCL_BUFFSIZE", "the buffer per pair of ranks and channel (default 4 MiB): the Simple protocol's "
         "chunk size, not a choice of the tuning model", False, f"{ENV_DOC}#nccl-buffsize"),
)}

# findings of ringlab.nccl.findings -> the variables that cause or cure them
FINDING_KNOBS: dict[str, tuple[str, ...]] = {
    "net-socket": ("NCCL_IB_HCA", "NCCL_NET"),
    "no-gdrdma": ("NCCL_NET_GDR_LEVEL",),
    "p2p-disabled-shm": ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_SHM_DISABLE"),
    "few-channels": ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"),
    "unused-nics": ("NCCL_IB_HCA", "NCCL_CROSS_NIC"),
    "above-ceiling": ("NCCL_NVLS_ENABLE", "NCCL_ALGO"),
    "latency-bound": ("NCCL_PROTO", "NCCL_ALGO"),
    "low-efficiency": ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MAX_NCHANNELS"),
}


def knob_names(finding_id: str) -> tuple[str, ...]:
    """The variables that cause or cure the finding ``finding_id`` (empty for the others)."""
    return FINDING_KNOBS.get(finding_id, ())


def validate_env(env: dict, algorithms: tuple[str, ...]) -> dict:
    """``env`` checked: names start with ``NCCL_``, the modelled ones parse. Returns a copy; raises
    ValueError naming the variable and the accepted values."""
    out = {}
    for name, value in env.items():
        if not str(name).startswith("NCCL_"):
            raise ValueError(f"{name!r} is not an NCCL variable (NCCL_...)")
        value = str(value)
        if name in ("NCCL_ALGO", "NCCL_PROTO"):
            try:
                parse_list(value, algorithms if name == "NCCL_ALGO" else PROTOCOLS, FUNCTIONS)
            except ValueError as exc:
                raise ValueError(f"{name}={exc}") from None
        elif name in ("NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_NTHREADS"):
            if not value.isdigit() or not 1 <= int(value) <= 1024:
                raise ValueError(f"{name}={value!r}: an integer from 1 to 1024")
        elif name in ("NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE") and value not in ("0", "1", "2"):
            raise ValueError(f"{name}={value!r}: 0 or 1")
        out[name] = value
    return out


def apply_channel_limits(comm: Comm) -> Comm:
    """``NCCL_MAX_NCHANNELS`` caps each graph's channels and ``comm->nChannels`` at its value (fewer channels:
    less bandwidth for every algorithm); ``NCCL_MIN_NCHANNELS`` raises ``comm->nChannels`` (copies of the rings:
    more CTAs per call, the same graph bandwidth in the model). An approximation of ``ncclTopoCompute`` and
    ``ncclTopoPostset``, which apply the limits during the search. Returns ``comm`` unchanged when neither is set."""
    env = comm.env
    n = comm.channels
    lo, hi = int(env.get("NCCL_MIN_NCHANNELS", 0)), int(env.get("NCCL_MAX_NCHANNELS", 0))
    graphs = {}
    if hi:
        for name in ("ring", "tree", "nvls"):
            g: Graph = getattr(comm, name)
            if g.n_channels > hi:
                graphs[name] = replace(g, n_channels=hi)
        n = min(n, hi)
    if lo:
        n = max(n, min(lo, hi) if hi else lo)
    if not graphs and n == comm.channels:
        return comm
    return replace(comm, n_channels=n, **graphs)
