"""The probe and metrics server: ``/healthz``, ``/readyz`` and ``/metrics``, in the service's loop.

Why ``asyncio.start_server`` with h11 rather than uvicorn + an ASGI app: ``uvicorn.Server.serve``
installs its own SIGINT/SIGTERM handlers for as long as it runs and raises the signal again when
it stops, which would fight the service's own graceful shutdown (``lahar.service.shutdown``).
Three fixed GET routes need no framework either.  h11 (the HTTP/1.1 parser uvicorn itself uses)
does the protocol: keep-alive, malformed requests (400), HEAD.  Running in the service's loop
also makes ``/healthz`` an honest liveness probe: a blocked loop stops answering it.

``/metrics`` serves a per-service ``CollectorRegistry`` in the format the scraper asks for
(Prometheus text, or OpenMetrics when its Accept header prefers it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import urlsplit

import h11
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from lahar.service.health import Health

__all__ = ["ProbeServer"]

log = logging.getLogger(__name__)

_Reply = tuple[int, list[tuple[str, str]], bytes]
_TEXT = [("content-type", "text/plain; charset=utf-8")]


class ProbeServer:
    """Serves ``health`` and ``registry`` over HTTP/1.1.

    ``async with ProbeServer(health, registry, host, port) as server: server.port``
    """

    def __init__(
        self,
        health: Health,
        registry: CollectorRegistry,
        host: str = "0.0.0.0",
        port: int = 8080,
        *,
        idle_timeout: float = 30.0,
    ) -> None:
        self.health, self.registry = health, registry
        self._host, self._port, self._idle_timeout = host, port, idle_timeout
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def port(self) -> int:
        """The port bound (the one the OS chose when asked for 0)."""
        if self._server is None:
            raise RuntimeError("the probe server is not started")
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self._host, self._port)
        log.info("probe server on %s:%d", self._host, self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._writers):  # idle keep-alive connections would hold wait_closed
            writer.close()
        await self._server.wait_closed()
        self._server = None

    async def __aenter__(self) -> ProbeServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- one connection: requests in turn (keep-alive) until closed, idle or broken ----------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        conn = h11.Connection(h11.SERVER)
        try:
            while await self._exchange(conn, reader, writer):
                conn.start_next_cycle()
        except (TimeoutError, ConnectionError):
            pass  # an idle or vanished client
        except h11.RemoteProtocolError as err:
            await self._send(conn, writer, None, (err.error_status_hint, _TEXT, f"{err}\n".encode()))
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _exchange(self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is done."""
        request = await self._next_event(conn, reader)
        if not isinstance(request, h11.Request):
            return False
        while not isinstance(await self._next_event(conn, reader), h11.EndOfMessage | h11.ConnectionClosed):
            pass  # a body is not expected here; read and drop it
        await self._send(conn, writer, request, self._route(request))
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _next_event(self, conn: h11.Connection, reader: asyncio.StreamReader) -> object:
        while (event := conn.next_event()) is h11.NEED_DATA:
            async with asyncio.timeout(self._idle_timeout):
                conn.receive_data(await reader.read(65536))  # b"" is end of stream, as h11 expects
        return event

    async def _send(
        self, conn: h11.Connection, writer: asyncio.StreamWriter, request: h11.Request | None, reply: _Reply
    ) -> None:
        status, headers, body = reply
        headers = [*headers, ("content-length", str(len(body)))]
        if request is None:
            headers.append(("connection", "close"))
        try:
            data = conn.send(h11.Response(status_code=status, headers=headers)) or b""
            if request is None or request.method != b"HEAD":
                data += conn.send(h11.Data(data=body)) or b""
            data += conn.send(h11.EndOfMessage()) or b""
        except h11.LocalProtocolError:  # the connection is past answering (e.g. broken mid-request)
            return
        writer.write(data)
        await writer.drain()

    # --- routes ---------------------------------------------------------------------------------

    def _route(self, request: h11.Request) -> _Reply:
        if request.method not in (b"GET", b"HEAD"):
            return 405, [*_TEXT, ("allow", "GET, HEAD")], b"method not allowed\n"
        path = urlsplit(request.target.decode("latin-1")).path
        if path == "/healthz":
            dead = self.health.dead
            return (200, _TEXT, b"ok\n") if dead is None else (500, _TEXT, f"dead: {dead}\n".encode())
        if path == "/readyz":
            ready, reasons = self.health.readiness()
            return (200, _TEXT, b"ready\n") if ready else (503, _TEXT, f"not ready: {', '.join(reasons)}\n".encode())
        if path == "/metrics":
            accept = next((v.decode("latin-1") for k, v in request.headers if k == b"accept"), "")
            encoder, content_type = choose_encoder(accept)
            return 200, [("content-type", content_type)], encoder(self.registry)
        return 404, _TEXT, b"not found: try /healthz, /readyz or /metrics\n"
