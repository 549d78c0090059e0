"""The constants of NCCL's tuning model, per release, copied from NVIDIA/nccl with the lines they come from.

Three releases are kept, selectable by name:

========  ===========  ==========================================  ==========================================
version   tag          tuning constants                            model / choice
========  ===========  ==========================================  ==========================================
``2.19``  v2.19.3-1    ``src/graph/tuning.cc`` lines 54-106,       ``ncclTopoTuneModel`` lines 120-390,
          (8c6c595)    ``treeCorrectionFactor`` lines 392-398      ``ncclTopoGetAlgoTime`` 400-427;
                                                                   ``src/enqueue.cc`` ``topoGetAlgoInfo``
                                                                   lines 1151-1238
``2.29``  v2.29.7-1    ``src/graph/tuning.cc`` lines 134-200       ``ncclTopoTuneModel`` lines 231-577,
          (b91894b)    (``ncclTunerConstantsDefaults``,            ``ncclTopoGetAlgoTime`` 587-605;
                       ``nvlsEfficiency``), 579-585                ``src/enqueue.cc`` ``updateCollCostTable``
                                                                   1897-1932, ``topoGetAlgoInfo`` 1934-2024
``2.30``  v2.30.7-1    ``src/graph/tuning.cc`` lines 138-212,      ``ncclTopoTuneModel`` lines 243-618,
          (73cf112)    621-627                                     ``ncclTopoGetAlgoTime`` 630-655;
                                                                   ``src/enqueue.cc`` ``updateCollCostTable``
                                                                   1989-2026, ``topoGetAlgoInfo`` 2028-2117
========  ===========  ==========================================  ==========================================

Thread counts and thresholds: ``src/include/device.h`` (``NCCL_*_MAX_NTHREADS``, ``WARP_SIZE``),
``src/include/comm.h`` (``NCCL_*_THREAD_THRESHOLD``), ``src/graph/topo.h`` (``PCI_BW``, path types) of the
same tags. Latencies are in microseconds and bandwidths in GB/s (1e9 B/s), as NCCL keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass

FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")  # ncclFuncStr
PROTOCOLS = ("LL", "LL128", "Simple")  # ncclProtoStr
# ringlab's collective names -> NCCL's function names
COLLECTIVE_FUNCTION = {"broadcast": "Broadcast", "reduce": "Reduce", "all_gather": "AllGather",
                       "reduce_scatter": "ReduceScatter", "all_reduce": "AllReduce"}

WARP_SIZE = 32
MAX_NTHREADS = 640  # NCCL_MAX_NTHREADS
SIMPLE_MAX_NTHREADS = 512
LL_MAX_NTHREADS = 512
LL128_MAX_NTHREADS = 640
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}  # NCCL_{LL,LL128,SIMPLE}_THREAD_THRESHOLD
PCI_BW = 12.0  # GB/s, PCI Gen3 x16 (topo.h): ring Simple uses 256 threads at or below it
MAX_DIRECT_ARITY = 7  # NCCL_MAX_DIRECT_ARITY


@dataclass(frozen=True)
class Version:
    """One release's constants. Tables are indexed like NCCL's: ``[algorithm][protocol]``, hardware
    ``[NVLINK, PCI, NET]``, compute-capability rows Volta, Ampere, Hopper (, Blackwell), node-count
    columns 1, 2, more than 2."""

    name: str
    tag: str
    commit: str
    algorithms: tuple[str, ...]  # ncclAlgoStr
    paths: tuple[str, ...]  # path types in NCCL's order (PATH_LOC = 0 ...)
    base_lat: tuple[tuple[float, ...], ...]
    hw_lat: tuple[tuple[tuple[float, ...], ...], ...]
    ll_max_bws: tuple[tuple[float, ...], ...]
    per_ch_max_ring_ll128: tuple[tuple[float, ...], ...]
    per_ch_max_tree_ll128: tuple[tuple[float, ...], ...]
    per_ch_max_tree: tuple[tuple[float, ...], ...]
    per_ch_max_nvls_tree: tuple[tuple[float, ...], ...] | None
    nvls_efficiency: tuple[float, ...] | None
    tree_correction: tuple[tuple[float, ...], ...]
    nvls_max_arity: int  # NCCL_MAX_NVLS_ARITY

    def path_rank(self, path: str) -> int:
        """NCCL's number for a path type (``"NVL"`` -> 1); raises ValueError naming the accepted ones."""
        try:
            return self.paths.index(path)
        except ValueError:
            raise ValueError(f"path type {path!r} is not one of NCCL {self.name}'s: {', '.join(self.paths)}") from None

    def compcap_index(self, compcap: int) -> int:
        """Row of the per-architecture tables: Volta 0, Ampere 1, Hopper 2, Blackwell 3 (2.29 and later)."""
        if compcap >= 100 and len(self.per_ch_max_tree) > 3:
            return 3
        return 2 if compcap >= 90 else 1 if compcap >= 80 else 0


