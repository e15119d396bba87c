"""The bus is authenticated and least-privilege: on servers secured as ``lahar up`` secures them
(one user per role from lahar.wire.access, TLS with a CA made for the run), a forged decision or
delta from the wrong user is refused and never stored, the right user's is stored, admission
cannot write the mirror, and a whole stack of role users still schedules a gang."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import nats
import nats.errors
import pytest
import pytest_asyncio
import redis.asyncio as aioredis
import redis.exceptions
from nats.aio.client import Client as NATS

from lahar.adapters.bus import ensure_streams, stream_messages
from lahar.adapters.connect import connect_nats
from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.adapters.mirror import Mirror, MirrorError
from lahar.infra import EmbeddedServer, Infra
from lahar.up.stack import LocalStack, StackConfig
from lahar.wire.messages import Delta, encode
from lahar.wire.names import Names

from .services import poll

PREFIX = "authz"
NAMES = Names(PREFIX)
REFUSED = 0.5  # seconds to wait for an acknowledgement that must not come


@pytest.fixture(scope="module")
def infra(no_url_settings_module: None) -> Iterator[Infra]:
    # Started from the main thread on purpose: see lahar.infra.process on the parent-death signal.
    with Infra(prefix=PREFIX) as started:
        yield started


@pytest.fixture(scope="module")
def no_url_settings_module() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        for name in ("LAHAR_NATS_URL", "LAHAR_REDIS_URL", "LAHAR_NATS_CA"):
            patch.delenv(name, raising=False)
        yield


@pytest_asyncio.fixture
async def streams(infra: Infra) -> AsyncIterator[NATS]:
    """An admin connection, with every stream made and emptied of what an earlier test left."""
    nc = await infra.connect_nats()
    js = nc.jetstream()
    await ensure_streams(js, NAMES)
    for stream in (NAMES.cluster_stream, NAMES.decisions_stream, NAMES.results_stream):
        await js.purge_stream(stream)
    try:
        yield nc
    finally:
        await nc.close()


class Violations:
    """The asynchronous errors the server sent one connection (permission violations)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def record(self, err: Exception) -> None:
        self.seen.append(str(err))

    def refused(self) -> bool:
        return any("permissions violation" in s for s in self.seen)


async def _as(infra: Infra, role: str) -> tuple[NATS, Violations]:
    errors = Violations()
    return await infra.connect_nats(role, error_cb=errors.record), errors


async def _stored(role_nc: NATS, subject: str, data: bytes) -> bool:
    """Whether ``role_nc`` gets ``data`` on ``subject`` stored (acknowledged by JetStream)."""
    try:
        await role_nc.jetstream(timeout=REFUSED).publish(subject, data)
    except nats.errors.TimeoutError:
        return False
    return True


async def test_only_the_scheduler_may_publish_or_replay_a_decision(infra: Infra, streams: NATS) -> None:
    forged = b'{"v":1,"kind":"bind","fence":9223372036854775807}'
    js = streams.jetstream()
    for role in ("cache", "binder", "controller"):
        nc, errors = await _as(infra, role)
        try:
            assert not await _stored(nc, NAMES.decision_subject("bind"), forged), role
            await poll(errors.refused, timeout=5)
        finally:
            await nc.close()
    assert await stream_messages(js, NAMES.decisions_stream) == 0  # nothing forged reached the binders
    scheduler, _ = await _as(infra, "scheduler")
    try:
        assert await _stored(scheduler, NAMES.decision_subject("bind"), b'{"v":1,"kind":"bind","fence":3}')
    finally:
        await scheduler.close()
    assert await stream_messages(js, NAMES.decisions_stream) == 1
    # A real decision, captured and replayed by another user, is refused like a forged one.
    real = await js.get_msg(NAMES.decisions_stream, seq=1)
    binder, _ = await _as(infra, "binder")
    try:
        assert not await _stored(binder, real.subject or "", real.data or b"")
    finally:
        await binder.close()
    assert await stream_messages(js, NAMES.decisions_stream) == 1


