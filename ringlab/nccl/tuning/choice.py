"""NCCL's choice for one call: the predicted time of every algorithm x protocol, the fastest, its channels.

Ports ``ncclTopoGetAlgoTime`` (``src/graph/tuning.cc``) and the choice of ``topoGetAlgoInfo`` /
``updateCollCostTable`` (``src/enqueue.cc``); releases and line ranges in
:mod:`ringlab.nccl.tuning.versions`. One operation per launch (``numPipeOps`` = 1, as nccl-tests
without ``-a``/``-m``), sum of a floating-point type (NVLS supports it), no tuner plugin, no CollNet
channel tuning (its ``nHeads`` is not modelled: CollNetDirect keeps all channels).

Time: ``t = latency x (1.4 for a multi-node Ring/Simple all-reduce once every rank and channel has
64 B, 1.9 before Ampere) + bytes / (1000 x bandwidth)`` in microseconds, the bandwidth scaled down
for Tree by ``treeCorrectionFactor`` at medium sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Table, f32, log2i
from .versions import COLLECTIVE_FUNCTION, FUNCTIONS, MAX_NTHREADS, PROTOCOLS, WARP_SIZE

IGNORE = None  # NCCL_ALGO_PROTO_IGNORE: the pair is not considered at all


@dataclass(frozen=True)
class Choice:
    """What NCCL picks for ``nbytes`` of ``function``: ``algorithm``, ``protocol``, the predicted
    ``time_us``, ``channels`` (the most it will use, ``nMaxChannels``; the scheduler may use fewer for
    small messages, as the ``channel{Lo..Hi}`` of its TUNING line shows) and ``threads`` per channel.
    ``times`` maps every ``(algorithm, protocol)`` NCCL considered to its time (None: not available)."""

    function: str
    nbytes: int
    algorithm: str
    protocol: str
    time_us: float
    channels: int
    threads: int
    times: dict

    @property
    def label(self) -> str:
        """NCCL's spelling in its TUNING lines: ``RING/SIMPLE``, ``NVLS_TREE/SIMPLE``."""
        return f"{algo_upper(self.algorithm)}/{self.protocol.upper()}"


def algo_upper(name: str) -> str:
    """``ncclAlgoToString``: ``Ring`` -> ``RING``, ``CollNetDirect`` -> ``COLLNET_DIRECT``, ``NVLSTree`` -> ``NVLS_TREE``."""
    return {"CollNetDirect": "COLLNET_DIRECT", "CollNetChain": "COLLNET_CHAIN", "NVLSTree": "NVLS_TREE"}.get(
        name, name.upper())


def time_terms(table: Table, function: str, algorithm: str, protocol: str, nbytes: int) -> tuple[float, float] | None:
    """The latency (us) and bandwidth (GB/s) ``ncclTopoGetAlgoTime`` uses for one ``nbytes`` call, after its
    corrections (Tree at medium sizes, the multi-node Ring/Simple plateau); None where the bandwidth is 0.

    In 2.19 a Ring disabled by the user still has its backup bandwidth (``ringbdw``), returned here too;
    :func:`choose` takes it only when nothing else is available, as NCCL does."""
    v = table.version
    f, a, p = table.index(function, algorithm, protocol)
    bw, lat = table.bandwidth[f][a][p], table.latency[f][a][p]
    if bw == 0 and v.name == "2.19" and algorithm == "Ring":
        bw = table.ring_backup[f][p]
    if bw == 0:
        return None
    comm = table.comm
    log_size = log2i(int(nbytes) >> 6, v)
    tcf = v.tree_correction
    if algorithm == "Tree" and 0 <= log_size < 23 and (v.name == "2.19" or function == "AllReduce"):
        bw = f32(bw * tcf[p][log_size])
    if algorithm == "NVLSTree" and v.name != "2.19" and function == "AllReduce" and 0 <= log_size < 24 \
            and comm.min_compcap >= 100 and comm.cpu_arch == "x86":
        bw = f32(bw * tcf[p][log_size])
    if algorithm == "Ring" and protocol == "Simple" and comm.n_nodes > 1 and function == "AllReduce" \
            and int(nbytes) // (comm.channels * comm.n_ranks) >= 64:
        lat = f32(lat * (1.9 if comm.min_compcap < 80 else 1.4))  # plateau effect of ring
    return lat, bw


def algo_time(table: Table, function: str, algorithm: str, protocol: str, nbytes: int) -> float | None:
    """``ncclTopoGetAlgoTime``: microseconds for one ``nbytes`` call, ``latency + nbytes / (1000 x bandwidth)``
    in float32 with the terms of :func:`time_terms`; None where the bandwidth is 0."""
    terms = time_terms(table, function, algorithm, protocol, nbytes)
    if terms is None:
        return None
    lat, bw = terms
    return float(np.float32(lat) + np.float32(nbytes) / np.float32(f32(1000 * bw)))


