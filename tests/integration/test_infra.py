"""lahar.infra against real servers: they answer, tests are isolated, settings are honoured."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import redis.utils
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from lahar.infra import (
    NATS_CA_ENV,
    NATS_URL_ENV,
    REDIS_URL_ENV,
    EmbeddedServer,
    Infra,
    InfraError,
    start_nats,
    start_redis,
)
from lahar.infra.pytest_plugin import delete_nats_streams, delete_redis_keys


async def test_jetstream_stream_publish_and_consume(jetstream: JetStreamContext, lahar_prefix: str) -> None:
    stream = f"{lahar_prefix}_EVENTS"
    await jetstream.add_stream(name=stream, subjects=[f"{lahar_prefix}.events.>"])
    for i in range(3):
        ack = await jetstream.publish(f"{lahar_prefix}.events.{i}", f"m{i}".encode())
        assert (ack.stream, ack.seq) == (stream, i + 1)

    sub = await jetstream.pull_subscribe(f"{lahar_prefix}.events.>", durable="reader", stream=stream)
    msgs = await sub.fetch(3, timeout=5)
    assert [m.data for m in msgs] == [b"m0", b"m1", b"m2"]
    for m in msgs:
        await m.ack_sync()
    info = await jetstream.consumer_info(stream, "reader")
    assert (info.num_ack_pending, info.num_pending) == (0, 0)


async def test_redis_set_get_and_transaction(redis_client: aioredis.Redis, lahar_prefix: str) -> None:
    assert redis.utils.HIREDIS_AVAILABLE  # the client parses replies with hiredis
    await redis_client.set(f"{lahar_prefix}:k", b"v")
    assert await redis_client.get(f"{lahar_prefix}:k") == b"v"

    async with redis_client.pipeline(transaction=True) as pipe:
        pipe.hset(f"{lahar_prefix}:h", "pod", "node-1")
        pipe.incr(f"{lahar_prefix}:seq")
        pipe.hgetall(f"{lahar_prefix}:h")
        assert await pipe.execute() == [1, 1, {b"pod": b"node-1"}]


_seen_prefixes: list[str] = []


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_gets_its_own_prefix(lahar_prefix: str, run: int) -> None:
    assert re.fullmatch(r"t\d+_[0-9a-f]{8}", lahar_prefix), "must be a valid key part, subject token and stream name"
    assert lahar_prefix not in _seen_prefixes
    _seen_prefixes.append(lahar_prefix)


async def test_redis_cleanup_deletes_only_the_tests_keys(
    redis_client: aioredis.Redis, redis_url: str, lahar_prefix: str
) -> None:
    other = "t0_00000000:kept"  # another test's key
    await redis_client.set(f"{lahar_prefix}:a", 1)
    await redis_client.hset(f"{lahar_prefix}:b:c", "f", 1)
    await redis_client.set(other, 1)
    try:
        assert await delete_redis_keys(redis_url, lahar_prefix) == 2
        assert await redis_client.exists(f"{lahar_prefix}:a", f"{lahar_prefix}:b:c") == 0
        assert await redis_client.exists(other) == 1
    finally:
        await redis_client.delete(other)


async def test_nats_cleanup_deletes_only_the_tests_streams(
    jetstream: JetStreamContext, nats_url: str, nats_ca: str, lahar_prefix: str
) -> None:
    other = "t0_00000000_KEPT"
    await jetstream.add_stream(name=f"{lahar_prefix}_A", subjects=[f"{lahar_prefix}.a"])
    await jetstream.create_key_value(bucket=f"{lahar_prefix}_leases")
    await jetstream.add_stream(name=other, subjects=["t0_00000000.kept"])
    try:
        deleted = await delete_nats_streams(nats_url, lahar_prefix, ca=nats_ca)
        assert sorted(deleted) == sorted([f"{lahar_prefix}_A", f"KV_{lahar_prefix}_leases"])
        # The server is shared by the whole test session: other tests' streams may be there too.
        left = {i.config.name for i in await jetstream.streams_info()}
        assert other in left
        assert not {n for n in left if lahar_prefix in n}
    finally:
        await jetstream.delete_stream(other)


async def test_url_settings_are_used_instead_of_starting_servers(
    monkeypatch: pytest.MonkeyPatch,
    nats_url: str,
    nats_ca: str,
    redis_url: str,
    nats_client: NatsClient,
    redis_client: aioredis.Redis,
) -> None:
    monkeypatch.setenv(NATS_URL_ENV, nats_url)
    monkeypatch.setenv(REDIS_URL_ENV, redis_url)
    monkeypatch.setenv(NATS_CA_ENV, nats_ca)

    async with Infra() as infra:
        assert (infra.nats_url, infra.redis_url, infra.nats_ca) == (nats_url, redis_url, nats_ca)
        assert infra.client_env("scheduler")["LAHAR_NATS_URL"] == nats_url  # an external server's users are its own
        assert [s.pid for s in infra.servers] == [None, None]  # nothing started
    # Stopping that Infra must not have stopped the servers it was pointed at.
    assert await redis_client.ping()
    assert nats_client.is_connected
    await nats_client.flush(timeout=2)


def test_url_argument_wins_over_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(NATS_URL_ENV, "nats://127.0.0.1:1")
    monkeypatch.setenv(REDIS_URL_ENV, "redis://127.0.0.1:1/0")
    assert start_nats(url="nats://10.1.2.3:4222").url == "nats://10.1.2.3:4222"
    assert start_redis(url="redis://10.1.2.3:6379/2").url == "redis://10.1.2.3:6379/2"


@pytest.mark.parametrize(
    ("setting", "value", "complaint"),
    [
        (NATS_URL_ENV, "http://127.0.0.1:4222", "scheme must be one of nats://"),
        (NATS_URL_ENV, "nats://127.0.0.1:notaport", "port must be a number"),
        (NATS_URL_ENV, "nats://:4222", "names no host"),
        (REDIS_URL_ENV, "localhost:6379", "scheme must be one of redis://"),
        (REDIS_URL_ENV, "redis://127.0.0.1:99999/0", "port must be a number"),
    ],
)
def test_invalid_url_setting_is_rejected_naming_it(
    monkeypatch: pytest.MonkeyPatch, setting: str, value: str, complaint: str
) -> None:
    monkeypatch.setenv(setting, value)
    with pytest.raises(InfraError, match=f"^{setting}: ") as err:
        Infra()
    assert complaint in str(err.value)


def test_invalid_url_argument_is_rejected_without_its_password() -> None:
    with pytest.raises(InfraError, match=r"^redis_url: ") as err:
        start_redis(url="http://user:s3cret@127.0.0.1:6379")
    assert "s3cret" not in str(err.value)


@pytest.mark.usefixtures("no_url_settings")
async def test_data_dir_keeps_data_across_restarts(tmp_path: Path) -> None:
    async with Infra(tmp_path) as infra:
        client = aioredis.Redis.from_url(infra.redis_url)
        await client.set("kept", b"yes")
        await client.aclose()
        nc = await infra.connect_nats()
        await nc.jetstream().add_stream(name="KEPT", subjects=["kept.>"])
        await nc.jetstream().publish("kept.one", b"1")
        await nc.close()
    assert (tmp_path / "nats" / "jetstream").is_dir()
    assert (tmp_path / "redis" / "appendonlydir").is_dir()

    async with Infra(tmp_path) as infra:
        client = aioredis.Redis.from_url(infra.redis_url)
        assert await client.get("kept") == b"yes"
        await client.aclose()
        nc = await infra.connect_nats()
        assert (await nc.jetstream().stream_info("KEPT")).state.messages == 1
        await nc.close()


@pytest.mark.usefixtures("no_url_settings")
def test_temporary_data_folders_are_removed_on_stop() -> None:
    with Infra() as infra:
        folders = [s.data_dir for s in infra.servers if isinstance(s, EmbeddedServer)]
        assert len(folders) == 2
        assert all(f.is_dir() for f in folders)
    assert not any(f.exists() for f in folders)
