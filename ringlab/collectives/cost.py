"""Closed-form traffic and alpha-beta(-gamma) time of every (collective, algorithm), and where they cross.

Model (Hockney's alpha-beta, as used by Thakur, Rabenseifner & Gropp, "Optimization of Collective
Communication Operations in MPICH", IJHPCA 19(1), 2005, sec. 2)::

    t = latency_terms * alpha + busiest_bytes_sent / bandwidth + gamma * busiest_bytes_reduced

* ``latency_terms``: the schedule's step count; the naive direct all-reduce, whose single step posts
  N - 1 sends from one port, pays N - 1.
* ``busiest_bytes_sent``: the largest closed-form per-rank byte count of the algorithm
  (``Algorithm.bytes_sent`` with 1-byte elements, so it is exact for any message size). With N | M this
  gives Thakur et al.'s formulas: ring all-reduce ``2(N-1) alpha + 2(N-1)/N M beta``; recursive doubling
  ``log2 N (alpha + M beta)``; Rabenseifner ``2 log2 N alpha + 2(N-1)/N M beta``; binomial broadcast
  ``ceil(log2 N)(alpha + M beta)``; scatter + all-gather ``(log2 N + N - 1) alpha + 2(N-1)/N M beta``.
  ``2(N-1)/N M`` is the all-reduce lower bound on bytes per rank (Patarasuk & Yuan, "Bandwidth optimal
  all-reduce algorithms for clusters of workstations", JPDC 69(2), 2009).
* The double binary tree is charged its unpipelined step count ``2H`` but its busiest rank's bytes at
  full link rate: the limit NCCL's deep pipelining approaches (an optimistic tree).
* ``gamma`` (s/byte of local reduction) multiplies the busiest rank's reduced bytes from Thakur et al.'s
  formulas for N | M (:func:`reduced_bytes`); 0 by default, as GPU reductions hide behind the links.

nccl-tests (``doc/PERFORMANCE.md``): ``algbw = S / t`` and ``busbw = algbw * factor`` with factor
``2(n-1)/n`` (all_reduce), ``(n-1)/n`` (reduce_scatter, all_gather, all_to_all), 1 (broadcast, reduce).
S is the all_reduce/broadcast/reduce buffer, the *whole* array for reduce_scatter (``recvcount * n``)
and all_gather (``sendcount * n``), and each rank's whole send buffer for all_to_all, which is the
``numel`` every byte function here takes.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from .registry import ALGORITHMS, algorithms_for, check_collective, get_algorithm
from .schedule import check_world_size


@dataclass(frozen=True)
class Link:
    """A fabric seen by one rank: ``alpha`` seconds per message step, ``bandwidth`` bytes/s per direction.

    ``ringlab.calc`` duck-types links through ``.alpha`` and ``.bandwidth``; keep those names.
    """

    name: str
    alpha: float
    bandwidth: float
    source: str = ""

    def __post_init__(self) -> None:
        finite = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                     for v in (self.alpha, self.bandwidth))
        if not finite or not self.bandwidth > 0 or not self.alpha >= 0:
            raise ValueError(f"link {self.name!r} needs a finite bandwidth > 0 B/s and alpha >= 0 s, "
                             f"got bandwidth={self.bandwidth}, alpha={self.alpha}")


_ALPHA_NOTE = ("alpha is an assumption, not a datasheet value: the order of NCCL's per-step latencies "
               "(src/graph/tuning.cc, hwLat/baseLat: ~0.5-3.4 us per NVLink hop, more over the network)")

LINKS: dict[str, Link] = {link.name: link for link in (
    Link("nvlink4", 2e-6, 450e9, "NVIDIA H100 SXM datasheet: NVLink 4, 900 GB/s total = 450 GB/s per direction; "
                                 + _ALPHA_NOTE),
    Link("nvlink5", 2e-6, 900e9, "NVIDIA B200 / GB200 datasheet: NVLink 5, 1.8 TB/s total = 900 GB/s per direction; "
                                 + _ALPHA_NOTE),
    Link("pcie5-x16", 3e-6, 64e9, "PCI Express 5.0 spec: 32 GT/s x 16 lanes, 128b/130b = ~63 GB/s per direction "
                                  "(64 GB/s as usually quoted); " + _ALPHA_NOTE),
    Link("ib-ndr", 5e-6, 50e9, "InfiniBand NDR (NVIDIA ConnectX-7 / Quantum-2): 400 Gb/s = 50 GB/s per direction; "
                               "alpha 5 us assumed for NIC + switch + proxy per step"),
    Link("ib-xdr", 5e-6, 100e9, "InfiniBand XDR (NVIDIA ConnectX-8 / Quantum-X800): 800 Gb/s = 100 GB/s per "
                                "direction; alpha 5 us assumed for NIC + switch + proxy per step"),
)}

# Collective -> its bandwidth-optimal ("large message") algorithm, the one crossover() compares against.
LARGE_MESSAGE_ALGORITHM = {"all_reduce": "ring", "reduce_scatter": "ring", "all_gather": "ring",
                           "broadcast": "scatter_allgather", "reduce": "reduce_scatter_gather"}


def get_link(link) -> Link:
    """A :class:`Link` from a preset name (``nvlink4``, ``nvlink5``, ``pcie5-x16``, ``ib-ndr``, ``ib-xdr``)
    or any object with ``.alpha`` and ``.bandwidth``. Raises ValueError (listing close names) / TypeError."""
    if isinstance(link, str):
        if link not in LINKS:
            close = difflib.get_close_matches(link, LINKS, n=2)
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise ValueError(f"unknown fabric {link!r}{hint}; presets: {', '.join(LINKS)}")
        return LINKS[link]
    try:
        return link if isinstance(link, Link) else Link(getattr(link, "name", "custom"), float(link.alpha),
                                                        float(link.bandwidth))
    except AttributeError:
        raise TypeError("link must be a preset name or have .alpha (s) and .bandwidth (B/s per direction)") from None


# Presets that are one network port of a host, as opposed to a link inside a node (NVLink, PCIe).
NETWORK_LINKS = ("ib-ndr", "ib-xdr")


def single_gpu_hosts(link) -> Link:
    """``link``, a network preset (:data:`NETWORK_LINKS`: ``ib-ndr``, ``ib-xdr``, by name or as the
    :class:`Link`), as the machine the flat alpha-beta model describes exactly: hosts with one GPU per host
    and one port of ``link`` each, behind a non-blocking switch, so every step of every schedule crosses
    that port, at any number of ranks. Same ``alpha`` and ``bandwidth``; the name states the framing
    (``"ib-ndr, one GPU per host"``), so the plots and tables that print it say which machine they time.

    A DGX/HGX node is not such a host: its GPUs talk over NVLink and leave the node through a NIC each, on
    their own rails. Time those as a cluster: ``ringlab.topology.get_cluster("dgx-h100", nodes)``.
    Raises ValueError for any other link, naming the accepted presets.
    """
    preset = LINKS.get(link) if isinstance(link, str) else next(
        (LINKS[name] for name in NETWORK_LINKS if link == LINKS[name]), None)
    if preset is None or preset.name not in NETWORK_LINKS:
        raise ValueError(f"link must be one of the network presets {', '.join(NETWORK_LINKS)} (a port per host), "
                         f"got {getattr(link, 'name', link)!r}; GPUs inside a node share an NVLink or PCIe domain")
    return Link(f"{preset.name}, one GPU per host", preset.alpha, preset.bandwidth,
                f"{preset.source}; one GPU and one port per host")


def _check_gamma(gamma) -> None:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 <= gamma < math.inf:
        raise ValueError(f"gamma must be a finite number of seconds per byte >= 0, got {gamma!r}")


def bus_factor(collective: str, world_size: int) -> float:
    """nccl-tests' busbw factor: 2(n-1)/n, (n-1)/n, or 1 (see module docstring)."""
    check_collective(collective)
    n = check_world_size(world_size)
    if n < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if collective in ("broadcast", "reduce"):
        return 1.0
    return (2.0 if collective == "all_reduce" else 1.0) * (n - 1) / n