async def test_only_the_cache_may_publish_a_delta(infra: Infra, streams: NATS) -> None:
    delta = encode(Delta(kind="nodes", op="DELETED", key="n1", rv="1"))
    js = streams.jetstream()
    for role in ("scheduler", "binder", "controller"):
        nc, errors = await _as(infra, role)
        try:
            assert not await _stored(nc, NAMES.delta_subject("nodes"), delta), role
            await poll(errors.refused, timeout=5)
        finally:
            await nc.close()
    assert await stream_messages(js, NAMES.cluster_stream) == 0
    cache, _ = await _as(infra, "cache")
    try:
        assert await _stored(cache, NAMES.delta_subject("nodes"), delta)
    finally:
        await cache.close()
    assert await stream_messages(js, NAMES.cluster_stream) == 1


async def test_no_service_may_write_another_ones_lease(infra: Infra, streams: NATS) -> None:
    """A forged scheduler lease would move the epoch binders check decisions against."""
    kv = await streams.jetstream().create_key_value(bucket=NAMES.leader_bucket, history=1)
    try:
        for role in ("cache", "binder", "controller"):
            nc, _ = await _as(infra, role)
            try:
                key = f"$KV.{NAMES.leader_bucket}.{NAMES.scheduler_lease}"
                assert not await _stored(nc, key, b'{"holder":"forger","epoch":1}'), role
            finally:
                await nc.close()
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await kv.get(NAMES.scheduler_lease)
    finally:
        await streams.jetstream().delete_key_value(NAMES.leader_bucket)


async def test_a_service_makes_only_its_own_streams(infra: Infra, streams: NATS) -> None:
    js = streams.jetstream()
    await js.delete_stream(NAMES.decisions_stream)
    binder, errors = await _as(infra, "binder")
    try:
        # The binder may not make the work queue: it waits for the scheduler, without an error.
        waiting = asyncio.create_task(
            ensure_streams(binder.jetstream(), NAMES, own=frozenset(), need=[NAMES.decisions_stream])
        )
        await asyncio.sleep(0.3)  # long enough for a create attempt to be refused
        assert not waiting.done() and not errors.seen
        scheduler, _ = await _as(infra, "scheduler")
        try:
            mine = {NAMES.decisions_stream, NAMES.results_stream, NAMES.dead_letter_stream}
            await ensure_streams(scheduler.jetstream(), NAMES, own=mine)
        finally:
            await scheduler.close()
        await asyncio.wait_for(waiting, timeout=5)
    finally:
        await binder.close()


async def test_a_wrong_password_or_no_tls_is_refused(infra: Infra) -> None:
    url = infra.url("nats", "scheduler").replace(infra.credentials.nats["scheduler"], "wrong")
    with pytest.raises(nats.errors.Error, match=r"[Aa]uthorization"):
        await connect_nats(url, ca=infra.nats_ca, role="scheduler", allow_reconnect=False)
    with pytest.raises(ssl.SSLError):  # a client that does not know the run's CA trusts nothing
        await nats.connect(infra.nats_url, allow_reconnect=False, tls=ssl.create_default_context())


async def test_admission_reads_the_mirror_but_cannot_write_it(infra: Infra) -> None:
    admin = aioredis.from_url(infra.redis_url)
    admission = aioredis.from_url(infra.url("redis", "admission"))
    try:
        await admin.hset(f"{PREFIX}:mirror:queues", "q", b"{}")
        assert await admission.hget(f"{PREFIX}:mirror:queues", "q") == b"{}"
        with pytest.raises(redis.exceptions.NoPermissionError):
            await admission.hset(f"{PREFIX}:mirror:queues", "q", b"forged")
        with pytest.raises(redis.exceptions.NoPermissionError):
            await admission.flushall()
        assert await admin.hget(f"{PREFIX}:mirror:queues", "q") == b"{}"
    finally:
        await admin.delete(f"{PREFIX}:mirror:queues")
        await admin.aclose()
        await admission.aclose()


