"""How long a sharded checkpoint takes to arrive: concurrent shard downloads under caps, and the
arithmetic of getting one checkpoint onto a thousand nodes.

A deterministic model, not a measurement (the real downloader is :mod:`ringlab.shards`; its timings
depend on the machine). Three caps bound a download of ``K`` concurrent streams:

* ``per_connection`` (B/s): what one TCP stream gets, whatever else runs (a window over a round trip,
  or a server's per-connection throttle). K streams give at most ``K x per_connection``.
* ``link`` (B/s): the client's NIC or the path's bottleneck, shared equally by the active streams.
* a server that serves ``server_streams`` streams at ``server_bandwidth`` in all and thrashes past them
  (a disk whose concurrent readers add seeks, a rate limiter that penalises a greedy client): its total rate
  for this client falls as ``server_bandwidth x server_streams / K`` when K exceeds ``server_streams``.

The steady rate of K streams is ``K x min(per_connection, link / K, server_total(K) / K)``
(:func:`steady_throughput`); :func:`simulate_fetch` plays a whole download as a fluid model (every active
stream gets that equal share, recomputed whenever a stream starts or ends), with scripted faults
(a 503 with ``Retry-After``, a connection reset part-way, resumed with ``Range``), exponential backoff
without jitter (so every machine draws the same picture) and an overall deadline that cancels every
attempt in flight. A shard gives its connection slot back while it waits to retry.

:func:`checkpoint_distribution`: the time until the first training step when every node reads its part
from object storage, against one model replica reading the checkpoint once and broadcasting it over the
compute fabric (:func:`ringlab.collectives.cost.alpha_beta_time`, the scatter + all-gather broadcast of
Thakur, Rabenseifner & Gropp 2005, on each rail of a :mod:`ringlab.topology` preset).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ringlab.validation import check_int, check_real
from ringlab.collectives.cost import Link, alpha_beta_time
from ringlab.topology import get_cluster

OUTCOMES = ("done", "503", "reset", "cancelled")
_EPS = 1e-12  # seconds: events closer than this happen together


@dataclass(frozen=True)
class Caps:
    """The caps of :func:`steady_throughput` (bytes/s; ``None``: no such cap). ``server_streams`` is the
    number of streams the server serves at ``server_bandwidth`` in all before it thrashes (both or neither).
    ValueError / TypeError name a bad field."""

    per_connection: float | None = None
    link: float | None = None
    server_streams: int | None = None
    server_bandwidth: float | None = None

    def __post_init__(self) -> None:
        for name in ("per_connection", "link", "server_bandwidth"):
            value = getattr(self, name)
            if value is not None:
                check_real(value, name, min=0, min_open=True)
        if self.server_streams is not None:
            check_int(self.server_streams, "server_streams", min=1)
        if (self.server_streams is None) != (self.server_bandwidth is None):
            raise ValueError("server_streams and server_bandwidth go together: give both or neither")
        if self.per_connection is None and self.link is None and self.server_bandwidth is None:
            raise ValueError("Caps needs at least one of per_connection, link, server_bandwidth")

    def server_total(self, streams: int) -> float:
        """The server's total rate for ``streams`` concurrent streams of this client (B/s; inf without a server cap)."""
        if self.server_bandwidth is None:
            return math.inf
        return self.server_bandwidth * min(1.0, self.server_streams / streams)

    def stream_rate(self, streams: int) -> float:
        """Bytes/s each of ``streams`` active streams gets (all get the same share)."""
        check_int(streams, "streams", min=1)
        caps = [self.per_connection or math.inf, (self.link or math.inf) / streams, self.server_total(streams) / streams]
        return min(caps)

    def binding(self, streams: int) -> str:
        """Which cap sets the rate of ``streams`` streams: ``per_connection``, ``link`` or ``server``."""
        rates = {"per_connection": self.per_connection or math.inf, "link": (self.link or math.inf) / streams,
                 "server": self.server_total(streams) / streams}
        return min(rates, key=rates.get)