_TREE_CORRECTION = (  # treeCorrectionFactor: powers of two from 64 B; the same numbers in every release kept
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)

V2_19 = Version(
    name="2.19", tag="v2.19.3-1", commit="8c6c5951854a57ba90c4424fa040497f6defac46",
    algorithms=("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree"),
    paths=("LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS"),
    base_lat=((6.8, 14.0, 0), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0)),
    hw_lat=(
        ((.6, 1.25, 28), (.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 23), (0, 0, 23)),  # NVLink
        ((1.0, 1.9, 28), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0)),  # PCI
        ((5.0, 8.5, 28), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 14)),  # network
    ),
    ll_max_bws=((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0)),
    per_ch_max_ring_ll128=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7)),
    per_ch_max_tree_ll128=((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0)),
    per_ch_max_tree=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0)),
    per_ch_max_nvls_tree=None, nvls_efficiency=None,
    tree_correction=tuple(row[:23] for row in _TREE_CORRECTION),
    nvls_max_arity=8,
)

_PAT_ERA = {  # 2.29 and 2.30 share every constant but one (perChMaxNVLSTreeBws, Blackwell, more than 2 nodes)
    "algorithms": ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"),
    "paths": ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"),
    "base_lat": ((6.8, 14.0, 8.4), (6.6, 14.0, 8.4), (0, 0, 0), (0, 0, 0), (0, 0, 0), (0, 0, 0), (8.0, 8.0, 8.0)),
    "hw_lat": (
        ((0.6, 1.25, 4.0), (0.6, 1.9, 3.4), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 25), (0, 0, 25), (0, 0, 4.0)),
        ((1.0, 1.9, 4.0), (1.0, 2.5, 5.7), (0, 0, 3.7), (0, 0, 2.8), (0, 0, 0), (0, 0, 0), (0, 0, 4.0)),
        ((5.0, 8.5, 14), (2.7, 4.0, 14.0), (0, 0, 31), (0, 0, 30), (0, 0, 18), (0, 0, 20.9), (0, 0, 14)),
    ),
    "ll_max_bws": ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (2 * 141.0, 2 * 45.0, 2 * 35.0)),
    "per_ch_max_ring_ll128": ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0)),
    "per_ch_max_tree_ll128": ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0)),
    "per_ch_max_tree": ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0)),
    "nvls_efficiency": (0.0, 0.0, 0.85, 0.74),
    "tree_correction": _TREE_CORRECTION,
    "nvls_max_arity": 32,
}

V2_29 = Version(name="2.29", tag="v2.29.7-1", commit="b91894bd5b190c874d98a017f93f5daa515b65d0",
                per_ch_max_nvls_tree=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 43.8)),
                **_PAT_ERA)
V2_30 = Version(name="2.30", tag="v2.30.7-1", commit="73cf112295c33aee2b895f329f592f2a9b4b0f97",
                per_ch_max_nvls_tree=((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0)),
                **_PAT_ERA)

VERSIONS: dict[str, Version] = {v.name: v for v in (V2_19, V2_29, V2_30)}
NEWEST = V2_30.name


def get_version(name: str | Version) -> Version:
    """The release ``name`` (``"2.19"``, ``"2.29"``, ``"2.30"``; a full ``"2.19.3"`` maps to its minor).

    Raises ValueError naming the releases kept."""
    if isinstance(name, Version):
        return name
    key = ".".join(str(name).split("+")[0].split(".")[:2])
    if key not in VERSIONS:
        raise ValueError(f"NCCL version {name!r} is not modelled; versions: {', '.join(VERSIONS)}")
    return VERSIONS[key]