def _considered(table: Table, function: str, algorithm: str) -> bool:
    """The algorithms NCCL even looks at for this call (``topoGetAlgoInfo`` 2.19, ``updateCollCostTable`` later)."""
    comm, v = table.comm, table.version
    collnet, nvls = comm.collnet, comm.nvls_support
    if algorithm in ("CollNetDirect", "CollNetChain"):
        if not collnet:
            return False
        if v.name != "2.19" and comm.local_ranks > 8:  # NCCL_MAX_DIRECT_ARITY + 1
            return False
    if v.name == "2.19":
        if algorithm == "NVLS" and not nvls and function != "AllGather":
            return False
        if algorithm == "NVLS" and not collnet and comm.n_nodes > 1:
            return False
        if algorithm == "NVLS" and function in ("AllGather", "ReduceScatter") and comm.n_nodes > 1:
            return False
        return not (algorithm == "NVLSTree" and not nvls)
    if algorithm in ("NVLS", "NVLSTree"):  # the communicator's NVLS support (a sum of a float type is assumed)
        if not nvls or (function != "AllReduce" and comm.local_ranks > v.nvls_max_arity):
            return False
    return not (algorithm == "NVLS" and not collnet and comm.n_nodes > 1)


def choose(table: Table, function: str, nbytes: int) -> Choice:
    """The algorithm and protocol with the least predicted time for one ``nbytes`` ``function`` call
    (``AllReduce``, ``AllGather`` ... or ringlab's ``all_reduce``), then its channels and threads.

    ``nbytes`` is what NCCL's time model sees: the message for all-reduce, broadcast and reduce; the
    whole gathered buffer (rank count x per-rank count) for all-gather and reduce-scatter
    (``ncclFuncMaxSendRecvCount``), which is nccl-tests' size column. Raises ValueError when nothing is
    available (NCCL: "No algorithm/protocol available", as with ``NCCL_ALGO=Tree`` for an all-gather)."""
    function = COLLECTIVE_FUNCTION.get(function, function)
    if function not in FUNCTIONS:
        raise ValueError(f"unknown function {function!r}; accepted: {', '.join(FUNCTIONS)} (or "
                         f"{', '.join(COLLECTIVE_FUNCTION)})")
    if int(nbytes) < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes}")
    v, comm = table.version, table.comm
    times: dict = {}
    if comm.n_ranks == 1:
        return Choice(function, int(nbytes), "Ring", "Simple", 0.0, 1, _threads(table, "Ring", "Simple", 1, 0)[1],
                      {("Ring", "Simple"): 0.0})
    best = backup_best = None
    for algorithm in v.algorithms:
        if not _considered(table, function, algorithm):
            continue
        for protocol in PROTOCOLS:
            t = algo_time(table, function, algorithm, protocol, nbytes)
            f, a, p = table.index(function, algorithm, protocol)
            is_backup = v.name == "2.19" and algorithm == "Ring" and table.bandwidth[f][a][p] == 0 and t is not None
            times[(algorithm, protocol)] = None if is_backup else t
            if t is None:
                continue
            key = (np.float32(t), algorithm, protocol)
            if is_backup:
                if backup_best is None or key[0] < backup_best[0]:
                    backup_best = key
            elif best is None or key[0] < best[0]:
                best = key
    best = best or backup_best
    if best is None:
        env = ", ".join(f"{k}={comm.env[k]}" for k in ("NCCL_ALGO", "NCCL_PROTO") if k in comm.env)
        raise ValueError(f"no algorithm/protocol available for {function}" + (f" with {env}" if env else ""))
    t, algorithm, protocol = best
    channels, threads = _threads(table, algorithm, protocol, comm.channels, int(nbytes))
    return Choice(function, int(nbytes), algorithm, protocol, float(t), channels, threads, times)


def _threads(table: Table, algorithm: str, protocol: str, nc: int, nbytes: int) -> tuple[int, int]:
    """Channels and threads per channel after the choice: fewer channels (then fewer threads) while each
    thread would get less than its threshold of bytes; NVLS uses its own channels."""
    v, comm = table.version, table.comm
    _, a, p = table.index("AllReduce", algorithm, protocol)
    nt, thr = table.max_threads[a][p], table.thread_threshold[a][p]
    if algorithm in ("NVLS", "NVLSTree"):
        nc = comm.nvls_channels
        if v.name != "2.19" and comm.n_nodes > 1 and algorithm == "NVLS":
            nc = min(comm.nvls_channels, comm.channels)
    elif algorithm != "CollNetDirect":
        if v.name == "2.19":
            while nbytes < nc * nt * thr:
                if nc >= 2:
                    nc -= 1
                elif nt % 128 == 0:
                    nt //= 2
                else:
                    break
        else:
            while nbytes < nc * nt * thr and nc >= 2:
                nc -= 1
            while nbytes < nc * nt * thr and nt % 128 == 0:
                nt //= 2
    if protocol == "Simple":
        nt += WARP_SIZE if algorithm == "Ring" else 4 * WARP_SIZE if algorithm == "Tree" else 0
    nt = max(nt, 3 * WARP_SIZE)
    if v.name != "2.19" and algorithm in ("Tree", "PAT"):
        nt = MAX_NTHREADS
    return nc, nt


def choices(table: Table, function: str, sizes) -> list[Choice]:
    """:func:`choose` at each of ``sizes`` (bytes)."""
    return [choose(table, function, int(s)) for s in sizes]
