"""An HTTP file server written for the tests on raw sockets, sharing no code with ringlab.shards.server.

It serves a folder with the behaviour the fetch contract names (Range -> 206, X-Linked-Etag) and a few
misbehaviours chosen per file name in ``modes``:

``404``      always 404          ``wrong``    the right length and X-Linked-Etag, different bytes
``503once``  503 with Retry-After: 0 on the first request, then the file
``stall``    headers and half the body, then silence until the client hangs up
``norange``  ignores Range: always 200 with the whole file
``noetag``   no X-Linked-Etag header
``cutonce``  the first request gets half the body, then the connection closes (modes combine: ``cutonce+norange``)
``redirect`` as the Hub serves a LFS file: a 302 to ``/cdn/NAME`` carrying X-Linked-Etag; the CDN sends none

It counts TCP connections open at once (a connection ends when the client's end reads as closed).
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading


class PlainServer:
    def __init__(self, folder: str, modes: dict[str, str] | None = None):
        self.folder, self.modes = folder, dict(modes or {})
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.live: set[socket.socket] = set()
        self.peak = 0
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header)
        self.threads: list[threading.Thread] = []
        self.stopping = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, name: str = "model.safetensors.index.json") -> str:
        return f"http://127.0.0.1:{self.port}/repo/{name}"

    def _accept(self):
        while not self.stopping.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                # a connection the client closed before opening this one is over, though its thread may not
                # have seen the close yet: check before counting (loopback delivers the close first)
                for other in [c for c in self.live if self._closed_by_peer(c)]:
                    self._forget(other)
                self.live.add(conn)
                self.peak = max(self.peak, len(self.live))
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket):
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])}
                with self.lock:
                    self.requests.append((path, headers.get("range")))
                if not self._answer(conn, path, headers.get("range")):
                    return
        except OSError:
            return
        finally:
            with self.lock:
                self._forget(conn)
            conn.close()

    @staticmethod
    def _closed_by_peer(conn) -> bool:
        try:
            return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _forget(self, conn) -> None:
        self.live.discard(conn)

    @property
    def open(self) -> int:
        with self.lock:
            return len([c for c in self.live if not self._closed_by_peer(c)])

    def _send(self, conn, status: str, headers: dict, body: bytes = b"") -> None:
        head = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        conn.sendall(head.encode() + body)

    def _answer(self, conn, path: str, range_header: str | None) -> bool:
        """Answer one request; False when the connection must end."""
        name = path.rsplit("/", 1)[-1]
        full = os.path.join(self.folder, name)
        mode = set(self.modes.get(name, "").split("+"))
        first = sum(p == path for p, _ in self.requests) == 1
        cdn = "redirect" in mode and path.startswith("/cdn/")
        if not (path.startswith("/repo/") or cdn) or not os.path.isfile(full) or "404" in mode:
            self._send(conn, "404 Not Found", {"Content-Length": "9"}, b"not found")
            return True
        if "503once" in mode and first:
            self._send(conn, "503 Service Unavailable", {"Content-Length": "0", "Retry-After": "0"})
            return True
        with open(full, "rb") as fh:
            body = fh.read()
        digest = hashlib.sha256(body).hexdigest()
        if "wrong" in mode:
            body = bytes(255 - b for b in body)
        headers = {"Content-Type": "application/octet-stream"}
        if "redirect" in mode and not cdn:
            self._send(conn, "302 Found", {"Location": f"/cdn/{name}", "X-Linked-Etag": f'"{digest}"',
                                           "Content-Length": "0"})
            return True
        if "noetag" not in mode and "redirect" not in mode and name.endswith(".safetensors"):
            headers["X-Linked-Etag"] = f'"{digest}"'
        status, start = "200 OK", 0
        if range_header and "norange" not in mode:
            start = int(range_header.split("=")[1].split("-")[0])
            status = "206 Partial Content"
            headers["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
        payload = body[start:]
        headers["Content-Length"] = str(len(payload))
        if "cutonce" in mode and first:
            self._send(conn, status, headers, payload[: len(payload) // 2])
            return False
        if "stall" in mode:
            self._send(conn, status, headers, payload[: len(payload) // 2])
            while conn.recv(65536):  # silent until the client hangs up
                pass
            return False
        self._send(conn, status, headers, payload)
        return True

    def close(self):
        self.stopping.set()
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
