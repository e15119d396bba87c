"""pytest fixtures: one NATS and one Valkey for the whole session, each test isolated by a prefix.

Enable with ``pytest_plugins = ["lahar.infra.pytest_plugin"]`` in the root ``conftest.py``.

Starting servers per test would cost more than most tests, so the servers are shared and each
test gets its own namespace instead: ``lahar_prefix`` is unique per test and valid as a Redis key
part, a NATS subject token and a stream, consumer or KV bucket name.  A test keeps to it (keys
``f"{lahar_prefix}:..."``, subjects ``f"{lahar_prefix}.>"``, streams ``f"{lahar_prefix}_..."``), and
the client fixtures delete what it left under it.

The async fixtures run in the fixture event loop the project configures, so tests that use them
must run in that same loop (the project runs every test in the session loop; see tests/conftest.py).

The servers are secured as ``lahar up``'s are (``lahar.infra.stack``): ``nats_url`` and
``redis_url`` log in as admin, and NATS clients verify its TLS certificate with ``nats_ca``
(``nats_client`` does).

``LAHAR_NATS_URL`` / ``LAHAR_REDIS_URL`` (and ``LAHAR_NATS_CA``), when set, point the session at
existing servers.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
import redis.asyncio as aioredis
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from lahar.adapters.connect import connect_nats
from lahar.infra.stack import Infra

_test_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def lahar_infra() -> Iterator[Infra]:
    """NATS and Redis for the whole session; stopped, with no process left, when it ends."""
    # Started from the main thread on purpose: see lahar.infra.process on the parent-death signal.
    with Infra() as infra:
        yield infra


@pytest.fixture(scope="session")
def nats_url(lahar_infra: Infra) -> str:
    return lahar_infra.nats_url


@pytest.fixture(scope="session")
def nats_ca(lahar_infra: Infra) -> str:
    """The CA certificate file that verifies the NATS server ("" when it needs none)."""
    return lahar_infra.nats_ca


@pytest.fixture(scope="session")
def redis_url(lahar_infra: Infra) -> str:
    return lahar_infra.redis_url


@pytest.fixture
def lahar_prefix(request: pytest.FixtureRequest) -> str:
    """This test's namespace, e.g. ``t12_9f3a01bc``: the number makes it unique in the session,
    the digest of the test's id makes it traceable; no prefix is a prefix of another."""
    digest = hashlib.blake2s(request.node.nodeid.encode(), digest_size=4).hexdigest()
    return f"t{next(_test_numbers)}_{digest}"


@pytest_asyncio.fixture
async def redis_client(redis_url: str, lahar_prefix: str) -> AsyncIterator[aioredis.Redis]:
    """An asyncio Redis client (hiredis parser); the test's keys are deleted afterwards."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        yield client
    finally:
        await client.aclose()
        await delete_redis_keys(redis_url, lahar_prefix)


@pytest_asyncio.fixture
async def nats_client(nats_url: str, nats_ca: str, lahar_prefix: str) -> AsyncIterator[NatsClient]:
    """A connected NATS client (admin); the test's streams, KV buckets and object stores are
    deleted afterwards."""
    client = await connect_nats(nats_url, ca=nats_ca)
    try:
        yield client
    finally:
        await client.close()
        await delete_nats_streams(nats_url, lahar_prefix, ca=nats_ca)


@pytest.fixture
def jetstream(nats_client: NatsClient) -> JetStreamContext:
    """JetStream on ``nats_client``."""
    return nats_client.jetstream()


async def delete_redis_keys(url: str, prefix: str) -> int:
    """Delete every key that starts with ``prefix``; returns how many.  Uses its own connection,
    so it works whatever the test did to its client."""
    client = aioredis.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        return int(await client.unlink(*keys)) if keys else 0
    finally:
        await client.aclose()


async def delete_nats_streams(url: str, prefix: str, *, ca: str = "") -> list[str]:
    """Delete the streams named ``prefix…``, and the KV buckets and object stores (streams
    ``KV_prefix…``, ``OBJ_prefix…``) too; returns their names."""
    client = await connect_nats(url, ca=ca)
    try:
        js = client.jetstream()
        names = [info.config.name for info in await js.streams_info()]
        mine = [n for n in names if n and n.startswith((prefix, f"KV_{prefix}", f"OBJ_{prefix}"))]
        for name in mine:
            await js.delete_stream(name)
        return mine
    finally:
        await client.close()