def algbw(message_bytes: float, seconds: float) -> float:
    """nccl-tests' algorithm bandwidth ``S / t`` in bytes/s. Raises ValueError for ``seconds <= 0``."""
    if seconds <= 0:
        raise ValueError(f"seconds must be positive, got {seconds}")
    return message_bytes / seconds


def busbw(collective: str, message_bytes: float, seconds: float, world_size: int) -> float:
    """nccl-tests' bus bandwidth ``algbw * factor`` in bytes/s."""
    return algbw(message_bytes, seconds) * bus_factor(collective, world_size)


def latency_terms(collective: str, algorithm: str, world_size: int) -> int:
    """How many alphas the algorithm pays: its step count (N - 1 for the one-step direct all-reduce)."""
    algo = get_algorithm(collective, algorithm)
    if (collective, algorithm) == ("all_reduce", "direct"):
        return check_world_size(world_size) - 1
    return algo.num_steps(world_size)


def reduced_bytes(collective: str, algorithm: str, world_size: int, message_bytes: float) -> float:
    """Bytes the busiest rank combines with its own data (the gamma term), Thakur et al. 2005 for N | M.

    0 for collectives that only copy. ``p`` is the largest power of two <= N; folded (non-power-of-two)
    runs add one full message for the rank that absorbs a partner.
    """
    get_algorithm(collective, algorithm)
    n, m = check_world_size(world_size), float(message_bytes)
    if n == 1 or collective in ("all_gather", "broadcast", "all_to_all"):
        return 0.0
    p = 1 << (n.bit_length() - 1)
    fold = m if p != n else 0.0
    per_algorithm = {
        "ring": (n - 1) / n * m,
        "recursive_doubling": math.log2(p) * m + fold,
        "rabenseifner": (p - 1) / p * m + fold,
        "recursive_halving": (p - 1) / p * m + fold,
        "double_binary_tree": m,  # an inner node folds two children's halves
        "direct": (n - 1) * m,
        "reduce_broadcast": (n - 1).bit_length() * m,
        "binomial_tree": (n - 1).bit_length() * m,
        "reduce_scatter_gather": (n - 1) / n * m,
    }
    return per_algorithm[algorithm]


