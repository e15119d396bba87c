"""Following the cluster as the cache publishes it: the mirror at sequence S, then the CLUSTER
stream from S+1 (the scheduler and the controller both read the cluster this way).

The rules (docs/CONSISTENCY.md):

* **Identity.**  The mirror is loaded only when it names the live stream and is not ahead of
  it; otherwise (being rebuilt, flushed, or of a lost stream) the follower waits, saying so.  A
  guard checks the live stream's identity every ``guard_period``: a replaced stream means
  loading again.
* **No gap, no repeat.**  Deltas are applied in stream order; one at or below the applied
  sequence is skipped, a gap means loading the mirror again.
* **Epochs.**  A delta of an older cache epoch than one already seen comes from a deposed
  leader still draining its queue: ignored (its successor relists, so nothing is lost).
* **Poison is contained.**  A message that does not decode, a delta without the object its
  operation needs, or a delta the reader's ``apply`` raises on, is counted, dead-lettered and
  skipped; the sequence still advances.

The reader gives ``load(state)`` (replace the whole view) and ``apply(delta, headers)`` (one
delta, synchronous), both called with ``lock`` held, and ``applied()`` after each batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from prometheus_client import Counter

from lahar.adapters.bus import cluster_identity, dead_letter, ensure_streams
from lahar.adapters.mirror import Mirror, MirrorState
from lahar.wire.messages import BadMessage, Delta, decode_delta
from lahar.wire.names import Names

log = logging.getLogger(__name__)

BATCH = 512
WAIT_LOG_EVERY = 5.0  # seconds between "still waiting for the mirror" lines

Load = Callable[[MirrorState], Awaitable[None] | None]
Apply = Callable[[Delta, dict[str, str] | None], None]


class Resync(Exception):
    """Load the mirror again (a gap, or the stream was replaced)."""


class Resubscribe(Exception):
    """The consumer is gone (NATS restarted and forgot it): subscribe again after what was applied."""


class Follower:
    def __init__(
        self,
        js: JetStreamContext,
        mirror: Mirror,
        names: Names,
        *,
        kinds: Iterable[str],
        source: str,
        load: Load,
        apply: Apply,
        bad: Counter,
        lock: asyncio.Lock | None = None,
        applied: Callable[[], None] = lambda: None,
        guard_period: float = 1.0,
        own: Collection[str] | None = None,
    ) -> None:
        self.js, self.mirror, self.names = js, mirror, names
        self.kinds = frozenset(kinds)
        self.source = source
        self._load, self._apply, self._applied = load, apply, applied
        self.bad = bad  # a Counter with one label: why
        self.lock = lock or asyncio.Lock()
        self.guard_period = guard_period
        self.own = own  # the streams this reader may make (lahar.bus.ensure_streams); None: all
        self.seq = 0  # the stream sequence of the last delta applied (or loaded)
        self.epoch = 0  # the newest cache epoch seen
        self.stream = ""  # the identity of the stream followed
        self.loads = 0
        self.ready = asyncio.Event()  # a mirror was loaded and is being followed
        self.inbox: asyncio.Queue[Msg] = asyncio.Queue()
        self._sub: Any = None

    # -- the loop ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """Load, follow, and load again after a gap or a replaced stream; never returns."""
        while True:
            await self._sync()
            while True:
                try:
                    await self._follow()
                except Resync as why:
                    log.warning("%s: %s; loading the mirror again", self.source, why)
                    break
                except Resubscribe as why:
                    log.warning("%s: %s; following again from %d", self.source, why, self.seq + 1)
                    await self._unsubscribe()
                    await self._subscribe(self.seq + 1)

    async def caught_up(self) -> bool:
        """Whether every delta in the stream now has been applied."""
        if self._sub is None or not self.ready.is_set() or not self.inbox.empty():
            return False
        try:
            info = await self._sub.consumer_info()
        except (nats.errors.Error, TimeoutError):
            return False
        return int(info.num_pending or 0) == 0 and self.inbox.empty()

    async def _sync(self) -> None:
        await self._unsubscribe()
        self.ready.clear()
        state = await self._wait_for_mirror()
        async with self.lock:
            got = self._load(state)
            if got is not None:
                await got
            self.seq, self.epoch, self.stream = state.seq, state.fence, state.stream
            self.inbox = asyncio.Queue()
        self.loads += 1
        await self._subscribe(state.seq + 1)
        self.ready.set()

    async def _subscribe(self, start: int) -> None:
        self._sub = await self.js.subscribe(
            self.names.delta_subjects,
            stream=self.names.cluster_stream,
            cb=self._queue,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start),
        )

    async def _wait_for_mirror(self) -> MirrorState:
        """The mirror, once it reflects the live stream."""
        since = time.monotonic()
        logged = since
        while True:
            live = await cluster_identity(self.js, self.names)
            if live is None:
                await ensure_streams(self.js, self.names, own=self.own, need=[self.names.cluster_stream])
                continue
            state = await self.mirror.load(self.kinds)
            if state.stream and state.stream == live.id and state.seq <= live.last_seq:
                return state
            now = time.monotonic()
            if now - logged >= WAIT_LOG_EVERY:
                logged = now
                log.warning(
                    "%s: waiting %.0f s for the cache to rebuild the mirror "
                    "(it reflects %r at %d; the stream is %s at %d)",
                    self.source,
                    now - since,
                    state.stream,
                    state.seq,
                    live.id,
                    live.last_seq,
                )
            await asyncio.sleep(0.1)  # polling interval while the mirror is rebuilt

    async def _queue(self, msg: Msg) -> None:
        """The subscription's callback only queues: nats-py drains a backlog of callbacks without
        yielding to the event loop, which would starve every other task for seconds."""
        self.inbox.put_nowait(msg)

    async def _follow(self) -> None:
        guard = asyncio.create_task(self._guard())
        try:
            while True:
                getter = asyncio.ensure_future(self.inbox.get())
                done, _ = await asyncio.wait({getter, guard}, return_when=asyncio.FIRST_COMPLETED)
                if guard in done:
                    getter.cancel()
                    guard.result()  # raises Resync (or what broke the guard)
                batch = [getter.result()]
                while len(batch) < BATCH and not self.inbox.empty():
                    batch.append(self.inbox.get_nowait())
                await self._apply_batch(batch)
                await asyncio.sleep(0)  # yield between batches
        finally:
            guard.cancel()

    async def _guard(self) -> None:
        while True:
            await asyncio.sleep(self.guard_period)  # the guard's period
            try:
                live = await cluster_identity(self.js, self.names)
            except (nats.errors.Error, TimeoutError) as exc:
                log.info("%s: cannot check the stream (%r)", self.source, exc)
                continue
            if live is None or live.id != self.stream:
                raise Resync(f"the CLUSTER stream was replaced ({self.stream} -> {live and live.id})")
            if live.last_seq < self.seq:
                raise Resync(f"the stream ends at {live.last_seq}, before what was applied ({self.seq})")
            await self._check_consumer()

    async def _check_consumer(self) -> None:
        """A restarted server forgets ordered consumers; nats-py notices only after missed
        heartbeats (over 10 s), so ask."""
        if self._sub is None:
            return
        try:
            await self._sub.consumer_info()
        except nats.js.errors.NotFoundError:
            raise Resubscribe("the stream's consumer is gone") from None
        except (nats.errors.Error, TimeoutError) as exc:
            log.info("%s: cannot check the consumer (%r)", self.source, exc)

    async def _apply_batch(self, batch: list[Msg]) -> None:
        poison: list[tuple[Msg, str]] = []
        async with self.lock:
            for msg in batch:
                why = self._one(msg)
                if why:
                    poison.append((msg, why))
            self._applied()
        for msg, why in poison:
            await dead_letter(self.js, self.names, self.source, msg.data, why)

    def _one(self, msg: Msg) -> str:
        """Apply one message; the reason it is poison, or ""."""
        seq = msg.metadata.sequence.stream
        if seq <= self.seq:
            return ""  # already in the view (loaded from the mirror)
        if seq != self.seq + 1:
            raise Resync(f"delta stream gap: expected {self.seq + 1}, got {seq}")
        self.seq = seq
        try:
            delta = decode_delta(msg.data)
        except BadMessage as exc:
            return self._poison("malformed", f"sequence {seq}: {exc}")
        if delta.op != "DELETED" and not delta.has_object:
            return self._poison("no_object", f"sequence {seq}: {delta.op} {delta.kind} {delta.key} without its object")
        if delta.epoch < self.epoch:
            self.bad.labels("stale_epoch").inc()
            return ""  # a deposed cache leader's: not dead-lettered, it is not malformed
        self.epoch = delta.epoch
        if delta.kind not in self.kinds:
            return ""
        try:
            self._apply(delta, msg.headers)
        except Exception as exc:  # poison: contained per delta, the rest of the stream goes on
            return self._poison("apply", f"sequence {seq}: {delta.kind} {delta.key}: {exc!r}")
        return ""

    def _poison(self, why: str, text: str) -> str:
        self.bad.labels(why).inc()
        log.error("%s: unusable delta, skipped: %s", self.source, text)
        return text

    async def _unsubscribe(self) -> None:
        sub, self._sub = self._sub, None
        if sub is not None:
            try:
                await sub.unsubscribe()
            except (nats.errors.Error, TimeoutError) as exc:
                log.info("%s: unsubscribe failed (%r)", self.source, exc)
