"""NATS JetStream: the streams Lahar uses, their identity, batched publishing and dead letters.

The stream policies are one table (``stream_configs``).  The CLUSTER stream carries an identity
(``lahar.id`` in its metadata, made when the stream is made): the Redis mirror records the
identity of the stream it reflects, so a reader can tell a mirror of *this* stream from one of
a stream that was lost and made again (docs/CONSISTENCY.md).  ``ensure_streams`` keeps an
existing identity when it brings a stream to the current policy, and makes missing streams again;
each stream is made and reconfigured by its owner only (``lahar.wire.access``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import nats.errors
import nats.js.api as jsapi
import nats.js.errors as jserrors
from nats.js.client import JetStreamContext

from lahar.wire.names import Names

log = logging.getLogger(__name__)

IDENTITY = "lahar.id"
DAY = 24 * 3600.0
CLUSTER_MAX_BYTES = 1 << 30  # a reader further behind than this reloads the mirror instead
WAIT_LOG_EVERY = 5.0  # seconds between "still waiting for a stream" lines
STREAM_POLL = 0.1  # seconds between looks for a stream another service makes
# What says a stream (or the bucket behind a KV) is gone: make it again.
MISSING = (jserrors.NoStreamResponseError, jserrors.NotFoundError, jserrors.ServiceUnavailableError)


@dataclass(frozen=True, slots=True)
class StreamIdentity:
    """Which CLUSTER stream is live, and how far it goes."""

    id: str
    first_seq: int
    last_seq: int


def stream_configs(names: Names, *, delta_max_age: float = DAY) -> list[jsapi.StreamConfig]:
    """Every stream Lahar uses, with its retention policy."""
    file = jsapi.StorageType.FILE
    return [
        jsapi.StreamConfig(
            name=names.cluster_stream,
            subjects=[names.delta_subjects],
            retention=jsapi.RetentionPolicy.LIMITS,
            max_age=delta_max_age,
            max_bytes=CLUSTER_MAX_BYTES,
            discard=jsapi.DiscardPolicy.OLD,
            duplicate_window=120.0,
            storage=file,
        ),
        jsapi.StreamConfig(
            name=names.decisions_stream,
            subjects=[names.decision_subjects],
            retention=jsapi.RetentionPolicy.WORK_QUEUE,
            duplicate_window=120.0,
            storage=file,
        ),
        jsapi.StreamConfig(
            name=names.results_stream,
            subjects=[names.result_subject],
            retention=jsapi.RetentionPolicy.LIMITS,
            max_age=600.0,
            storage=file,
        ),
        jsapi.StreamConfig(
            name=names.dead_letter_stream,
            subjects=[names.dead_letter_subjects],
            retention=jsapi.RetentionPolicy.LIMITS,
            max_age=7 * DAY,
            max_msgs=100_000,
            storage=file,
        ),
    ]


async def _ensure(js: JetStreamContext, config: jsapi.StreamConfig) -> None:
    assert config.name is not None
    try:
        info = await js.stream_info(config.name)
    except jserrors.NotFoundError:
        config.metadata = {IDENTITY: uuid.uuid4().hex}
        try:
            await js.add_stream(config)
            return
        except jserrors.BadRequestError:  # made meanwhile by another service: adopt its identity
            info = await js.stream_info(config.name)
    found = (info.config.metadata or {}).get(IDENTITY)
    config.metadata = {IDENTITY: found or uuid.uuid4().hex}
    if _differs(info.config, config):
        await js.update_stream(config)


def _differs(have: jsapi.StreamConfig, want: jsapi.StreamConfig) -> bool:
    fields = ("subjects", "retention", "max_age", "max_bytes", "max_msgs", "discard", "duplicate_window")
    if any(getattr(have, f) != getattr(want, f) for f in fields if getattr(want, f) is not None):
        return True
    return (have.metadata or {}).get(IDENTITY) != (want.metadata or {}).get(IDENTITY)


async def ensure_streams(
    js: JetStreamContext,
    names: Names,
    *,
    own: Collection[str] | None = None,
    need: Collection[str] = (),
    delta_max_age: float = DAY,
) -> None:
    """Create the streams this caller owns if missing (JetStream storage lost included) and bring
    them to the current policy, keeping their identity; then wait for the streams it ``need``s
    and does not own to be made by their owners.

    ``own`` names the streams this caller may create and reconfigure (None: every stream, for
    tools and tests that run as admin).  A service owns only its role's streams
    (``lahar.wire.access.owned_streams``): its NATS user may not create or update the others, so
    it only reads their info, and waits (saying so) while one is missing.
    """
    for config in stream_configs(names, delta_max_age=delta_max_age):
        if own is None or config.name in own:
            await _ensure(js, config)
    for stream in need:
        if own is None or stream not in own:
            await _wait_for_stream(js, stream)


async def _wait_for_stream(js: JetStreamContext, stream: str) -> None:
    since = logged = time.monotonic()
    while True:
        try:
            await js.stream_info(stream)
            return
        except MISSING:
            pass
        now = time.monotonic()
        if now - logged >= WAIT_LOG_EVERY:
            logged = now
            log.warning("waiting %.0f s for stream %s, made by the service that owns it", now - since, stream)
        await asyncio.sleep(STREAM_POLL)  # polling interval while another service makes the stream


async def cluster_identity(js: JetStreamContext, names: Names) -> StreamIdentity | None:
    """The live CLUSTER stream's identity and range, or None when it does not exist."""
    try:
        info = await js.stream_info(names.cluster_stream)
    except jserrors.NotFoundError:
        return None
    ident = (info.config.metadata or {}).get(IDENTITY, "")
    return StreamIdentity(ident, int(info.state.first_seq or 0), int(info.state.last_seq or 0))