# The closed forms count bytes in int64. No algorithm's busiest rank sends more than (N - 1) x M bytes (the
# direct all-reduce sends exactly that; tests/commands/test_cli_cost.py checks every algorithm) and none computes
# with more than twice that, so (N - 1) x M <= 2**61 keeps every count exact.
BYTES_MAX = 2**61


def busiest_bytes(collective: str, algorithm: str, world_size: int, message_bytes: int, root: int = 0) -> int:
    """Closed-form bytes sent by the busiest rank for a message of ``message_bytes`` (1-byte elements).

    Raises ValueError when ``(world_size - 1) * message_bytes`` exceeds :data:`BYTES_MAX` (2**61 B, about
    2.3 EB), beyond which int64 counts could overflow."""
    n, m = check_world_size(world_size), int(message_bytes)
    if max(n - 1, 1) * m > BYTES_MAX:
        raise ValueError(f"(world_size - 1) x message_bytes = {n - 1:,} x {m:,} B is above {BYTES_MAX:,} B "
                         "(2**61), the most a rank's byte count holds exactly; use fewer ranks or a smaller size")
    return int(get_algorithm(collective, algorithm).bytes_sent(n, m, 1, root).max())


def alpha_beta_time(collective: str, algorithm: str, world_size: int, message_bytes: int, link, gamma: float = 0.0) -> float:
    """Alpha-beta(-gamma) seconds for one collective of ``message_bytes`` (S as nccl-tests defines it).

    ``link``: a preset name or an object with ``.alpha`` / ``.bandwidth``; ``gamma`` in s/byte.
    Raises ValueError for unknown names or negative sizes.
    """
    lk = get_link(link)
    if message_bytes < 0:
        raise ValueError(f"message_bytes must be >= 0, got {message_bytes}")
    _check_gamma(gamma)
    return (latency_terms(collective, algorithm, world_size) * lk.alpha
            + busiest_bytes(collective, algorithm, world_size, message_bytes) / lk.bandwidth
            + gamma * reduced_bytes(collective, algorithm, world_size, message_bytes))


def linear_cost(collective: str, algorithm: str, world_size: int, fabric, gamma: float = 0.0) -> tuple[float, float]:
    """The alpha-beta(-gamma) time as a line ``t(M) = a + b M``: returns ``(a`` seconds, ``b`` seconds per byte).

    Exact for messages divisible by every chunk count the algorithm uses (N, the power of two p,
    the tree's two halves), measured on the least such size, or for N above about 2**20 where that
    size's byte count would pass :data:`BYTES_MAX`, on the largest multiple of 2N below it (relative
    error under p / that size, about 1e-7). Two algorithms with equal ``(a, b)`` cost the same at every size.
    """
    lk = get_link(fabric)
    n = check_world_size(world_size)
    _check_gamma(gamma)
    unit = math.lcm(2, n, 1 << (n.bit_length() - 1))  # divisible by N, by p and by the tree's 2 halves
    if max(n - 1, 1) * unit > BYTES_MAX:  # N > ~2**20 with a large odd factor: the largest multiple of 2N that
        unit = BYTES_MAX // max(n - 1, 1) // (2 * n) * (2 * n)  # counts exactly (slope off by < p / unit)
    b = busiest_bytes(collective, algorithm, n, unit) / unit / lk.bandwidth
    b += gamma * reduced_bytes(collective, algorithm, n, unit) / unit
    return latency_terms(collective, algorithm, n) * lk.alpha, b


