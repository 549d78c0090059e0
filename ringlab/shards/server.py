"""A fault-injecting HTTP server for a sharded checkpoint, on 127.0.0.1, built on ``http.server``.

It answers as the Hugging Face Hub answers for LFS files: each shard carries its sha256 in ``X-Linked-Etag``
(and ``ETag``), quoted; ``Range: bytes=A-`` / ``bytes=A-B`` gives 206 with ``Content-Range`` (RFC 9110
section 14), a start past the end 416. Faults come from a SPEC (:mod:`ringlab.shards.faults`). Every
connection and request is recorded (:mod:`ringlab.shards.records`), so a grader can see how many
connections a client held open at once, whether it left any open, how it retried and from where it resumed.

    with ShardServer("ckpt/", "2=status:404; conn=8MiB/s") as server:
        fetch(server.index_url, "out/")
        server.wait_idle()
        records = server.records

Connections are counted as TCP connections: one is counted closed once the server reads its end (EOF or
RST). At each accept the server first sweeps the open ones for a close the client already made, so a client
that closes one connection and then opens another is never counted as holding both (on loopback the close
reaches the server's socket before the new connection does). A peer whose first byte cannot start an HTTP
request speaks another protocol: it is hung up on, marked ``foreign`` and left out of every count. The port
is an ephemeral one and may be the old port of a Jupyter kernel that is gone; ZeroMQ then reconnects to it
every 100 ms and sends its greeting (0xFF ...). Counted as a client, it would make a correct downloader look
like it leaks a connection.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from ringlab.shards.checkpoint import INDEX_NAME, read_index, sha256_file, shard_files
from ringlab.shards.faults import Fault, FaultPlan, parse_faults
from ringlab.shards.records import ConnectionRecord, RequestRecord, ServerRecords

HOST = "127.0.0.1"
CHUNK = 64 * 1024  # bytes per send when unthrottled
BURST = 0.25  # seconds: how far a throttled response may catch up after its thread was scheduled late
_REQUEST_START = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ\r\n")  # a method token's first byte (or a stray CRLF)
_SHA_CACHE: dict[tuple, str] = {}  # (path, size, mtime_ns) -> sha256: a test run serves the same files often


class _ClientGone(Exception):
    """The client closed its end, or the server is stopping."""


def _peer_closed(sock) -> bool:
    """Has the other end of ``sock`` closed it (EOF or RST pending)? Never blocks, never consumes data."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def _peak(connections) -> int:
    """Most connections open at once, from their (opened, closed) times; at equal times a close goes first, as
    the sweep at each accept counts it."""
    events = sorted(e for c in connections for e in ((c.opened, 1), (c.closed, -1)) if e[0] is not None)
    most = now = 0
    for _, step in events:  # (t, -1) sorts before (t, 1)
        now += step
        most = max(most, now)
    return most


class _Link:
    """All response bodies together at ``rate`` bytes/s: each send books the next free slot of the link."""

    def __init__(self, rate: float):
        self.rate, self.clock, self.lock = rate, 0.0, threading.Lock()

    def book(self, n: int) -> float:
        """Reserve ``n`` bytes; return the monotonic time at which they may be sent."""
        with self.lock:
            start = max(self.clock, time.monotonic())
            self.clock = start + n / self.rate
            return start


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection carries many requests, as with real clients
    server_version = "ringlab-shards/1"

    def log_message(self, format, *args):  # noqa: A002 - quiet; the records say what happened
        pass

    def handle(self):
        if self.server.owner._classify(self.connection):  # an HTTP client: answer its requests
            super().handle()

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.server.owner._answer(self, head=False)

    def do_HEAD(self):  # noqa: N802
        self.server.owner._answer(self, head=True)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # listen backlog; socketserver's 5 makes a burst of connects wait a 1 s SYN retry

    def __init__(self, owner: "ShardServer", port: int):
        self.owner = owner
        super().__init__((HOST, port), _Handler)

    def get_request(self):
        with self.owner._accepting:  # wait_idle must not look between the accept and the count
            request, client_address = super().get_request()
            self.owner._opened(request)
        return request, client_address

    def shutdown_request(self, request):
        self.owner._closed(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):  # a client that vanished is not a server error
        pass


