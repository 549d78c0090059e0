"""The reference downloader of a sharded checkpoint: asyncio + httpx, at most K connections, and clean failure.

    report = fetch("http://127.0.0.1:8000/model.safetensors.index.json", "out/", concurrency=8, timeout=60)
    report.ok, report.error, report.attempts          # the first error; one Attempt per HTTP request

What it does, and why:

* The index is fetched first; each shard URL is the index URL joined with the percent-encoded file name
  (RFC 3986 section 5), as ``huggingface_hub`` resolves files of a repository folder. The join is done by hand
  (:func:`shard_url`): ``httpx.URL.join`` costs ~0.5 ms, and thousands of them would block the event loop past
  the deadline.
* K slots (an ``asyncio.Queue`` of slot ids): a shard holds one only while its request is in flight, never
  while it backs off, so a shard that waits lets another one run. The client's pool allows K connections too
  (``httpx.Limits``): never more than K sockets, however the tasks interleave.
* Per request a connect timeout and a read timeout (the longest silence between two reads: a stalled body
  fails, a slow one does not); over everything an overall deadline (``asyncio.timeout``), which a per-request
  timeout cannot give.
* Retries on 5xx, 408, 429, resets, truncated bodies and timeouts, after ``backoff * 2**(n-1)`` seconds times a
  jitter in [0.5, 1] (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015: jitter spreads clients
  that failed together), at least the server's ``Retry-After`` (RFC 9110 section 10.2.3). Never on other 4xx
  (a 404 stays a 404) nor on a checksum mismatch of a whole body (the server's own hash disagrees with its
  bytes); a mismatch after a resume is retried once from byte 0, since the kept bytes may be the bad ones.
* The body streams into ``NAME.part`` (one ``chunk_size`` in memory at a time); a retry resumes with
  ``Range: bytes=LEN-`` from the part's length (RFC 9110 section 14). Redirects are followed (the Hub sends
  each LFS file as a 302 to its CDN). sha256 is computed while streaming and checked against ``X-Linked-Etag``
  (the Hub's header for LFS files, on the 302 or on the final response) when the server sends one; only then is
  the part renamed onto ``NAME`` (``os.replace``: atomic on POSIX), so a final path never holds a partial
  or unverified file. The index is written last.
* On the deadline, Ctrl-C (``CancelledError``) or the first permanent failure, the TaskGroup cancels every
  shard, each response is closed as its ``async with`` unwinds, the client closes its pool, .part files are
  removed (unless ``keep_partial``), and the FIRST error is the one reported.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import quote, urlsplit, urlunsplit

try:
    import httpx
    from tqdm import tqdm
except ImportError as exc:  # pragma: no cover - make installs the extra
    raise ImportError("ringlab.shards.fetch needs httpx and tqdm: pip install -e '.[shards]'") from exc

from ringlab.shards.checkpoint import INDEX_NAME, MAX_INDEX_BYTES, read_index, shard_files

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})  # and any other 5xx
REASONS = ("404 not found", "403 forbidden", "http <code>", "checksum mismatch", "deadline exceeded",
           "retries exhausted", "bad index", "bad url", "write error")


@dataclass(frozen=True)
class FetchOptions:
    """How to fetch. ``concurrency``: most shards (and TCP connections) at once. ``timeout``: overall deadline
    in seconds. ``connect_timeout``/``read_timeout``: per request (read = longest silence between reads).
    ``retries``: retries per shard after its first attempt. ``backoff``/``backoff_max``: seconds of the first
    wait and the cap. ``seed``: the jitter's RNG (None: fresh). ``progress``: tqdm bars on stderr.
    ``keep_partial``: keep .part files on failure for a later run to resume. ``chunk_size``: bytes per read."""

    concurrency: int = 4
    timeout: float = 300.0
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    retries: int = 4
    backoff: float = 0.25
    backoff_max: float = 10.0
    seed: int | None = None
    progress: bool = False
    keep_partial: bool = False
    chunk_size: int = 1 << 20

    def __post_init__(self):
        def whole(name, lo, hi):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a whole number from {lo:,} to {hi:,}, got {v!r}")

        def seconds(name, lo_open=True):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
                    or (lo_open and v == 0):
                raise ValueError(f"{name} must be a finite number of seconds {'> 0' if lo_open else '>= 0'}, got {v!r}")

        whole("concurrency", 1, 1024)
        whole("retries", 0, 1000)
        whole("chunk_size", 1024, 64 << 20)
        for name in ("timeout", "connect_timeout", "read_timeout"):
            seconds(name)
        seconds("backoff", lo_open=False)
        seconds("backoff_max", lo_open=False)


@dataclass
class Attempt:
    """One HTTP request of the run: the ``shard`` (file name, or the index), the ``slot`` it held (0..K-1),
    its ``attempt`` number for that shard (1-based), ``start``/``end`` (s since the run's t0), the Range
    ``offset`` it asked from, body ``bytes`` received, the HTTP ``status`` (None: no response), ``outcome``
    ("ok", "retry", "failed", "cancelled"), ``error`` (short text), the ``wait`` that followed before the
    next attempt (s) and the server's ``retry_after`` (s or None)."""

    shard: str
    slot: int
    attempt: int
    start: float
    end: float | None = None
    offset: int = 0
    bytes: int = 0
    status: int | None = None
    outcome: str = "cancelled"
    error: str = ""
    wait: float = 0.0
    retry_after: float | None = None


@dataclass
class ShardResult:
    """A shard's end state: ``size`` (bytes at its final path, None if not there), ``sha256`` (computed),
    ``expected`` (from X-Linked-Etag, None if not sent), ``verified``, ``attempts``, ``status`` in
    "ok", "failed", "cancelled", "pending"."""

    name: str
    url: str
    size: int | None = None
    sha256: str | None = None
    expected: str | None = None
    verified: bool = False
    attempts: int = 0
    status: str = "pending"


@dataclass
class FetchFailure:
    """The first error of a run: the ``shard`` (file name, or the index's), a ``reason`` from :data:`REASONS`
    and a ``detail``; ``str()`` is ``"SHARD: REASON (DETAIL)"``."""

    shard: str
    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.shard}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class FetchReport:
    """What a run did. ``ok`` only when every shard is at its final path, complete and verified (when the server
    sent a hash). ``t0`` is ``time.monotonic()`` at the start; every time below is seconds since it.
    ``cancelled_at``: when the run began cancelling (first failure, deadline, Ctrl-C), None if it did not.
    ``peak_slots``: most slots held at once."""

    index_url: str
    dest: str
    options: FetchOptions
    t0: float
    ok: bool = False
    error: FetchFailure | None = None
    elapsed: float = 0.0
    cancelled_at: float | None = None
    shards: list[ShardResult] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    bytes_received: int = 0
    peak_slots: int = 0

    def to_dict(self) -> dict:
        """JSON-able form (``ringlab shards fetch --json``)."""
        return asdict(self)


