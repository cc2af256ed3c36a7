"""Run the service under uvicorn (``driftgate serve``)."""

from __future__ import annotations

from driftgate.config import ProjectConfig
from driftgate.config.serving import ServingSettings

# SIGTERM/SIGINT: stop accepting, finish in-flight requests, then the lifespan drains
# the sample queue. Requests still running after this many seconds are cut off
# (unanswered, so nothing acknowledged is lost).
GRACEFUL_SHUTDOWN_SECONDS = 15
# Request line plus headers: a bearer token or a cookie fits many times over. uvicorn's
# httptools protocol buffers a head of any size, so a 64 MiB header would be read,
# parsed and handed to the app; beyond this the connection gets 431 and is closed.
MAX_REQUEST_HEAD_BYTES = 64 * 1024


def http_protocol():
    """uvicorn's HTTP protocol with :data:`MAX_REQUEST_HEAD_BYTES` enforced while the
    head arrives (h11 enforces it itself through ``h11_max_incomplete_event_size``)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools not installed: uvicorn's h11 protocol
        return "h11"

    class BoundedHeadHttpToolsProtocol(HttpToolsProtocol):
        # Where a head starts and ends is the parser's word (its callbacks), not a
        # search of the bytes: after a response that went out before its request's body
        # was read, the end of that body, the next head and the start of the next body
        # can come in one read, and a body counted as head was refused with 431.
        _in_head = True  # a connection's first bytes are a head
        _head_bytes = 0
        _tail = b""  # the last bytes of the head so far: its end may straddle two reads

        def data_received(self, data: bytes) -> None:
            if self._in_head:  # refuse before parsing what would overflow the limit
                window = self._tail + data
                end = window.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else max(0, end + 4 - len(self._tail))
                self._tail = window[-3:]
                if self._head_bytes > MAX_REQUEST_HEAD_BYTES:
                    self._refuse_head()
                    return
            super().data_received(data)

        def on_headers_complete(self) -> None:
            self._in_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            # The next bytes are the next request's head. A head that starts in the
            # middle of a read is counted from the next read on: at most one read
            # (256 KiB) of it goes uncounted, which keeps the buffering bounded.
            self._in_head, self._head_bytes, self._tail = True, 0, b""
            super().on_message_complete()

        def _refuse_head(self) -> None:
            message = f"request head larger than {MAX_REQUEST_HEAD_BYTES} bytes".encode()
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                b"content-type: text/plain; charset=utf-8\r\n"
                b"content-length: " + str(len(message)).encode() + b"\r\n"
                b"connection: close\r\n\r\n" + message
            )
            self.transport.close()

    return BoundedHeadHttpToolsProtocol


def uvicorn_limits() -> dict:
    """uvicorn options every server of the service runs with (also the tests' servers)."""
    return {"http": http_protocol(), "h11_max_incomplete_event_size": MAX_REQUEST_HEAD_BYTES}


def serving_settings(config: ProjectConfig) -> ServingSettings:
    """The config's ``serving`` section, or the defaults while it has none."""
    return getattr(config, "serving", None) or ServingSettings()


def run(
    config: ProjectConfig,
    settings: ServingSettings | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    log_level: str = "info",
) -> None:
    """Serve until interrupted; ``host``/``port`` override the settings."""
    import uvicorn

    from driftgate.serving.app import create_app

    settings = settings or serving_settings(config)
    uvicorn.run(
        create_app(config, settings),
        host=host if host is not None else settings.host,
        port=port if port is not None else settings.port,
        log_level=log_level,
        access_log=False,  # per-request logs would cost more than the request; see /metrics
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        lifespan="on",
        **uvicorn_limits(),
    )