def steady_throughput(concurrency: int, caps: Caps) -> float:
    """Total bytes/s of ``concurrency`` streams running at once: ``K x caps.stream_rate(K)`` (module docstring)."""
    k = check_int(concurrency, "concurrency", min=1)
    return k * caps.stream_rate(k)


@dataclass(frozen=True)
class Fault:
    """What one attempt of a shard meets: ``kind`` ``"503"`` (refused before any byte, retried after
    ``retry_after`` seconds or the backoff, whichever is longer) or ``"reset"`` (the connection drops after
    ``fraction`` of the shard's remaining bytes; retried after the backoff, resuming with ``Range``)."""

    kind: str
    retry_after: float = 0.0
    fraction: float = 0.5

    def __post_init__(self) -> None:
        if self.kind not in ("503", "reset"):
            raise ValueError(f"fault kind must be '503' or 'reset', got {self.kind!r}")
        check_real(self.retry_after, "retry_after", min=0)
        check_real(self.fraction, "fraction", min=0, max=1, min_open=True)


@dataclass(frozen=True)
class Attempt:
    """One request: ``shard`` index on connection ``slot`` from ``start`` to ``end`` (seconds), the
    ``outcome`` (:data:`OUTCOMES`) and the body ``bytes`` it carried."""

    shard: int
    slot: int
    start: float
    end: float
    outcome: str
    bytes: float


@dataclass
class FetchSchedule:
    """What :func:`simulate_fetch` played: every attempt, when the download ended (``finished``, seconds)
    and, when the deadline cut it short, ``cancelled_at`` (else None)."""

    attempts: list[Attempt] = field(default_factory=list)
    finished: float = 0.0
    cancelled_at: float | None = None
    total_bytes: float = 0.0
    concurrency: int = 1

    @property
    def complete(self) -> bool:
        return self.cancelled_at is None

    def throughput(self) -> float:
        """Bytes of shards over the wall time (B/s); only for a complete download."""
        if not self.complete:
            raise ValueError("the download was cancelled at its deadline: no throughput to report")
        return self.total_bytes / self.finished if self.finished > 0 else math.inf

    def peak_slots(self) -> int:
        """The most attempts in flight at once (never above the concurrency)."""
        edges = sorted([(a.start, 1) for a in self.attempts] + [(a.end, -1) for a in self.attempts],
                       key=lambda e: (e[0], e[1]))
        peak = now = 0
        for _, step in edges:
            now += step
            peak = max(peak, now)
        return peak


@dataclass
class _Job:
    shard: int
    remaining: float
    tries: int = 0


@dataclass
class _Slot:
    job: _Job | None = None
    phase: str = "idle"  # idle, latency (waiting for the first byte), transfer
    until: float = 0.0  # end of the latency
    fail_after: float = math.inf  # bytes this attempt carries before its fault
    carried: float = 0.0
    start: float = 0.0
    fault: Fault | None = None


