"""The shard server, checked with plain sockets and http.client (no ringlab fetcher): the Hub's headers,
Range, every fault as seen on the wire, and the records it keeps."""

from __future__ import annotations

import hashlib
import http.client
import json
import socket
import time

import pytest

from ringlab.shards import INDEX_NAME, ServerRecords


def get(server, path: str, headers: dict | None = None, timeout: float = 10.0):
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    return conn, resp


def raw_get(server, path: str, timeout: float = 10.0) -> tuple[bytes, bytes, str]:
    """(head, body bytes received, how it ended: "eof", "reset" or "timeout") of one GET on a raw socket."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=timeout)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data, ending = b"", "eof"
    try:
        while chunk := sock.recv(65536):
            data += chunk
            head, sep, body = data.partition(b"\r\n\r\n")
            length = [int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")]
            if sep and length and len(body) >= length[0]:
                break
    except ConnectionResetError:
        ending = "reset"
    except socket.timeout:
        ending = "timeout"
    finally:
        sock.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body, ending


def last_record(server):
    """The latest request's record once its handler has finished it (the client may read the body first)."""
    deadline = time.monotonic() + 10
    while server.records.requests[-1].end is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return server.records.requests[-1]


def source(checkpoint, k: int) -> bytes:
    with open(f"{checkpoint.folder}/{checkpoint.files[k]}", "rb") as fh:
        return fh.read()


def test_index_and_shards_with_the_hubs_headers(serve, checkpoint):
    server = serve()
    conn, resp = get(server, "/" + INDEX_NAME)
    index = json.loads(resp.read())
    assert sorted(set(index["weight_map"].values())) == checkpoint.files
    for k, name in enumerate(checkpoint.files):
        conn, resp = get(server, "/" + name)
        body = resp.read()
        assert resp.status == 200 and body == source(checkpoint, k)
        assert resp.getheader("X-Linked-Etag") == f'"{hashlib.sha256(body).hexdigest()}"'
        assert resp.getheader("Accept-Ranges") == "bytes" and int(resp.getheader("Content-Length")) == len(body)
        conn.close()


@pytest.mark.parametrize("header, start, end", [("bytes=1000-", 1000, None), ("bytes=10-19", 10, 19),
                                                ("bytes=-100", -100, None)])
def test_range_gives_206_with_content_range(header, start, end, serve, checkpoint):
    server = serve()
    whole = source(checkpoint, 0)
    conn, resp = get(server, "/" + checkpoint.files[0], {"Range": header})
    body = resp.read()
    expected = whole[start:] if end is None else whole[start:end + 1]
    first = len(whole) + start if start < 0 else start
    assert resp.status == 206 and body == expected
    assert resp.getheader("Content-Range") == f"bytes {first}-{first + len(body) - 1}/{len(whole)}"


def test_range_past_the_end_is_416(serve, checkpoint):
    server = serve()
    size = checkpoint.sizes[checkpoint.files[0]]
    conn, resp = get(server, "/" + checkpoint.files[0], {"Range": f"bytes={size}-"})
    resp.read()
    assert resp.status == 416 and resp.getheader("Content-Range") == f"bytes */{size}"


@pytest.mark.parametrize("path", ["/nope.safetensors", "/../" + INDEX_NAME, "/%2e%2e/etc/passwd", "/"])
def test_only_the_checkpoint_is_served(path, serve):
    conn, resp = get(serve(), path)
    resp.read()
    assert resp.status == 404


def test_status_faults_carry_retry_after(serve, checkpoint):
    server = serve("1#1=status:503:2; 2=status:429; 3=status:404")
    conn, resp = get(server, "/" + checkpoint.files[0])
    resp.read()
    assert resp.status == 503 and resp.getheader("Retry-After") == "2"
    conn, resp = get(server, "/" + checkpoint.files[0])  # #1 only: the second request is served
    assert resp.status == 200 and resp.read() == source(checkpoint, 0)
    conn, resp = get(server, "/" + checkpoint.files[1])
    resp.read()
    assert resp.status == 429 and resp.getheader("Retry-After") is None
    conn, resp = get(server, "/" + checkpoint.files[2])
    resp.read()
    assert resp.status == 404