async def test_only_the_cache_writes_the_mirror_and_leaders_record_their_epochs(infra: Infra) -> None:
    delta = Delta(kind="nodes", op="DELETED", key="n1", rv="1")
    scheduler = aioredis.from_url(infra.url("redis", "scheduler"))
    cache = aioredis.from_url(infra.url("redis", "cache"))
    anonymous = aioredis.from_url(infra.url("redis", "binder"))  # binders have no Valkey user
    try:
        as_scheduler = Mirror(scheduler, PREFIX)
        with pytest.raises((redis.exceptions.NoPermissionError, MirrorError, redis.exceptions.ResponseError)):
            await as_scheduler.reset(fence=1, seq=0)  # the script's writes are checked too
        await as_scheduler.record_epoch("scheduler", 7)
        assert await as_scheduler.epoch_floor() == 7
        await Mirror(cache, PREFIX).reset(fence=1, seq=0)
        await Mirror(cache, PREFIX).apply([delta], 1, stream="s", fence=1, building=True)
        assert await as_scheduler.seq() == 1
        with pytest.raises(redis.exceptions.AuthenticationError):
            await anonymous.ping()
    finally:
        admin = aioredis.from_url(infra.redis_url)
        await admin.delete(*[k async for k in admin.scan_iter(match=f"{PREFIX}:*")])
        for client in (admin, scheduler, cache, anonymous):
            await client.aclose()


# -- a whole stack of role users ----------------------------------------------------------------


@pytest.fixture(scope="module")
def role_stack(tmp_path_factory: pytest.TempPathFactory, no_url_settings_module: None) -> Iterator[LocalStack]:
    """Every service as `lahar up` runs it, each with its own users, on servers the stack starts."""
    cfg = StackConfig(
        state_dir=tmp_path_factory.mktemp("roles"),
        nodes=("4:cpu=8,memory=16Gi,pods=110",),
        binders=1,
        max_binders=1,
        period=0.3,
        traces=False,
    )
    running = LocalStack(cfg).start(timeout=120)
    try:
        yield running
    finally:
        running.stop()


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "annotations": {"scheduling.k8s.io/group-name": "pg"}},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


@pytest.mark.slow
async def test_a_stack_of_role_users_schedules_a_gang(role_stack: LocalStack) -> None:
    assert role_stack.infra is not None
    env = role_stack.env("binder")
    assert env["LAHAR_NATS_URL"].startswith("tls://binder:") and env["LAHAR_NATS_CA"]
    kube = KubeClient(KubeConfig.load(role_stack.kubeconfig))
    try:
        await poll(lambda: _exists(kube, "queues", "", "default"), timeout=20)
        group = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "default"},
            "spec": {"minMember": 3, "queue": "default"},
        }
        # Admitted once admission (its read-only Valkey user) sees the queue in the mirror.
        await poll(lambda: _created(kube, "podgroups", group), timeout=20, interval=0.1)
        for i in range(3):
            await kube.create("pods", "default", _pod(f"w-{i}"))

        async def bound() -> bool:
            pods = [json.loads(await kube.get("pods", "default", f"w-{i}")) for i in range(3)]
            return all(p["spec"].get("nodeName") for p in pods)

        await poll(bound, timeout=30, interval=0.1)
    finally:
        await kube.close()
    nats_server = role_stack.infra.nats
    assert isinstance(nats_server, EmbeddedServer)
    assert "Violation" not in nats_server.log_path.read_text(), "a service was refused something its code does"


async def _created(kube: KubeClient, kind: str, obj: dict[str, Any]) -> bool:
    from lahar.adapters.kube import PermanentKubeError

    try:
        await kube.create(kind, obj["metadata"]["namespace"], obj)
    except PermanentKubeError as exc:
        if "unable to find queue" in str(exc):
            return False  # the mirror admission reads is a moment behind the API
        raise
    return True


async def _exists(kube: KubeClient, kind: str, namespace: str, name: str) -> bool:
    from lahar.adapters.kube import NotFound

    try:
        await kube.get(kind, namespace, name)
    except NotFound:
        return False
    return True