def crossover(collective: str, fabric, world_size: int, algorithms=None, against: str | None = None,
              gamma: float = 0.0) -> dict[str, float | None]:
    """Message size (bytes) above which the large-message algorithm beats each other algorithm.

    ``against`` defaults to :data:`LARGE_MESSAGE_ALGORITHM` (ring for all_reduce); ``algorithms`` to
    every other algorithm of the collective. Each value solves ``a_1 + b_1 M = a_2 + b_2 M`` in the
    linear model (N | M): 0.0 when ``against`` is never slower, None when it never wins.
    Raises ValueError for unknown names or a collective with a single algorithm.
    """
    lk = get_link(fabric)
    base = against or LARGE_MESSAGE_ALGORITHM.get(check_collective(collective))
    if base is None:
        raise ValueError(f"{collective} has one algorithm ({', '.join(algorithms_for(collective))}); nothing to cross")
    get_algorithm(collective, base)
    others = [a for a in (algorithms or algorithms_for(collective)) if a != base]
    a0, b0 = linear_cost(collective, base, world_size, lk, gamma)
    out = {}
    for name in others:
        a1, b1 = linear_cost(collective, name, world_size, lk, gamma)
        if a0 <= a1 and b0 <= b1:
            out[name] = 0.0
        elif b0 >= b1:
            out[name] = None
        else:
            out[name] = (a0 - a1) / (b1 - b0)
    return out


@dataclass(frozen=True)
class SizeRange:
    """Messages of ``lo_bytes <= M < hi_bytes`` are fastest with ``algorithm`` (hi may be inf)."""

    lo_bytes: float
    hi_bytes: float
    algorithm: str


def algorithm_table(collective: str, fabric, world_size: int, algorithms=None, gamma: float = 0.0) -> list[SizeRange]:
    """NCCL-style table: which algorithm is fastest in each message-size range (linear model, N | M).

    The ranges come from the lower envelope of the lines ``a + b M``: every pairwise crossing is a
    candidate boundary and each interval takes the winner at its midpoint. This models the choice,
    it does not reproduce NCCL's tuner (which also picks a protocol and channel count).
    """
    lk = get_link(fabric)
    names = list(algorithms or algorithms_for(check_collective(collective)))
    for name in names:
        get_algorithm(collective, name)
    lines = {name: linear_cost(collective, name, world_size, lk, gamma) for name in names}
    cuts = {0.0}
    for i, x in enumerate(names):
        for y in names[i + 1:]:
            (a1, b1), (a2, b2) = lines[x], lines[y]
            if b1 != b2 and (a2 - a1) / (b1 - b2) > 0:
                cuts.add((a2 - a1) / (b1 - b2))
    edges = sorted(cuts) + [math.inf]

    def winner(m: float) -> str:
        return min(names, key=lambda k: (lines[k][0] + lines[k][1] * m, names.index(k)))

    rows: list[SizeRange] = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        best = winner(lo * 2 + 1 if hi == math.inf else (lo + hi) / 2)
        if rows and rows[-1].algorithm == best:
            rows[-1] = SizeRange(rows[-1].lo_bytes, hi, best)
        else:
            rows.append(SizeRange(lo, hi, best))
    return rows


def cost_table(collective: str, world_size: int, message_bytes: int, fabric, gamma: float = 0.0) -> list[dict]:
    """One row per algorithm of ``collective``: bytes sent by the busiest rank, steps, seconds, busbw."""
    lk = get_link(fabric)
    rows = []
    for name in algorithms_for(collective):
        t = alpha_beta_time(collective, name, world_size, message_bytes, lk, gamma)
        rows.append({"algorithm": name, "bytes_per_rank_max": busiest_bytes(collective, name, world_size, message_bytes),
                     "steps": ALGORITHMS[(collective, name)].num_steps(world_size),
                     "latency_terms": latency_terms(collective, name, world_size), "seconds": t,
                     "busbw": busbw(collective, message_bytes, t, world_size) if t > 0 else None})
    return rows


__all__ = ["alpha_beta_time", "LARGE_MESSAGE_ALGORITHM", "LINKS", "Link", "SizeRange", "algbw", "algorithm_table", "bus_factor", "busbw",
           "busiest_bytes", "cost_table", "crossover", "get_link", "latency_terms", "reduced_bytes"]