class _Retry(Exception):
    def __init__(self, text: str, retry_after: float | None = None):
        super().__init__(text)
        self.retry_after = retry_after


class _Permanent(Exception):
    def __init__(self, failure: FetchFailure):
        super().__init__(str(failure))
        self.failure = failure


class _Abort(Exception):
    """Raised by a shard task after recording the run's first error: the TaskGroup then cancels the rest."""


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delay-seconds or an HTTP-date (RFC 9110 section 10.2.3);
    None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def linked_etag(headers) -> str | None:
    """The sha256 a response declares: ``X-Linked-Etag`` unquoted and lowercased, when it is 64 hex digits."""
    value = headers.get("x-linked-etag")
    if value is None:
        return None
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    value = value.strip('"').lower()
    return value if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else None


def shard_url(index_url: str, name: str) -> str:
    """The URL of shard file ``name`` (a plain file name) next to ``index_url``: the index URL's path up to its
    last ``/``, plus ``name`` percent-encoded; the query and fragment dropped, as an RFC 3986 join of the
    relative reference ``quote(name)`` gives."""
    parts = urlsplit(index_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rpartition("/")[0] + "/" + quote(name), "", ""))


def _status_failure(name: str, status: int) -> FetchFailure:
    """The failure for a status no retry can change (a 4xx other than 408 and 429)."""
    reason = {404: "404 not found", 403: "403 forbidden"}.get(status, f"http {status}")
    return FetchFailure(name, reason, f"HTTP {status}; a client error is not retried")


