"""A reverse proxy in front of a real server that can fail at an exact request.

Fault injection without mocks: the client talks HTTP to the proxy, the proxy forwards
every request unchanged to the real server (an ``mlflow server`` here) — until a rule
trips. From then on the proxy behaves like a server that died: it drops every
connection without an answer, until :meth:`FaultProxy.restore`. A rule names a path
fragment and how many matching requests still go through, so a test can stop "the
server" between two steps of a job (after the model version is created, before its
tags are written) instead of hoping a timer lands there.
"""

from __future__ import annotations

import contextlib
import http.client
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class _Rule:
    fragment: str
    passes_left: int  # matching requests still forwarded before the proxy goes down


class FaultProxy:
    """``FaultProxy(upstream_url)``; use :attr:`url` instead of the upstream's."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._upstream = (parts.hostname, parts.port)
        self._lock = threading.Lock()
        self._rule: _Rule | None = None
        self.down = False
        self.requests: list[str] = []  # "METHOD path" of every request, forwarded or not
        self.dropped: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _forward(self) -> None:
                body = self._read_body()
                line = f"{self.command} {self.path}"
                if not proxy._admit(line):
                    self.close_connection = True  # no answer: like a dead server
                    return
                connection = http.client.HTTPConnection(*proxy._upstream, timeout=120)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    payload = response.read()
                finally:
                    connection.close()
                self.send_response(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _read_body(self) -> bytes | None:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else None

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _admit(self, line: str) -> bool:
        with self._lock:
            self.requests.append(line)
            rule = self._rule
            if not self.down and rule is not None and rule.fragment in line:
                if rule.passes_left == 0:
                    self.down = True
                else:
                    rule.passes_left -= 1
            if self.down:
                self.dropped.append(line)
                return False
            return True

    def fail_at(self, fragment: str, after: int = 0) -> None:
        """Go down at the request whose ``METHOD path`` contains ``fragment``, after
        letting ``after`` such requests through."""
        with self._lock:
            self._rule = _Rule(fragment, after)

    def go_down(self) -> None:
        with self._lock:
            self.down = True

    def restore(self) -> None:
        """Forward everything again (the server "came back"); the rule is cleared."""
        with self._lock:
            self.down = False
            self._rule = None

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class TcpRelay:
    """A TCP relay in front of a real server (PostgreSQL here) that can be cut.

    :meth:`cut` resets every open connection and refuses new ones — the server is
    "unreachable" — until :meth:`restore`. Bytes pass through unchanged otherwise.

    A cut only shuts the sockets down; the last of a connection's two pump threads
    closes them. Closing them from :meth:`cut` would free their descriptors while a
    pump thread might be about to use one: a connection accepted after the restore can
    get the same number, and the old thread would then read the new connection's bytes
    (once seen: the first commit after a restore failed with "server closed the
    connection unexpectedly").
    """

    def __init__(self, host: str, port: int) -> None:
        import socket

        self._upstream = (host, port)
        self._lock = threading.Lock()
        self._pumping: dict[tuple[socket.socket, socket.socket], int] = {}
        self.cut_off = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket

        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.cut_off:
                client.close()
                continue
            try:
                server = socket.create_connection(self._upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            pair = (client, server)
            with self._lock:
                self._pumping[pair] = 2
            for source, target in (pair, pair[::-1]):
                pump = threading.Thread(target=self._pump, args=(pair, source, target))
                pump.daemon = True
                pump.start()

    def _pump(self, pair, source, target) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass  # the other side went away, or the relay was cut
        finally:
            self._shut(pair)
            with self._lock:
                self._pumping[pair] -= 1
                last = self._pumping[pair] == 0
                if last:
                    del self._pumping[pair]
            if last:  # neither thread uses these descriptors any more
                for sock in pair:
                    sock.close()

    @staticmethod
    def _shut(pair) -> None:
        import socket

        for sock in pair:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.cut_off = True
        with self._lock:
            pairs = list(self._pumping)
        for pair in pairs:
            self._shut(pair)

    def restore(self) -> None:
        self.cut_off = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()