def test_truncate_closes_cleanly_short_of_content_length(serve, checkpoint):
    server = serve("1=truncate:0.25")
    head, body, ending = raw_get(server, "/" + checkpoint.files[0])
    size = checkpoint.sizes[checkpoint.files[0]]
    assert f"Content-Length: {size}".encode() in head
    assert ending == "eof" and body == source(checkpoint, 0)[: int(0.25 * size)]


def test_reset_ends_with_rst(serve, checkpoint):
    server = serve("1=reset:0.25")
    head, body, ending = raw_get(server, "/" + checkpoint.files[0])
    assert ending == "reset" and len(body) <= int(0.25 * checkpoint.sizes[checkpoint.files[0]])
    assert last_record(server).outcome == "reset"


def test_corrupt_changes_one_byte_and_keeps_the_length(serve, checkpoint):
    server = serve("1=corrupt:0.5")
    conn, resp = get(server, "/" + checkpoint.files[0])
    body, whole = resp.read(), source(checkpoint, 0)
    diff = [i for i, (a, b) in enumerate(zip(body, whole)) if a != b]
    assert len(body) == len(whole) and diff == [int(0.5 * len(whole))]
    assert resp.getheader("X-Linked-Etag") == f'"{hashlib.sha256(whole).hexdigest()}"'


def test_stall_goes_silent_until_the_client_leaves(serve, checkpoint):
    server = serve("1=stall:0.5")
    head, body, ending = raw_get(server, "/" + checkpoint.files[0], timeout=0.5)
    assert ending == "timeout" and len(body) == int(0.5 * checkpoint.sizes[checkpoint.files[0]])
    assert server.wait_idle(5.0) == 0
    assert last_record(server).outcome == "client-closed"


def test_latency_and_throttle_take_at_least_their_time(serve, checkpoint):
    size = checkpoint.sizes[checkpoint.files[1]]
    server = serve("1=latency:300ms; 2=throttle:1MiB/s")
    started = time.monotonic()
    conn, resp = get(server, "/" + checkpoint.files[0])
    resp.read()
    assert time.monotonic() - started >= 0.29
    started = time.monotonic()
    conn, resp = get(server, "/" + checkpoint.files[1])
    assert len(resp.read()) == size
    assert time.monotonic() - started >= 0.9 * (size - 65536) / 2**20  # the first chunk may go at once


def test_link_cap_is_shared(serve, checkpoint):
    """Two bodies at once through a 1 MiB/s link take at least their bytes over the link."""
    import threading

    server = serve("link=1MiB/s")
    sizes = [checkpoint.sizes[f] for f in checkpoint.files[:2]]
    started = time.monotonic()
    threads = [threading.Thread(target=lambda f=f: get(server, "/" + f)[1].read()) for f in checkpoint.files[:2]]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert time.monotonic() - started >= 0.9 * (sum(sizes) - 2 * 65536) / 2**20


def test_records_count_connections_requests_and_ranges(serve, checkpoint):
    server = serve()
    socks = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
    deadline = time.monotonic() + 5
    while len(server.records.connections) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.records.open_connections == 4
    for sock in socks:
        sock.close()
    assert server.wait_idle(5.0) == 0
    conn, resp = get(server, "/" + checkpoint.files[0], {"Range": "bytes=100-"})
    resp.read()
    conn.request("GET", "/" + checkpoint.files[0])  # keep-alive: the same connection
    conn.getresponse().read()
    conn.close()
    server.wait_idle(5.0)
    records = server.records
    assert records.peak_connections == 4 and records.open_connections == 0
    assert records.requests_by_shard() == {checkpoint.files[0]: 2}
    assert [r.range_start for r in records.range_requests()] == [100]
    assert records.requests[0].conn == records.requests[1].conn
    assert records.bytes_by_shard()[checkpoint.files[0]] == 2 * checkpoint.sizes[checkpoint.files[0]] - 100
    assert [r.attempt for r in records.requests] == [1, 2]
    again = ServerRecords.from_dict(json.loads(json.dumps(records.to_dict())))
    assert again == records