def _durable_replace(part: str, final: str) -> None:
    """Make ``part`` durable (fsync), then rename it onto ``final`` (atomic on POSIX): a crash leaves either no
    file or the whole verified one at ``final``."""
    fd = os.open(part, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(part, final)


class _Run:
    def __init__(self, index_url: str, dest: str, options: FetchOptions):
        self.index_url, self.dest, self.o = index_url, dest, options
        self.report = FetchReport(index_url, dest, options, time.monotonic())
        self.rng = random.Random(options.seed)
        self.slots: asyncio.Queue[int] = asyncio.Queue()
        for slot in range(options.concurrency):
            self.slots.put_nowait(slot)
        self.held = 0
        self.results: dict[str, ShardResult] = {}
        self.bars: dict[str, object] = {}
        self.sizes: dict[str, int] = {}  # file sizes learnt from responses, for the total progress bar
        self.total_bar = None

    def now(self) -> float:
        return time.monotonic() - self.report.t0

    def fail(self, failure: FetchFailure) -> None:
        """Record ``failure`` if it is the run's first error."""
        if self.report.error is None:
            self.report.error = failure
            self.report.cancelled_at = self.now()

    async def acquire(self) -> int:
        slot = await self.slots.get()
        self.held += 1
        self.report.peak_slots = max(self.report.peak_slots, self.held)
        return slot

    def release(self, slot: int) -> None:
        self.held -= 1
        self.slots.put_nowait(slot)

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        wait = min(self.o.backoff_max, self.o.backoff * 2 ** (attempt - 1)) * self.rng.uniform(0.5, 1.0)
        return max(wait, retry_after or 0.0)

    # --- one request --------------------------------------------------------------------------------------

    async def _get_index(self, client, ev: Attempt) -> bytes:
        async with client.stream("GET", self.index_url) as resp:
            ev.status = resp.status_code
            if resp.status_code != 200:
                raise self._classify(INDEX_NAME, resp)
            data = bytearray()
            async for chunk in resp.aiter_bytes():
                data += chunk
                ev.bytes = len(data)
                if len(data) > MAX_INDEX_BYTES:
                    raise _Permanent(FetchFailure(INDEX_NAME, "bad index", f"larger than {MAX_INDEX_BYTES:,} bytes"))
            return bytes(data)

    def _classify(self, name: str, resp) -> Exception:
        status = resp.status_code
        if status in RETRY_STATUSES or 500 <= status <= 599:
            return _Retry(f"HTTP {status}", parse_retry_after(resp.headers.get("retry-after")))
        return _Permanent(_status_failure(name, status))

    async def _get_shard(self, client, res: ShardResult, ev: Attempt) -> None:
        """One GET of a shard into its .part, then verify and rename. Raises _Retry or _Permanent."""
        part = os.path.join(self.dest, res.name + ".part")
        offset = os.path.getsize(part) if os.path.exists(part) else 0
        ev.offset = offset
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        async with client.stream("GET", res.url, headers=headers) as resp:
            ev.status = resp.status_code
            if offset and resp.status_code == 416:  # the part is not a prefix of this file: start over
                os.remove(part)
                raise _Retry("416 on resume: the .part was longer than the file; restarting from 0")
            if resp.status_code not in (200, 206):
                raise self._classify(res.name, resp)
            if resp.status_code == 206:
                first = resp.headers.get("content-range", "").removeprefix("bytes ").split("-")[0]
                if first != str(offset):
                    os.remove(part)
                    raise _Retry(f"206 from byte {first or '?'} for a Range from {offset}; restarting from 0")
            else:
                offset = ev.offset = 0  # 200: the server sent the whole file (it ignored or lacks Range)
            # the Hub answers a LFS file with a 302 to its CDN and puts X-Linked-Etag on the 302: look there too
            expected = next(filter(None, (linked_etag(r.headers) for r in (resp, *reversed(resp.history)))), None)
            res.expected = expected or res.expected
            length = resp.headers.get("content-length")
            total = offset + int(length) if length and length.isdigit() else None
            digest = hashlib.sha256()
            if offset:  # the bytes already in the part are part of the hash: read them back, streaming
                with open(part, "rb") as fh:
                    while chunk := fh.read(self.o.chunk_size):
                        digest.update(chunk)
            bar = self._bar(res.name, total, offset)
            received = 0
            with open(part, "ab" if offset else "wb") as fh:
                # as the socket delivers them (no chunk_size: a re-chunker would hold back bytes a retry could
                # resume from), decoded should a server compress despite Accept-Encoding: identity
                async for chunk in resp.aiter_bytes():
                    fh.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    ev.bytes = received
                    self.report.bytes_received += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
                        self.total_bar.update(len(chunk))
            size = offset + received
            if total is not None and size != total:
                raise _Retry(f"body ended at byte {size:,} of {total:,}")
            res.sha256 = digest.hexdigest()
            if expected is not None and res.sha256 != expected:
                os.remove(part)
                if offset:  # the bytes kept from before may be what is wrong: one more try, from byte 0
                    raise _Retry(f"checksum mismatch after resuming from byte {offset:,}; restarting from 0")
                raise _Permanent(FetchFailure(res.name, "checksum mismatch",
                                              f"sha256 {res.sha256[:12]}..., X-Linked-Etag {expected[:12]}..."))
            res.size, res.verified = size, expected is not None  # complete and verified: _shard renames it

    def _bar(self, name: str, total: int | None, offset: int):
        if not self.o.progress:
            return None
        old = self.bars.pop(name, None)
        if old is not None:
            old.close()
        if self.total_bar is None:
            self.total_bar = tqdm(desc="total", unit="B", unit_scale=True, unit_divisor=1024, total=None)
        if total is not None:  # the total bar's goal: the sizes learnt so far (each response tells its file's)
            self.sizes[name] = total
            self.total_bar.total = sum(self.sizes.values())
            self.total_bar.refresh()
        bar = tqdm(desc=name[-28:], total=total, initial=offset, unit="B", unit_scale=True, unit_divisor=1024,
                   leave=False)
        self.bars[name] = bar
        return bar

    # --- retry loop ---------------------------------------------------------------------------------------

    async def _with_retries(self, name: str, request) -> object:
        """Run ``request(ev)`` until it succeeds, a permanent error, the retries run out, or a wait would pass
        the deadline; record one Attempt per call. Returns what ``request`` returns; raises _Abort on failure."""
        attempt = 0
        while True:
            attempt += 1
            slot = await self.acquire()
            ev = Attempt(name, slot, attempt, start=self.now())
            self.report.attempts.append(ev)
            if name in self.results:
                self.results[name].attempts = attempt
            try:
                value = await request(ev)
                ev.outcome = "ok"
                return value
            except _Permanent as exc:
                ev.outcome, ev.error = "failed", exc.failure.reason
                self.fail(exc.failure)
                raise _Abort() from None
            except (_Retry, httpx.TransportError) as exc:
                retry_after = exc.retry_after if isinstance(exc, _Retry) else None
                ev.error = f"{type(exc).__name__}: {exc}"[:200] if not isinstance(exc, _Retry) else str(exc)
                ev.retry_after = retry_after
            except OSError as exc:  # the disk (full, read-only, removed folder): no retry helps
                ev.outcome, ev.error = "failed", str(exc)[:200]
                self.fail(FetchFailure(name, "write error", f"{exc.strerror or exc}: {exc.filename or self.dest}"))
                raise _Abort() from None
            except httpx.HTTPError as exc:  # an invalid URL and the like: no retry helps
                ev.outcome, ev.error = "failed", str(exc)[:200]
                self.fail(FetchFailure(name, "bad url", str(exc)[:200]))
                raise _Abort() from None
            except asyncio.CancelledError:
                ev.outcome = "cancelled"
                raise
            finally:
                ev.end = self.now()
                self.release(slot)
            if attempt > self.o.retries:
                ev.outcome = "failed"
                self.fail(FetchFailure(name, "retries exhausted", f"{attempt} attempts; last: {ev.error}"))
                raise _Abort()
            wait = self.backoff(attempt, retry_after)
            if ev.end + wait >= self.o.timeout:
                ev.outcome = "failed"
                self.fail(FetchFailure(name, "deadline exceeded",
                                       f"retrying after {wait:.3g} s would pass the {self.o.timeout:g} s deadline; "
                                       f"last: {ev.error}"))
                raise _Abort()
            ev.outcome, ev.wait = "retry", wait
            await asyncio.sleep(wait)

    async def _shard(self, client, name: str) -> None:
        res = self.results[name]
        await self._with_retries(name, lambda ev: self._get_shard(client, res, ev))
        bar = self.bars.pop(name, None)
        if bar is not None:
            bar.close()
        # fsync and rename in a thread, the slot already free: flushing MBs to disk must neither stall the
        # other streams (the event loop) nor keep a connection slot idle
        try:
            await asyncio.to_thread(_durable_replace, os.path.join(self.dest, name + ".part"),
                                    os.path.join(self.dest, name))
        except OSError as exc:
            self.fail(FetchFailure(name, "write error", f"{exc.strerror or exc}: {exc.filename or self.dest}"))
            raise _Abort() from None
        res.status = "ok"

    # --- the run ------------------------------------------------------------------------------------------

    async def run(self) -> FetchReport:
        o = self.o
        timeout = httpx.Timeout(connect=o.connect_timeout, read=o.read_timeout, write=o.read_timeout, pool=None)
        limits = httpx.Limits(max_connections=o.concurrency, max_keepalive_connections=o.concurrency)
        names: list[str] = []
        try:
            async with httpx.AsyncClient(timeout=timeout, limits=limits, headers={"Accept-Encoding": "identity"},
                                         trust_env=False, follow_redirects=True) as client:
                try:
                    async with asyncio.timeout(o.timeout):
                        try:
                            data = await self._with_retries(INDEX_NAME, lambda ev: self._get_index(client, ev))
                            try:
                                names = shard_files(read_index(data))
                            except ValueError as exc:
                                self.fail(FetchFailure(INDEX_NAME, "bad index", str(exc)[:300]))
                                raise _Abort() from None
                            for name in names:
                                self.results[name] = ShardResult(name, shard_url(self.index_url, name))
                            async with asyncio.TaskGroup() as group:
                                for name in names:
                                    group.create_task(self._shard(client, name), name=name)
                        except* _Abort:
                            pass
                except TimeoutError:  # name a shard the deadline caught in flight, else the first unfinished one
                    pending = [r.name for r in self.results.values() if r.status != "ok"] or [INDEX_NAME]
                    caught = [a.shard for a in self.report.attempts if a.outcome == "cancelled"] or pending
                    self.fail(FetchFailure(caught[0], "deadline exceeded",
                                           f"the {o.timeout:g} s deadline passed with {len(pending)} of "
                                           f"{max(len(names), 1)} file(s) unfinished"))
            if self.report.error is None:
                self._write_index(data)
                self.report.ok = True
        except BaseException:  # Ctrl-C, an outer cancel: note when, clean up below, and let it go on
            if self.report.cancelled_at is None:
                self.report.cancelled_at = self.now()
            raise
        finally:
            self._finish()
        return self.report

    def _write_index(self, data: bytes) -> None:
        tmp = os.path.join(self.dest, f".{INDEX_NAME}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, os.path.join(self.dest, INDEX_NAME))

    def _finish(self) -> None:
        for bar in [*self.bars.values(), self.total_bar]:
            if bar is not None:
                bar.close()
        for res in self.results.values():
            if res.status == "ok":
                continue
            res.status = "failed" if self.report.error and self.report.error.shard == res.name else "cancelled"
            part = os.path.join(self.dest, res.name + ".part")
            if not self.o.keep_partial and os.path.isfile(part):
                os.remove(part)
        tmp = os.path.join(self.dest, f".{INDEX_NAME}.tmp")
        if os.path.isfile(tmp):
            os.remove(tmp)
        self.report.shards = list(self.results.values())
        self.report.elapsed = self.now()


async def fetch_checkpoint(index_url: str, dest, options: FetchOptions = FetchOptions()) -> FetchReport:
    """Download the checkpoint whose ``model.safetensors.index.json`` is at ``index_url`` into folder ``dest``
    (created if missing): module docstring for how. Returns a :class:`FetchReport` (``ok``, the first
    ``error``, the event log); raises nothing for a failed download. Cancellation (Ctrl-C under
    ``asyncio.run``) cleans up the same way, then propagates. Needs httpx (the ``shards`` extra)."""
    dest = os.fspath(dest)
    os.makedirs(dest, exist_ok=True)
    return await _Run(str(index_url), dest, options).run()


def fetch(index_url: str, dest, **options) -> FetchReport:
    """:func:`fetch_checkpoint` run to completion with ``asyncio.run``; ``options`` are :class:`FetchOptions`
    fields. Inside a running event loop (a notebook), ``await fetch_checkpoint(...)`` instead."""
    return asyncio.run(fetch_checkpoint(index_url, dest, FetchOptions(**options)))
