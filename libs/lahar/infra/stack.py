"""Start NATS and Redis, alone or together; use the servers of LAHAR_NATS_URL / LAHAR_REDIS_URL
instead when they are set."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from lahar.infra.errors import InfraError
from lahar.infra.servers import EmbeddedServer, ExternalServer, NatsServer, RedisServer, Server, backoff
from lahar.infra.settings import nats_url_setting, redis_url_setting

STARTUP_TIMEOUT = 10.0  # seconds; both servers start in well under one on a laptop
STOP_TIMEOUT = 5.0  # seconds of grace after SIGTERM before SIGKILL


def start_nats(data_dir: Path | None = None, *, url: str | None = None, timeout: float = STARTUP_TIMEOUT) -> Server:
    """A NATS server with JetStream, ready to use: the one at ``url`` or ``$LAHAR_NATS_URL`` if
    set, else our own on a free loopback port with its data in ``data_dir`` (default: temporary)."""
    external = nats_url_setting(url)
    return ExternalServer(external) if external else _started(NatsServer(data_dir), timeout)


def start_redis(data_dir: Path | None = None, *, url: str | None = None, timeout: float = STARTUP_TIMEOUT) -> Server:
    """A Redis-compatible server, ready to use: the one at ``url`` or ``$LAHAR_REDIS_URL`` if set,
    else our own valkey-server on a free loopback port, persistent only if ``data_dir`` is given."""
    external = redis_url_setting(url)
    return ExternalServer(external) if external else _started(RedisServer(data_dir), timeout)


def _started(server: EmbeddedServer, timeout: float) -> EmbeddedServer:
    try:
        server.spawn(timeout)
        server.wait_ready()
    except BaseException:  # a failure, or Ctrl-C while waiting: leave no process or temporary folder
        server.stop(timeout=1.0)
        raise
    return server


class Infra:
    """NATS and Redis together, started at once.  Use as ``with Infra() as infra:`` or
    ``async with Infra() as infra:``; ``infra.nats_url`` and ``infra.redis_url`` say where they are.

    Settings are checked when the object is made, so a bad URL fails before anything starts.
    With ``data_dir`` the servers keep their data in ``data_dir/nats`` and ``data_dir/redis``.
    Start it from a long-lived thread (see ``lahar.infra.process``): the async form therefore
    launches the servers on the event loop's thread and waits for them there without blocking.
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        nats_url: str | None = None,
        redis_url: str | None = None,
        timeout: float = STARTUP_TIMEOUT,
    ) -> None:
        self._data_dir = data_dir
        self._external = (nats_url_setting(nats_url), redis_url_setting(redis_url))
        self._timeout = timeout
        self._servers: tuple[Server, Server] | None = None

    @property
    def nats(self) -> Server:
        return self._started()[0]

    @property
    def redis(self) -> Server:
        return self._started()[1]

    @property
    def nats_url(self) -> str:
        return self.nats.url

    @property
    def redis_url(self) -> str:
        return self.redis.url

    @property
    def servers(self) -> tuple[Server, Server]:
        return self._started()

    def start(self) -> Infra:
        """Start both servers and return once both answer."""
        self._launch()
        with self._stopped_on_error():
            for server in self._embedded():
                server.wait_ready()
        return self

    async def astart(self) -> Infra:
        """``start()`` for asyncio: the loop keeps running while the servers come up."""
        self._launch()
        with self._stopped_on_error():
            for server in self._embedded():
                for delay in backoff():
                    if server.poll_ready():  # raises once the deadline has passed
                        break
                    await asyncio.sleep(delay)
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the servers we started (never external ones); safe to call more than once."""
        servers, self._servers = self._servers, None
        for server in servers or ():
            server.stop(timeout)

    def __enter__(self) -> Infra:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Infra:
        return await self.astart()

    async def __aexit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)  # stopping only signals and waits: any thread will do

    def __repr__(self) -> str:
        return f"Infra(servers={self._servers!r})"

    def _launch(self) -> None:
        if self._servers is not None:
            raise InfraError("Infra is already started")
        nats_url, redis_url = self._external
        folder = self._data_dir
        self._servers = (
            ExternalServer(nats_url) if nats_url else NatsServer(folder / "nats" if folder else None),
            ExternalServer(redis_url) if redis_url else RedisServer(folder / "redis" if folder else None),
        )
        # Launch both before waiting for either, so that their startups overlap.
        with self._stopped_on_error():
            for server in self._embedded():
                server.spawn(self._timeout)

    def _embedded(self) -> list[EmbeddedServer]:
        return [s for s in self._started() if isinstance(s, EmbeddedServer)]

    @contextmanager
    def _stopped_on_error(self) -> Iterator[None]:
        """Never leave half a pair running: any failure or interruption (Ctrl-C, task
        cancellation) while starting stops whatever had started."""
        try:
            yield
        except BaseException:
            self.stop(timeout=1.0)
            raise

    def _started(self) -> tuple[Server, Server]:
        if self._servers is None:
            raise InfraError("Infra is not started: call start() or use it as a context manager")
        return self._servers
