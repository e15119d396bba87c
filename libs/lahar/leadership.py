"""Running a service's active part only while this replica holds the lease (cache, scheduler)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from nats.js.client import JetStreamContext

from lahar.wire.names import Names

log = logging.getLogger("lahar.leader")
T = TypeVar("T")


async def lead(
    js: JetStreamContext,
    names: Names,
    role: str,
    identity: str,
    ttl: float,
    stop: asyncio.Event,
    act: Callable[[asyncio.Event, int], Awaitable[None]],
    campaigning: asyncio.Event | None = None,
    *,
    epoch_floor: Callable[[], Awaitable[int]] | None = None,
    key: str | None = None,
    on_start: Callable[[Any], None] | None = None,
) -> None:
    """Campaign for ``role``; while leading, run ``act(lost_or_stop, fencing_token)``.

    ``campaigning`` is set once this replica is a candidate (the lease bucket is usable), so a
    readiness check can tell a waiting standby from a replica that cannot campaign at all.
    ``epoch_floor`` returns the highest epoch ever granted (kept in Redis), so a lease bucket
    that must be made again never grants an older one.  Standbys retry every ttl/4 (at most
    0.5 s), so a crashed leader is replaced within about ttl + 0.5 s.

    ``act`` must return promptly once its event is set (leadership lost, or shutting down).
    Leadership can come back later: ``act`` is then run again.
    """
    from lahar.adapters.leader import LeaderElection  # type: ignore[import-not-found,unused-ignore]

    # The lease TTL is deployment configuration: the replica started last sets it for the bucket.
    election = LeaderElection(
        js,
        names.leader_bucket,
        key or role,
        identity=identity,
        ttl=ttl,
        retry_interval=min(ttl / 4, 0.5),
        reconfigure=True,
        epoch_floor=epoch_floor,
    )
    if on_start is not None:
        on_start(election)  # the caller may check ``election.is_leader`` before each act
    async with election:
        if campaigning is not None:
            campaigning.set()
        while not stop.is_set():
            token = await _until(election.wait_until_leader(), stop)
            if token is None:
                return
            log.info("%s: %s leads (fence %d)", role, identity, token)
            ended = asyncio.Event()
            watcher = asyncio.create_task(_flag_when(election.wait_until_lost(), stop, ended))
            try:
                await act(ended, token)
            finally:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            if not stop.is_set():
                log.warning("%s: %s lost the lease; standing by", role, identity)


async def _flag_when(work: Awaitable[object], stop: asyncio.Event, flag: asyncio.Event) -> None:
    await _until(work, stop)
    flag.set()


def either(a: asyncio.Event, b: asyncio.Event) -> asyncio.Event:
    """An event that is set as soon as either of two is."""
    both = asyncio.Event()

    async def relay(e: asyncio.Event) -> None:
        await e.wait()
        both.set()

    loop = asyncio.get_running_loop()
    for e in (a, b):
        task = loop.create_task(relay(e))
        _relays.add(task)
        task.add_done_callback(_relays.discard)
    return both


_relays: set[asyncio.Task[None]] = set()


async def _until(work: Awaitable[T], stop: asyncio.Event) -> T | None:
    """``work``'s result, or None if ``stop`` is set first."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task in done:
        return task.result()
    task.cancel()
    # Stopping: whatever the work ended with (cancelled, or an error in the same instant) is moot.
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return None
