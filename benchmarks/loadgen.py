"""A lean loopback load generator for the service: ``python -m benchmarks.loadgen URL``.

httpx costs about a millisecond of client CPU per request, which on a two-core machine
measures the client, not the service. This client pre-renders each HTTP/1.1 request,
keeps one connection per worker alive and parses only the status line and
``Content-Length``, so nearly all CPU is left to the service under test. It records,
per request, the id it sent, the status and the latency — what the SIGKILL test needs
to check that every acknowledged request was stored.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class LoadResult:
    """Outcome of a load run."""

    statuses: dict[str, int] = field(default_factory=dict)  # request id -> HTTP status
    latencies: list[float] = field(default_factory=list)  # seconds, 200s only
    errors: int = 0  # connection failures (no status)
    seconds: float = 0.0
    first_error: str = ""  # what the first failure was (e.g. connection refused)

    @property
    def acknowledged(self) -> list[str]:
        return [rid for rid, status in self.statuses.items() if status == 200]

    def summary(self) -> dict:
        ordered = sorted(self.latencies)

        def pct(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else 0.0

        return {
            "requests": len(self.statuses),
            "ok": len(self.acknowledged),
            "errors": self.errors,
            "seconds": round(self.seconds, 3),
            "requests_per_second": round(len(self.acknowledged) / self.seconds, 1)
            if self.seconds
            else 0.0,
            "p50_ms": round(pct(0.50), 2),
            "p99_ms": round(pct(0.99), 2),
        }


def _request_bytes(host: str, path: str, body: bytes, request_id: str) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-Request-ID: {request_id}\r\n\r\n"
    )
    return head.encode() + body


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


async def run_load(
    url: str,
    payloads: Sequence[dict],
    *,
    concurrency: int = 16,
    total: int | None = None,
    duration: float | None = None,
    id_prefix: str = "load",
    should_stop: Callable[[], bool] = lambda: False,
) -> LoadResult:
    """POST ``payloads`` (round robin) to ``url`` from ``concurrency`` connections.

    Stops after ``total`` requests, after ``duration`` seconds, when ``should_stop()``
    is true, or when the server goes away. Each request carries ``X-Request-ID:
    <id_prefix>-<n>``.
    """
    parts = urlsplit(url)
    host, port, path = parts.hostname, parts.port or 80, parts.path or "/"
    bodies = [json.dumps(p).encode() for p in payloads]
    counter = itertools.count()
    result = LoadResult()
    started = time.perf_counter()
    deadline = started + duration if duration else None

    def more() -> int | None:
        n = next(counter)
        if (total is not None and n >= total) or should_stop():
            return None
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        return n

    async def worker() -> None:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as exc:
            result.errors += 1
            result.first_error = result.first_error or f"connect: {exc!r}"
            return
        try:
            while (n := more()) is not None:
                request_id = f"{id_prefix}-{n}"
                sent = time.perf_counter()
                try:
                    writer.write(_request_bytes(host, path, bodies[n % len(bodies)], request_id))
                    await writer.drain()
                    status = await _read_response(reader)
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    result.statuses[request_id] = 0
                    result.errors += 1
                    result.first_error = result.first_error or f"request: {exc!r}"
                    return  # the connection is gone (e.g. the server was killed)
                result.statuses[request_id] = status
                if status == 200:
                    result.latencies.append(time.perf_counter() - sent)
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="e.g. http://127.0.0.1:8080/predict")
    parser.add_argument("--payload", required=True, help="JSON file: one request body or a list")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--id-prefix", default="load", help="X-Request-ID: <prefix>-<n>")
    args = parser.parse_args()
    with open(args.payload) as handle:
        loaded = json.load(handle)
    payloads = loaded if isinstance(loaded, list) else [loaded]
    result = asyncio.run(
        run_load(
            args.url,
            payloads,
            concurrency=args.concurrency,
            total=args.requests,
            id_prefix=args.id_prefix,
        )
    )
    print(json.dumps(result.summary()))


if __name__ == "__main__":
    main()
