"""NATS JetStream: the streams Lahar uses, batched publishing and dead letters."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import nats.js.api as jsapi
import nats.js.errors as jserrors
from nats.js.client import JetStreamContext

from lahar.wire.names import Names

log = logging.getLogger(__name__)


async def _ensure(js: JetStreamContext, config: jsapi.StreamConfig) -> None:
    try:
        await js.add_stream(config)
    except jserrors.BadRequestError:
        # Already there with a different configuration: bring it to this one.
        await js.update_stream(config)


async def ensure_streams(js: JetStreamContext, names: Names, *, delta_max_age: float = 24 * 3600) -> None:
    """Create (or update) the CLUSTER, DECISIONS, RESULTS and DEADLETTER streams."""
    await _ensure(
        js,
        jsapi.StreamConfig(
            name=names.cluster_stream,
            subjects=[names.delta_subjects],
            retention=jsapi.RetentionPolicy.LIMITS,
            max_age=delta_max_age,
            duplicate_window=120.0,
            storage=jsapi.StorageType.FILE,
        ),
    )
    await _ensure(
        js,
        jsapi.StreamConfig(
            name=names.decisions_stream,
            subjects=[names.decision_subjects],
            retention=jsapi.RetentionPolicy.WORK_QUEUE,
            duplicate_window=120.0,
            storage=jsapi.StorageType.FILE,
        ),
    )
    await _ensure(
        js,
        jsapi.StreamConfig(
            name=names.results_stream,
            subjects=[names.result_subject],
            retention=jsapi.RetentionPolicy.LIMITS,
            max_age=600.0,
            storage=jsapi.StorageType.FILE,
        ),
    )
    await _ensure(
        js,
        jsapi.StreamConfig(
            name=names.dead_letter_stream,
            subjects=[names.dead_letter_subjects],
            retention=jsapi.RetentionPolicy.LIMITS,
            max_age=7 * 24 * 3600.0,
            max_msgs=100_000,
            storage=jsapi.StorageType.FILE,
        ),
    )


@dataclass(frozen=True, slots=True)
class Outgoing:
    subject: str
    data: bytes
    headers: dict[str, str] | None = None


async def publish_batch(js: JetStreamContext, batch: Sequence[Outgoing], timeout: float = 10.0) -> list[int]:
    """Publish with asynchronous acks and wait for all of them; returns each stream sequence."""
    futures = [await js.publish_async(m.subject, m.data, headers=m.headers) for m in batch]
    acks = await asyncio.wait_for(asyncio.gather(*futures), timeout)
    return [ack.seq for ack in acks]


async def dead_letter(js: JetStreamContext, names: Names, source: str, data: bytes, why: str) -> None:
    """Keep an unusable message for inspection; never raise (a dead letter must not crash anyone)."""
    try:
        await js.publish(names.dead_letter_subject(source), data, headers={"Lahar-Reason": why[:1000]})
    except Exception:
        log.exception("could not dead-letter a message from %s", source)