def _parse_range(header: str | None, size: int):
    """(start, end inclusive) for a single ``bytes=`` range; None to ignore it (absent or malformed, as RFC 9110
    allows); "unsatisfiable" when the start is past the end of the file."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, dash, last = header[6:].strip().partition("-")
    if not dash:
        return None
    try:
        if first == "":  # suffix range: the last N bytes
            n = int(last)
            return None if n <= 0 else (max(0, size - n), size - 1) if size else "unsatisfiable"
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start < 0:
        return None
    if start >= size:
        return "unsatisfiable"
    if end < start:
        return None
    return start, min(end, size - 1)


class ShardServer:
    """Serve the checkpoint in ``folder`` (an index plus the shards it names) on 127.0.0.1 with ``faults``
    (a SPEC string or a :class:`FaultPlan`); ``port`` 0 picks a free one; ``seed`` drives ``?P`` rules and
    nothing else. ``prefix`` serves everything under a path (``"org/model/resolve/main/"``, as the Hub does).

    Raises ValueError (one line) for a folder without an index, an index naming a missing file, or a bad
    SPEC; OSError if the port cannot be bound (on :meth:`start`)."""

    def __init__(self, folder, faults: str | FaultPlan = "", *, port: int = 0, seed: int = 0, prefix: str = ""):
        self.folder = os.fspath(folder)
        index_path = os.path.join(self.folder, INDEX_NAME)
        if not os.path.isfile(index_path):
            raise ValueError(f"{self.folder!r} holds no {INDEX_NAME}; write one with 'ringlab shards write'")
        with open(index_path, "rb") as fh:
            self.index_bytes = fh.read()
        self.files = shard_files(read_index(self.index_bytes))
        missing = [f for f in self.files if not os.path.isfile(os.path.join(self.folder, f))]
        if missing:
            raise ValueError(f"the index names {len(missing)} file(s) missing from {self.folder!r}, "
                             f"e.g. {missing[0]!r}")
        self.sizes = {f: os.path.getsize(os.path.join(self.folder, f)) for f in self.files}
        self.sha256 = {f: self._sha(os.path.join(self.folder, f)) for f in self.files}
        plan = faults if isinstance(faults, FaultPlan) else parse_faults(faults, shards=self.files)
        self.plan = plan.seeded(seed)
        self.port = port
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self._link = _Link(plan.link_rate) if plan.link_rate else None
        self._lock = threading.Lock()
        self._accepting = threading.Lock()
        self._stop = threading.Event()
        self._records = ServerRecords()
        self._open: dict[int, tuple[socket.socket, ConnectionRecord]] = {}  # id(sock) -> (sock, record)
        self._in_flight = 0  # requests whose handler has not finished (records not final)
        self._unanswered: set[int] = set()  # ids of requests counted in flight (ServerRecords.peak_in_flight)
        self._attempts: dict[str, int] = {}  # "METHOD path" -> requests so far
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    @staticmethod
    def _sha(path: str) -> str:
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
        if key not in _SHA_CACHE:
            _SHA_CACHE[key] = sha256_file(path)
        return _SHA_CACHE[key]

    # --- life cycle -------------------------------------------------------------------------------------------

    def start(self) -> "ShardServer":
        """Bind and serve in a background thread; returns self."""
        self._httpd = _HTTPServer(self, self.port)
        self.port = self._httpd.server_address[1]
        self._records.t0 = time.monotonic()
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="ringlab-shards-server", daemon=True)
        self._thread.start()
        return self

    def stop(self, grace: float = 2.0) -> None:
        """Stop accepting, hang up every open connection, and wait up to ``grace`` s for handlers to finish."""
        if self._httpd is None:
            return
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            socks = [s for s, _ in self._open.values()]
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (self._in_flight or self._open):
            time.sleep(0.01)
        self._thread.join(timeout=grace)
        self._httpd = None

    def __enter__(self) -> "ShardServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/`` plus the prefix: the folder the index and shards are served from."""
        return f"http://{HOST}:{self.port}/{self.prefix}"

    @property
    def index_url(self) -> str:
        return self.base_url + INDEX_NAME

    # --- records ----------------------------------------------------------------------------------------------

    def _sweep(self) -> None:
        """Count as closed every open connection whose client has hung up (caller holds the lock)."""
        now = time.monotonic() - self._records.t0
        for key, (sock, rec) in list(self._open.items()):
            if _peer_closed(sock):
                rec.closed = now
                del self._open[key]

    def _opened(self, sock) -> None:
        with self._lock:
            self._sweep()
            rec = ConnectionRecord(len(self._records.connections), time.monotonic() - self._records.t0)
            self._records.connections.append(rec)
            self._open[id(sock)] = (sock, rec)
            self._records.peak_connections = max(self._records.peak_connections, len(self._open))

    def _classify(self, sock) -> bool:
        """Wait (in the connection's handler thread) for its first byte: True when it can start an HTTP request
        or the peer hung up; otherwise mark the connection foreign, take it out of the counts and return False."""
        try:
            first = sock.recv(1, socket.MSG_PEEK)  # blocks until the peer writes or hangs up
        except OSError:
            return True  # a reset: an ordinary close, counted as one by the handler's ending
        if not first or first[0] in _REQUEST_START:
            return True
        with self._lock:
            entry = self._open.pop(id(sock), None)
            if entry is not None:
                entry[1].foreign = True
                entry[1].closed = time.monotonic() - self._records.t0
                self._records.peak_connections = _peak(c for c in self._records.connections if not c.foreign)
        return False

    def _closed(self, sock) -> None:
        with self._lock:
            entry = self._open.pop(id(sock), None)
            if entry is not None:
                entry[1].closed = time.monotonic() - self._records.t0

    def _conn_record(self, sock) -> ConnectionRecord | None:
        entry = self._open.get(id(sock))
        return entry[1] if entry else None

    @property
    def records(self) -> ServerRecords:
        """A copy of the records now, ``open_connections`` counted after a sweep."""
        with self._lock:
            self._sweep()
            self._records.open_connections = len(self._open)
            return ServerRecords.from_dict(self._records.to_dict())

    def wait_idle(self, timeout: float = 2.0) -> int:
        """Wait up to ``timeout`` s for every connection to close (those still in the listen backlog included)
        and every request's record to be final; return how many connections are still open."""
        deadline = time.monotonic() + timeout
        while True:
            with self._accepting, self._lock:
                self._sweep()
                left = len(self._open)
                # a connection still in the listen backlog is open too: the server has not accepted it yet
                pending = self._httpd is not None and bool(select.select([self._httpd.socket], [], [], 0)[0])
                answering = self._in_flight  # a handler still finishing a request the client left: records not final
            if not (left or pending or answering) or time.monotonic() >= deadline:
                return left + pending
            time.sleep(0.01)

    # --- answering --------------------------------------------------------------------------------------------

    def _wait(self, handler, seconds: float | None) -> None:
        """Sleep ``seconds`` (None: until the client hangs up), waking at once if the client hangs up (then
        _ClientGone) or the server stops."""
        end = None if seconds is None else time.monotonic() + seconds
        watch = True
        while True:
            left = 0.05 if end is None else end - time.monotonic()
            if left <= 0:
                return
            if self._stop.is_set():
                raise _ClientGone("server stopping")
            if watch:
                ready, _, _ = select.select([handler.connection], [], [], min(left, 0.05))
                if ready:
                    if _peer_closed(handler.connection):
                        raise _ClientGone("client closed")
                    watch = False  # the client sent more (a pipelined request): plain waits from here
            else:
                self._stop.wait(min(left, 0.05))

    def _rate(self, fault: Fault | None) -> float | None:
        rates = [r for r in (fault.rate if fault and fault.kind == "throttle" else None, self.plan.conn_rate) if r]
        if self.plan.busy is not None and len(self._open) > self.plan.busy[0]:
            rates.append(self.plan.busy[1])
        return min(rates) if rates else None

    def _send_body(self, handler, path: str, start: int, length: int, fault: Fault | None, rec: RequestRecord) -> str:
        """Send ``length`` bytes of ``path`` from ``start``, paced and faulted; return the outcome."""
        cut = None
        if fault is not None and fault.fraction is not None:
            cut = int(fault.fraction * length)
        wfile = handler.wfile
        clock = time.monotonic()
        with open(path, "rb") as fh:
            fh.seek(start)
            sent = 0
            while sent < length:
                rate = self._rate(fault)
                step = CHUNK if rate is None else int(min(CHUNK, max(1024, rate / 50)))
                if self._link is not None:
                    step = int(min(step, max(1024, self._link.rate / 50)))
                if cut is not None and fault.kind in ("stall", "reset", "truncate") and sent < cut:
                    step = min(step, cut - sent)
                if cut is not None and fault.kind in ("stall", "reset", "truncate") and sent == cut:
                    wfile.flush()
                    if fault.kind == "stall":
                        self._wait(handler, fault.seconds)
                        cut = None  # the stall is over: finish the body
                        continue
                    return "reset" if fault.kind == "reset" else "truncated"
                data = fh.read(min(step, length - sent))
                if not data:
                    return "error"  # the file shrank under us
                spoil = None if fault is None or fault.kind != "corrupt" or cut is None else min(cut, length - 1)
                if spoil is not None and sent <= spoil < sent + len(data):
                    at = spoil - sent
                    data = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]
                due = clock
                if rate is not None:  # a token bucket that starts empty: never ahead of rate * elapsed, and a
                    # thread woken late may catch up on at most BURST seconds of sending it missed
                    clock = max(clock, time.monotonic() - BURST) + len(data) / rate
                if self._link is not None:
                    due = max(due, self._link.book(len(data)))
                if due > time.monotonic():
                    self._wait(handler, due - time.monotonic())
                if sent + len(data) == length:
                    self._answered(rec)
                wfile.write(data)
                sent += len(data)
                rec.bytes_sent = sent
                if self._stop.is_set():
                    raise _ClientGone("server stopping")
        wfile.flush()
        if cut is not None and fault.kind in ("reset", "truncate"):  # a fraction of 1: the whole body, then the cut
            return "reset" if fault.kind == "reset" else "truncated"
        return "complete"

    def _hang_up(self, handler, rst: bool) -> None:
        """Close the connection now: with a TCP RST (``rst``) or a clean FIN after the bytes sent so far."""
        handler.close_connection = True
        sock = handler.connection
        try:
            handler.wfile.flush()
            if rst:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                handler.wfile.close()
                handler.rfile.close()
                sock.close()  # with SO_LINGER 0 the kernel answers with RST and drops unsent data
            else:
                sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _answer(self, handler, head: bool) -> None:
        path = unquote(urlsplit(handler.path).path)
        name = path[len("/" + self.prefix):] if path.startswith("/" + self.prefix) else None
        shard = name if name in self.sizes else None
        with self._lock:
            key = f"{handler.command} {path}"  # a HEAD does not move the count of GETs that #A rules select
            attempt = self._attempts[key] = self._attempts.get(key, 0) + 1
            fault = self.plan.fault_for(shard, self.files.index(shard) + 1, attempt) if shard and not head else None
            conn = self._conn_record(handler.connection)
            if conn is not None:
                conn.requests += 1
            rec = RequestRecord(len(self._records.requests), conn.id if conn else -1, handler.command, path, shard,
                                attempt, None, None, 200, fault.spec if fault else None,
                                start=time.monotonic() - self._records.t0)
            self._records.requests.append(rec)
            self._in_flight += 1
            self._unanswered.add(rec.id)
            self._records.peak_in_flight = max(self._records.peak_in_flight, len(self._unanswered))
        try:
            rec.outcome = self._respond(handler, head, name, shard, fault, rec)
        except _ClientGone:
            rec.outcome = "client-closed" if not self._stop.is_set() else "stalled"
            handler.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            rec.outcome = "client-closed"
            handler.close_connection = True
        finally:
            rec.end = time.monotonic() - self._records.t0
            with self._lock:
                self._in_flight -= 1
                self._unanswered.discard(rec.id)
        if rec.outcome in ("reset", "truncated"):
            self._hang_up(handler, rst=rec.outcome == "reset")

    def _answered(self, rec: RequestRecord) -> None:
        """Stop counting ``rec`` in flight: called just before the write that completes its response. Its client
        may send its next request as soon as it reads those bytes, and this thread can lose the CPU between its
        last write and its own bookkeeping (a busy machine); counted until then, a client holding at most k
        requests at once could be seen with k + 1."""
        with self._lock:
            self._unanswered.discard(rec.id)

    def _simple(self, handler, rec: RequestRecord, code: int, text: str, headers: dict | None = None,
                head: bool = False) -> None:
        body = (text + "\n").encode()
        handler.send_response(code)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Type", "text/plain; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        self._answered(rec)  # before its first byte: a small response, written at once
        handler.end_headers()
        if not head:
            handler.wfile.write(body)
        handler.wfile.flush()

    def _respond(self, handler, head: bool, name: str | None, shard: str | None, fault: Fault | None,
                 rec: RequestRecord) -> str:
        if fault is not None and fault.kind == "latency":
            self._wait(handler, fault.seconds)
        if fault is not None and fault.kind == "status":
            rec.status = fault.status
            extra = {"Retry-After": f"{fault.seconds:g}"} if fault.seconds is not None else {}
            self._simple(handler, rec, fault.status, f"{fault.status} (fault {fault.spec})", extra)
            return "complete"
        if name == INDEX_NAME:
            rec.status = 200
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(self.index_bytes)))
            self._answered(rec)
            handler.end_headers()
            if not head:
                handler.wfile.write(self.index_bytes)
            handler.wfile.flush()
            rec.bytes_sent = 0 if head else len(self.index_bytes)
            return "head" if head else "complete"
        if shard is None:
            rec.status = 404
            self._simple(handler, rec, 404, "404 not found", head=head)
            return "head" if head else "complete"
        size = self.sizes[shard]
        wanted = _parse_range(handler.headers.get("Range"), size)
        etag = f'"{self.sha256[shard]}"'
        if wanted == "unsatisfiable":
            rec.status, rec.range_start = 416, size
            self._simple(handler, rec, 416, "416 range not satisfiable", {"Content-Range": f"bytes */{size}"}, head)
            return "head" if head else "complete"
        start, end = wanted if wanted else (0, size - 1)
        if wanted:
            rec.range_start, rec.range_end = start, end
        rec.status = 206 if wanted else 200
        handler.send_response(rec.status)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(end - start + 1))
        handler.send_header("Accept-Ranges", "bytes")
        handler.send_header("ETag", etag)
        handler.send_header("X-Linked-Etag", etag)
        handler.send_header("X-Linked-Size", str(size))
        if wanted:
            handler.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        if head or start > end:  # the headers complete it (an empty file has no body)
            self._answered(rec)
        handler.end_headers()
        if head:
            handler.wfile.flush()
            return "head"
        return self._send_body(handler, os.path.join(self.folder, shard), start, end - start + 1, fault, rec)