async def stream_messages(js: JetStreamContext, stream: str) -> int:
    """How many messages a stream holds now (for a work queue: not yet acknowledged)."""
    info = await js.stream_info(stream)
    return int(info.state.messages or 0)


@dataclass(frozen=True, slots=True)
class Outgoing:
    subject: str
    data: bytes
    headers: dict[str, str] | None = None


async def publish_batch(js: JetStreamContext, batch: Sequence[Outgoing], timeout: float = 10.0) -> list[int]:
    """Publish with asynchronous acks and wait for all of them; returns each stream sequence."""
    futures = [await js.publish_async(m.subject, m.data, headers=m.headers) for m in batch]
    raise_if_cancelled()
    gathered = asyncio.gather(*futures)
    try:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
        # arrives as the acks complete, and the publisher then outlives its stop.
        async with asyncio.timeout(timeout):
            acks = await gathered
    except BaseException:
        # Cancelled (a stop) or timed out: the gather is cancelled and then holds a
        # CancelledError nobody reads, and asyncio logs "exception was never retrieved" for it.
        if gathered.done() and not gathered.cancelled():
            gathered.exception()
        raise
    return [ack.seq for ack in acks]


def raise_if_cancelled() -> None:
    """Stop a task whose cancellation a library swallowed.  nats-py's publish waits for its
    flusher in ``Client._flush_pending`` under ``except asyncio.CancelledError: pass``: a task
    cancelled there carries on, e.g. the cache's batcher went back to waiting for deltas and held
    its service's stop for 12 s.  The request stays counted in ``Task.cancelling()``."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def dead_letter(js: JetStreamContext, names: Names, source: str, data: bytes, why: str) -> None:
    """Keep an unusable message for inspection; never raise (a dead letter must not crash anyone)."""
    reason = why.replace("\r", " ").replace("\n", " ")[:1000]  # a header value is one line
    try:
        await js.publish(names.dead_letter_subject(source), data, headers={"Lahar-Reason": reason})
    except (nats.errors.Error, TimeoutError, OSError) as exc:
        log.error("could not dead-letter a message from %s: %r", source, exc)
