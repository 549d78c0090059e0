"""What the shard server saw during a run, for graders and charts: connections, requests, bytes.

Times are seconds since ``ServerRecords.t0``, a ``time.monotonic()`` reading of the server's process taken
when it started; a client in the same process aligns its own times with ``t + records.t0 - its_t0``.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field

OUTCOMES = ("complete", "reset", "truncated", "stalled", "client-closed", "error", "head", "open")


@dataclass
class ConnectionRecord:
    """One TCP connection: ``id`` (0-based, in accept order), ``opened``/``closed`` (s since t0; closed None
    while open), how many ``requests`` it carried, and ``foreign``: the peer spoke another protocol and was hung
    up on (a stale ZeroMQ socket reconnecting to a reused port); it is in none of the counts."""

    id: int
    opened: float
    closed: float | None = None
    requests: int = 0
    foreign: bool = False


@dataclass
class RequestRecord:
    """One HTTP request. ``shard``: the file name for a shard (None for the index and anything else);
    ``attempt``: the n-th request for that path (1-based); ``range_start``/``range_end``: the Range asked
    for (inclusive end, None when absent or open-ended); ``fault``: the rule applied (None: none);
    ``bytes_sent``: body bytes written; ``outcome`` one of :data:`OUTCOMES` ("open" while it is being answered,
    "stalled" when the server stopped during a stall, "error" when the served file could not be read)."""

    id: int
    conn: int
    method: str
    path: str
    shard: str | None
    attempt: int
    range_start: int | None
    range_end: int | None
    status: int
    fault: str | None
    bytes_sent: int = 0
    start: float = 0.0
    end: float | None = None
    outcome: str = "open"


@dataclass
class ServerRecords:
    """Everything a grader reads: ``peak_connections`` (most TCP connections open at once), ``peak_in_flight``
    (most requests being answered at once: each from its arrival until the server starts the write that lets the
    client see the response complete, so one the client has finished never counts), ``open_connections`` (open
    when the snapshot was taken), and the ``connections`` and ``requests`` themselves."""

    t0: float = 0.0
    peak_connections: int = 0
    peak_in_flight: int = 0
    open_connections: int = 0
    connections: list[ConnectionRecord] = field(default_factory=list)
    requests: list[RequestRecord] = field(default_factory=list)

    def shard_requests(self, shard: str) -> list[RequestRecord]:
        """The GET requests for ``shard``, in arrival order."""
        return [r for r in self.requests if r.shard == shard and r.method == "GET"]

    def requests_by_shard(self) -> dict[str, int]:
        """GET requests per shard file name."""
        out: dict[str, int] = {}
        for r in self.requests:
            if r.shard is not None and r.method == "GET":
                out[r.shard] = out.get(r.shard, 0) + 1
        return out

    def bytes_by_shard(self) -> dict[str, int]:
        """Body bytes sent per shard file name, over all its requests."""
        out: dict[str, int] = {}
        for r in self.requests:
            if r.shard is not None:
                out[r.shard] = out.get(r.shard, 0) + r.bytes_sent
        return out

    def range_requests(self) -> list[RequestRecord]:
        """The requests that carried a Range header, in arrival order."""
        return [r for r in self.requests if r.range_start is not None]

    def retry_gaps(self, shard: str) -> list[float]:
        """Seconds from the end of each request for ``shard`` to the start of the next one: the client's
        wait before each retry (a request still unfinished counts from its start)."""
        reqs = self.shard_requests(shard)
        return [b.start - (a.end if a.end is not None else a.start) for a, b in zip(reqs, reqs[1:])]

    def to_dict(self) -> dict:
        """JSON-able form, with the field names above."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ServerRecords":
        """Inverse of :meth:`to_dict` (e.g. read back from ``ringlab shards serve --records FILE``)."""
        data = copy.deepcopy(data)
        data["connections"] = [ConnectionRecord(**c) for c in data.get("connections", [])]
        data["requests"] = [RequestRecord(**r) for r in data.get("requests", [])]
        return cls(**data)