def test_a_closed_connection_is_not_counted_with_the_next(serve):
    """Close one, open another, forty times over: the peak stays 1, though the server's thread for the first
    may not have noticed yet when the second is accepted."""
    server = serve()
    for _ in range(40):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.close()
    assert server.wait_idle(5.0) == 0
    assert server.records.peak_connections == 1


@pytest.mark.parametrize("spec", ["", "*=status:503", "*=truncate:1.0"])
def test_a_request_whose_response_is_read_is_not_counted_with_the_next(serve, checkpoint, monkeypatch, spec):
    """One request at a time (the index, a 404, a shard, a HEAD: every way a response ends), each sent as soon as
    the last one's response is read, while every handler thread is held 0.2 s after its last write (as a busy
    machine may do): the peak in flight stays 1."""
    from ringlab.shards.server import ShardServer

    respond = ShardServer._respond

    def slow(self, *args):
        try:
            return respond(self, *args)
        finally:
            time.sleep(0.2)

    monkeypatch.setattr(ShardServer, "_respond", slow)
    server = serve(spec)
    for method, path in [("GET", "/" + INDEX_NAME), ("GET", "/nope"), ("GET", "/" + checkpoint.files[0]),
                         ("HEAD", "/" + checkpoint.files[1]), ("GET", "/" + checkpoint.files[1])]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request(method, path)
        resp = conn.getresponse()
        resp.read()
        resp.close()
    server.wait_idle(5.0)
    assert len(server.records.requests) == 5 and server.records.peak_in_flight == 1


def test_a_peer_speaking_another_protocol_is_not_counted(serve, checkpoint):
    """A stale ZeroMQ socket reconnecting to the reused port (its greeting starts 0xFF) while a client holds two
    connections is hung up on and left out of the counts; the silent connection is counted."""
    server = serve()
    silent = socket.create_connection(("127.0.0.1", server.port))
    conn, resp = get(server, "/" + checkpoint.files[0])
    resp.read()
    zmq_like = socket.create_connection(("127.0.0.1", server.port))
    zmq_like.sendall(b"\xff" + b"\x00" * 8 + b"\x7f")
    zmq_like.settimeout(10)
    assert zmq_like.recv(1) == b""  # the server hung up
    records = server.records
    assert records.open_connections == 2 and records.peak_connections == 2
    assert [c.foreign for c in records.connections] == [False, False, True]
    assert server.wait_idle(0.2) == 2
    conn.close()
    silent.close()
    zmq_like.close()
    assert server.wait_idle(5.0) == 0


def test_probability_rules_follow_the_seed(serve, checkpoint):
    def hits(seed):
        server = serve("*?0.5=status:500", seed=seed)
        out = []
        for name in checkpoint.files * 3:
            conn, resp = get(server, "/" + name)
            resp.read()
            out.append(resp.status)
            conn.close()
        return out

    first = hits(7)
    assert first == hits(7) and set(first) == {200, 500}


def test_busy_throttles_only_past_k_connections(serve, checkpoint):
    """busy=1:RATE: alone, a body goes at full speed; with a second connection open, at RATE."""
    size = checkpoint.sizes[checkpoint.files[0]]
    server = serve("busy=1:1MiB/s")
    conn, resp = get(server, "/" + checkpoint.files[0])
    resp.read()
    assert last_record(server).outcome == "complete"
    idle = socket.create_connection(("127.0.0.1", server.port))  # a second connection, doing nothing
    try:
        deadline = time.monotonic() + 5
        while server.records.open_connections < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        started = time.monotonic()
        conn.request("GET", "/" + checkpoint.files[0])
        assert len(conn.getresponse().read()) == size
        assert time.monotonic() - started >= 0.9 * (size - 65536) / 2**20
    finally:
        idle.close()
        conn.close()
