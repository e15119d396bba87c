"""Start NATS and Redis, alone or together; use the servers of LAHAR_NATS_URL / LAHAR_REDIS_URL
instead when they are set.

The servers ``Infra`` starts are never open: each role of ``lahar.wire.access`` has a user with its
permissions and a password made for this run, NATS requires TLS with a CA made for this run,
and Valkey's ``default`` user is off.  ``nats_url`` and ``redis_url`` log in as admin;
``client_env(role)`` gives a service the URLs of its own users."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from nats.aio.client import Client as NATS

from lahar.adapters.connect import connect_nats
from lahar.infra.auth import Credentials, with_user
from lahar.infra.certs import make_pair
from lahar.infra.errors import InfraError
from lahar.infra.servers import (
    EmbeddedServer,
    ExternalServer,
    NatsAccess,
    NatsServer,
    RedisAccess,
    RedisServer,
    Server,
    backoff,
)
from lahar.infra.settings import NATS_CA_ENV, nats_url_setting, redis_url_setting
from lahar.wire.access import ADMIN, NATS_ROLES, REDIS_ROLES
from lahar.wire.names import Names

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
        prefix: str = "lahar",
        nats_ca: str | None = None,
    ) -> None:
        self._data_dir = data_dir
        self._external = (nats_url_setting(nats_url), redis_url_setting(redis_url))
        self._timeout = timeout
        self._servers: tuple[Server, Server] | None = None
        self._names = Names(prefix)
        self.credentials = Credentials()  # this run's passwords, for the servers we start
        # The CA of an external NATS: given, or the one its clients are configured with.
        self._external_ca = nats_ca if nats_ca is not None else os.environ.get(NATS_CA_ENV, "")

    @property
    def nats(self) -> Server:
        return self._started()[0]

    @property
    def redis(self) -> Server:
        return self._started()[1]

    @property
    def nats_url(self) -> str:
        """The NATS URL, logged in as admin (an external server's URL as it was given)."""
        return self.url("nats", ADMIN)

    @property
    def redis_url(self) -> str:
        """The Redis URL, logged in as admin (an external server's URL as it was given)."""
        return self.url("redis", ADMIN)

    @property
    def nats_ca(self) -> str:
        """The CA certificate file that NATS clients verify the server with ("" for none)."""
        server = self.nats
        if isinstance(server, NatsServer):
            return str(server.ca_file or "")
        return self._external_ca

    def url(self, server: str, role: str) -> str:
        """The URL of ``server`` (``nats`` or ``redis``) for ``role``'s user.  A role with no user
        there gets the bare URL (it never connects); an external server's URL is used as given."""
        chosen = self.nats if server == "nats" else self.redis
        if not isinstance(chosen, EmbeddedServer):
            return chosen.url
        passwords = self.credentials.nats if server == "nats" else self.credentials.redis
        if role not in (NATS_ROLES if server == "nats" else REDIS_ROLES):
            return chosen.url
        return with_user(chosen.url, role, passwords[role])

    def client_env(self, role: str) -> dict[str, str]:
        """``LAHAR_NATS_URL``, ``LAHAR_REDIS_URL`` and ``LAHAR_NATS_CA`` for a ``role`` service."""
        return {
            "LAHAR_NATS_URL": self.url("nats", role),
            "LAHAR_REDIS_URL": self.url("redis", role),
            NATS_CA_ENV: self.nats_ca,
        }

    async def connect_nats(self, role: str = ADMIN, **options: object) -> NATS:
        """A NATS connection as ``role`` (admin by default), TLS verified with ``nats_ca``."""
        return await connect_nats(self.url("nats", role), ca=self.nats_ca, role=role, **options)

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
        certs = make_pair(["127.0.0.1", "localhost"], ca_name="lahar-nats-ca") if not nats_url else None
        nats_access = NatsAccess(self._names, self.credentials.nats, certs)
        redis_access = RedisAccess(self._names.redis_prefix, self.credentials.redis)
        self._servers = (
            ExternalServer(nats_url)
            if nats_url
            else NatsServer(folder / "nats" if folder else None, access=nats_access),
            ExternalServer(redis_url)
            if redis_url
            else RedisServer(folder / "redis" if folder else None, access=redis_access),
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