def simulate_fetch(shard_bytes, concurrency: int, caps: Caps, faults: dict | None = None, latency: float = 0.0,
                   backoff: float = 0.5, deadline: float | None = None) -> FetchSchedule:
    """Play the download of shards of ``shard_bytes`` (a list of byte counts, fetched in order) over
    ``concurrency`` connection slots under ``caps`` (see the module docstring).

    ``faults``: shard index -> a tuple of :class:`Fault`, one per failing attempt in order (the attempt after
    the last succeeds). ``latency``: seconds before each response's first byte. ``backoff``: seconds before
    retry n (n = 1, 2, ...) is ``backoff x 2**(n-1)``, no jitter; a 503's ``retry_after`` wins when longer.
    A shard gives its slot back while it waits to retry, then queues behind the shards not yet started (as
    ``ringlab.shards.fetch`` and a FIFO semaphore do). ``deadline``: seconds after which every attempt in
    flight is cancelled and nothing new starts.
    Returns a :class:`FetchSchedule`. ValueError / TypeError name a bad argument.
    """
    sizes = [check_real(s, "shard_bytes", min=0, min_open=True) for s in shard_bytes]
    if not sizes:
        raise ValueError("shard_bytes must name at least one shard")
    k = check_int(concurrency, "concurrency", min=1, max=4096)
    latency = check_real(latency, "latency", min=0)
    backoff = check_real(backoff, "backoff", min=0)
    if deadline is not None:
        deadline = check_real(deadline, "deadline", min=0, min_open=True)
    plan = {}
    for shard, scripted in (faults or {}).items():
        if not (isinstance(shard, int) and 0 <= shard < len(sizes)):
            raise ValueError(f"faults: shard index must be 0..{len(sizes) - 1}, got {shard!r}")
        plan[shard] = tuple(scripted)
    out = FetchSchedule(total_bytes=sum(sizes), concurrency=k)
    slots = [_Slot() for _ in range(k)]
    pending = [_Job(i, size) for i, size in enumerate(sizes)]
    waiting: list[tuple[float, int, _Job]] = []  # (wake time, order, job): shards backing off, slot given back
    now = 0.0

    def begin(slot: _Slot, job: _Job) -> None:
        slot.job, slot.phase, slot.until, slot.start, slot.carried = job, "latency", now + latency, now, 0.0
        scripted = plan.get(job.shard, ())
        slot.fault = scripted[job.tries] if job.tries < len(scripted) else None
        reset = slot.fault is not None and slot.fault.kind == "reset"
        slot.fail_after = job.remaining * slot.fault.fraction if reset else math.inf

    def end(slot: _Slot, index: int, outcome: str) -> None:
        out.attempts.append(Attempt(slot.job.shard, index, slot.start, now, outcome, slot.carried))
        if outcome in ("503", "reset"):
            job = slot.job
            job.tries += 1
            wait = backoff * 2 ** (job.tries - 1)
            if outcome == "503":
                wait = max(wait, slot.fault.retry_after)
            waiting.append((now + wait, len(out.attempts), job))
        slot.job, slot.phase = None, "idle"

    while True:
        waiting.sort(key=lambda w: (w[0], w[1]))
        while waiting and waiting[0][0] <= now + _EPS:
            pending.append(waiting.pop(0)[2])
        for index, slot in enumerate(slots):  # fill free slots in queue order, lowest slot first
            if slot.phase == "idle" and pending:
                begin(slot, pending.pop(0))
        busy = [s for s in slots if s.phase != "idle"]
        if not busy and not waiting:
            out.finished = now
            return out
        moving = [s for s in busy if s.phase == "transfer"]
        rate = caps.stream_rate(len(moving)) if moving else 0.0
        step = min([s.until - now for s in busy if s.phase == "latency"] + [w[0] - now for w in waiting[:1]] +
                   [min(s.job.remaining, s.fail_after - s.carried) / rate for s in moving])
        if deadline is not None and now + step >= deadline - _EPS:
            for s in moving:
                s.carried += rate * max(0.0, deadline - now)
            now = deadline
            for index, slot in enumerate(slots):
                if slot.phase != "idle":
                    end(slot, index, "cancelled")
            out.cancelled_at = out.finished = now
            return out
        now += step
        for s in moving:
            s.carried += rate * step
            s.job.remaining -= rate * step
        for index, slot in enumerate(slots):
            if slot.phase == "latency" and slot.until <= now + _EPS:
                if slot.fault is not None and slot.fault.kind == "503":
                    end(slot, index, "503")
                else:
                    slot.phase = "transfer"
            elif slot.phase == "transfer":
                tol = _EPS * max(1.0, sizes[slot.job.shard])
                if slot.job.remaining <= tol:
                    end(slot, index, "done")
                elif slot.carried >= slot.fail_after - tol:
                    end(slot, index, "reset")


# ---- the checkpoint on a thousand nodes

LLAMA3_405B_BYTES = 405e9 * 2  # 405 B parameters in bf16 (Meta, "The Llama 3 Herd of Models", 2024)


@dataclass(frozen=True)
class Distribution:
    """Seconds until every node holds its part of the checkpoint, two ways (:func:`checkpoint_distribution`)."""

    nodes: int
    replicas: int
    bytes_per_node: float
    direct_bytes: float  # read from storage when every node reads its own part
    direct_s: float
    read_once_s: float  # one replica reads the checkpoint once
    broadcast_s: float  # then every part is broadcast over the replicas, on every rail at once
    broadcast_bytes_per_gpu: float

    @property
    def staged_s(self) -> float:
        """Read once, then broadcast (not overlapped: a pipelined copy would start broadcasting earlier)."""
        return self.read_once_s + self.broadcast_s

    @property
    def speedup(self) -> float:
        return self.direct_s / self.staged_s


def checkpoint_distribution(checkpoint_bytes: float = LLAMA3_405B_BYTES, nodes: int = 1024,
                            nodes_per_replica: int = 16, storage_bandwidth: float = 100e9,
                            node_storage_bandwidth: float = 50e9, topology: str = "dgx-h100") -> Distribution:
    """Time until the first step when ``nodes`` nodes load a checkpoint of ``checkpoint_bytes``.

    Each model replica spans ``nodes_per_replica`` nodes (tensor x pipeline parallel), so every node needs
    ``checkpoint_bytes / nodes_per_replica`` and there are ``nodes / nodes_per_replica`` replicas (data
    parallel). Object storage delivers ``storage_bandwidth`` B/s in all and each node reads at most
    ``node_storage_bandwidth`` B/s (its storage NIC).

    * direct: every node reads its part: ``replicas x checkpoint_bytes`` leave storage, at
      ``max(total / storage_bandwidth, per node / node_storage_bandwidth)`` seconds.
    * staged: one replica reads the checkpoint once (same rule for its nodes), then each GPU broadcasts its
      ``1 / gpus_per_node`` of its node's part to the same GPU of every other replica, over its own rail
      (one NIC of the ``topology`` preset per GPU, rail-optimised): the scatter + all-gather broadcast of
      :func:`ringlab.collectives.cost.alpha_beta_time` over ``replicas`` ranks on that NIC, all rails at once.

    Defaults: Llama 3 405B in bf16 (810 GB) on 1,024 DGX H100 nodes as Meta's 8,192-GPU layout (TP 8, PP 16,
    DP 64: "The Llama 3 Herd of Models", table 4); 100 GB/s of object storage and 400 Gb/s of storage NIC per
    node are assumptions. ValueError / TypeError name a bad argument.
    """
    size = check_real(checkpoint_bytes, "checkpoint_bytes", min=0, min_open=True)
    n = check_int(nodes, "nodes", min=1)
    group = check_int(nodes_per_replica, "nodes_per_replica", min=1, max=n)
    if n % group:
        raise ValueError(f"nodes ({n}) must be a multiple of nodes_per_replica ({group})")
    storage = check_real(storage_bandwidth, "storage_bandwidth", min=0, min_open=True)
    per_node_bw = check_real(node_storage_bandwidth, "node_storage_bandwidth", min=0, min_open=True)
    cluster = get_cluster(topology, n)
    if cluster.nics_per_node < cluster.gpus_per_node:
        raise ValueError(f"topology {topology!r} has fewer NICs than GPUs per node: pick a rail-optimised preset "
                         "with one NIC per GPU (dgx-h100, dgx-b200, hgx-h200)")
    replicas = n // group
    per_node = size / group
    direct = max(replicas * size / storage, per_node / per_node_bw)
    once = max(size / storage, per_node / per_node_bw)
    rail = Link(f"{topology} rail NIC", cluster.nic_latency, cluster.nic_bandwidth, cluster.source)
    per_gpu = per_node / cluster.gpus_per_node
    broadcast = alpha_beta_time("broadcast", "scatter_allgather", replicas, int(per_gpu), rail) if replicas > 1 else 0.0
    return Distribution(n, replicas, per_node, replicas * size, direct, once, broadcast, per_gpu)


__all__ = ["LLAMA3_405B_BYTES", "OUTCOMES", "Attempt", "Caps", "Distribution", "FetchSchedule", "Fault",
           "checkpoint_distribution", "simulate_fetch", "steady_throughput"]
