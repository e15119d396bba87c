"""Leader election on a NATS JetStream key-value lease (scheduler and controller run one leader).

    election = LeaderElection(js, "lahar_leaders", "scheduler", identity=default_identity(), ttl=10)
    async with election:                        # campaigns in the background; releases on exit
        token = await election.wait_until_leader()
        ...act, stamping ``token`` on what you write, while ``election.is_leader``...
        await election.wait_until_lost()        # or on_lost=..., then stop acting at once

How it works (the pattern of ripienaar/nats-kv-leader-elect, checked in docs/ecosystem.md §3.2):

* The lease is one key in a bucket with ``history=1`` and ``ttl``: the stream's max age, so the
  key disappears ``ttl`` seconds after its last write.  (Per-key TTLs would need ``msg_ttl`` on
  every renewal, which nats-py's ``update`` does not take; with one message per key the bucket's
  max age gives the same lease.)
* ``kv.create`` succeeds for one candidate only.  The revision it returns is the **fencing
  token**: revisions are the bucket stream's sequence, so a later leader always holds a larger one.
* The leader renews every ``renew_interval`` (default ttl/3) with ``update(last=revision)``.  A
  renewal that fails, or cannot finish before the lease would run out, ends the leadership at
  once; ``is_leader`` also turns false by itself when the lease runs out locally (a stalled
  event loop), measured from *before* the request, so the local lease ends no later than the
  server's.
* Standbys try ``create`` every ``retry_interval`` (default ttl/3) and watch the key, so a
  graceful release (a delete with ``last=revision``) hands over at once and an expired lease
  within about a retry interval.

Epochs (the consistency contract, docs/CONSISTENCY.md):

* The key's value is ``{"holder": identity, "epoch": E}``.  An acquisition writes ``epoch: 0``,
  which means "the revision of this very entry"; renewals write the epoch explicitly.  So the
  epoch of the current holder can be read from the key by anyone (``read_lease``), and a binder
  compares a decision's fence with it for *equality*, never with the highest fence it has seen.
* A replica restarted with the same identity finds its own name in the key and takes the lease
  back at once with a new epoch (an ``update`` on the revision it read), instead of waiting for
  its previous life's lease to run out.
* A missing bucket (JetStream storage lost) is created again, starting its sequence above
  ``epoch_floor()`` (the highest epoch ever granted, kept outside NATS by the caller), so epochs
  never go backwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Self

import msgspec
import nats.errors
import nats.js.api as jsapi
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

__all__ = [
    "LeaderElection",
    "LeaderElectionError",
    "Lease",
    "default_identity",
    "ensure_lease_bucket",
    "read_lease",
]

log = logging.getLogger(__name__)

_BUCKET_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
_KEY_RE = re.compile(r"^[-/_=a-zA-Z0-9]+(\.[-/_=a-zA-Z0-9]+)*$")
# What a NATS call can fail with that is worth retrying: connection, timeout and server errors.
_TRANSIENT = (nats.errors.Error, TimeoutError)
# What says the bucket itself is gone (JetStream storage lost): create it again.
_MISSING = (
    nats.js.errors.NoStreamResponseError,
    nats.errors.NoRespondersError,
    nats.js.errors.BucketNotFoundError,
    nats.js.errors.NotFoundError,
)
EpochFloor = Callable[[], Awaitable[int]]


class Lease(msgspec.Struct):
    """The value of a lease key: who holds it, and since which epoch (0: this entry's revision)."""

    holder: str
    epoch: int = 0


_lease_decoder = msgspec.json.Decoder(Lease)


def _decode_lease(value: bytes | None, revision: int) -> Lease:
    try:
        lease = _lease_decoder.decode(value or b"")
    except (msgspec.DecodeError, msgspec.ValidationError):
        # Not ours to read (an older format or a stray write): the holder is the raw text.
        lease = Lease(holder=(value or b"").decode(errors="replace"))
    return Lease(holder=lease.holder, epoch=lease.epoch or revision)


async def read_lease(kv: KeyValue, key: str) -> Lease | None:
    """The current holder and epoch of ``key``, or None when nobody holds it."""
    try:
        entry = await kv.get(key)
    except nats.js.errors.KeyNotFoundError:
        return None
    if entry.revision is None or entry.operation in (KV_DEL, KV_PURGE):
        return None
    return _decode_lease(entry.value, entry.revision)


class LeaderElectionError(ValueError):
    """A bad argument, or a bucket whose configuration cannot hold a lease; the message says which."""


def default_identity() -> str:
    """``host-pid``: unique per process on a cluster, and readable in ``current_leader()``."""
    return f"{socket.gethostname()}-{os.getpid()}"


async def ensure_lease_bucket(
    js: JetStreamContext, bucket: str, ttl: float, *, reconfigure: bool = False, floor: int = 0
) -> KeyValue:
    """The bucket, created with ``history=1`` and ``ttl`` if missing (several candidates may
    create it at once: identical creates succeed).  A bucket created here starts its revisions
    above ``floor``, so a lost and recreated bucket never hands out an epoch granted before.

    An existing bucket with another configuration is an error, unless ``reconfigure``: then it is
    changed to this one, so that a rollout of a new lease TTL (or a restart on old state) takes
    effect rather than stopping every replica.  Replicas still on the old TTL renew every third of
    it, so they keep their lease as long as the new TTL exceeds that.
    """
    try:
        kv = await js.key_value(bucket)
    except nats.js.errors.BucketNotFoundError:
        try:
            await js.add_stream(_bucket_config(bucket, ttl, floor))
            return await js.key_value(bucket)
        except nats.js.errors.BadRequestError:  # made meanwhile with another configuration
            kv = await js.key_value(bucket)
    status = await kv.status()
    if status.history == 1 and status.ttl is not None and abs(status.ttl - ttl) <= 1e-3:
        return kv
    found = f"bucket {bucket!r}: exists with ttl={status.ttl}s and history={status.history}"
    if not reconfigure:
        raise LeaderElectionError(
            f"{found}; a lease of ttl={ttl}s needs ttl={ttl}s and history=1 (use another bucket or the same ttl)"
        )
    log.warning("%s; changing it to ttl=%ss and history=1", found, ttl)
    info = await js.stream_info(f"KV_{bucket}")
    config = info.config
    config.max_age, config.max_msgs_per_subject = ttl, 1
    await js.update_stream(config)
    return await js.key_value(bucket)


def _bucket_config(bucket: str, ttl: float, floor: int) -> jsapi.StreamConfig:
    """What ``create_key_value(history=1, ttl=ttl)`` makes, plus a first sequence above ``floor``
    (nats-py's helper cannot set one)."""
    return jsapi.StreamConfig(
        name=f"KV_{bucket}",
        subjects=[f"$KV.{bucket}.>"],
        max_msgs_per_subject=1,
        max_age=ttl,
        discard=jsapi.DiscardPolicy.NEW,
        allow_rollup_hdrs=True,
        deny_delete=True,
        allow_direct=True,
        storage=jsapi.StorageType.FILE,
        first_seq=floor + 1 if floor > 0 else None,
    )


class LeaderElection:
    """One candidate for the lease ``bucket``/``key``; see the module docstring.

    Callbacks ``on_elected(token)`` and ``on_lost()`` run synchronously in the event loop at each
    change, so they should only flip state or set events; an exception in one is logged.
    """

    def __init__(
        self,
        js: JetStreamContext,
        bucket: str,
        key: str,
        identity: str,
        ttl: float = 10.0,
        *,
        renew_interval: float | None = None,
        retry_interval: float | None = None,
        on_elected: Callable[[int], None] | None = None,
        on_lost: Callable[[], None] | None = None,
        reconfigure: bool = False,
        epoch_floor: EpochFloor | None = None,
    ) -> None:
        self._reconfigure = reconfigure
        self._epoch_floor = epoch_floor
        self._renew_interval = ttl / 3 if renew_interval is None else renew_interval
        self._retry_interval = ttl / 3 if retry_interval is None else retry_interval
        _check_arguments(bucket, key, identity, ttl, self._renew_interval, self._retry_interval)
        self._js, self._bucket, self._key, self._identity, self._ttl = js, bucket, key, identity, ttl
        self._on_elected, self._on_lost = on_elected, on_lost
        self._kv: KeyValue | None = None
        self._token: int | None = None  # the epoch: the revision at acquisition
        self._revision: int | None = None  # the revision of our last write
        self._lease_end = 0.0  # time.monotonic() after which the server may have dropped our key
        self._elected, self._lost = asyncio.Event(), asyncio.Event()
        self._lost.set()
        self._wake = asyncio.Event()  # the key was deleted: try now, not at the next retry
        self._lock = asyncio.Lock()  # one KV write of ours at a time
        self._task: asyncio.Task[None] | None = None

    # --- state ---------------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self._identity

    @property
    def is_leader(self) -> bool:
        """True while we hold the lease and it has not run out by our clock."""
        return self._token is not None and time.monotonic() < self._lease_end

    @property
    def fencing_token(self) -> int | None:
        """The epoch (the lease revision at acquisition) while leader, else None; larger for every
        later leader, even across a lost bucket."""
        return self._token if self.is_leader else None

    async def wait_until_leader(self) -> int:
        """Wait until elected and return the fencing token.  Raises what stopped ``run()`` if it
        fails (for example a misconfigured bucket) rather than waiting forever."""
        while True:
            await self._wait_or_fail(self._elected)
            token = self.fencing_token
            if token is not None:
                return token
            await self._wait_or_fail(self._lost)  # elected but the lease ran out meanwhile

    async def wait_until_lost(self) -> None:
        """Wait until we are not (or no longer) the leader."""
        await self._wait_or_fail(self._lost)

    async def current_leader(self) -> str | None:
        """The identity holding the lease now, or None (for diagnostics; may be stale at once)."""
        lease = await read_lease(await self._kv_bucket(), self._key)
        return lease.holder if lease is not None else None

    # --- the loop ------------------------------------------------------------------------------

    async def run(self, *, release_on_exit: bool = True) -> None:
        """Campaign, lead and renew, and campaign again after a loss, until cancelled.  On the way
        out the lease is released (a standby takes over at once) unless ``release_on_exit`` is
        false, which behaves like a crash: standbys wait for the lease to run out."""
        kv = await self._kv_bucket()
        watcher = asyncio.create_task(self._watch_releases(kv), name=f"lease-watch {self._key}")
        try:
            while True:
                if self._kv is not None and self._kv is not kv:  # the bucket was made again: watch it
                    kv = self._kv
                    watcher.cancel()
                    watcher = asyncio.create_task(self._watch_releases(kv), name=f"lease-watch {self._key}")
                acquired = await self.try_acquire()
                _checkpoint()
                if acquired:
                    await self._hold()
                else:
                    await self._wait_for_chance()
                _checkpoint()
        finally:
            watcher.cancel()
            await asyncio.wait({watcher}, timeout=1.0)  # bounded: shutdown must not hang on a watch
            if release_on_exit:
                await self._release_on_exit()
            else:
                self._step_down("stopped without releasing")

    async def __aenter__(self) -> Self:
        await self._kv_bucket()  # a bad bucket fails here, not later in the background
        self._task = asyncio.create_task(self.run(), name=f"lease {self._bucket}/{self._key}")
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # --- single steps (run() uses them; a service may drive them itself) ------------------------

    async def try_acquire(self) -> bool:
        """Take the lease if nobody holds it; True if we hold it now."""
        if self.is_leader:
            return True
        if self._token is not None:  # our lease ran out unrenewed (a stalled loop): say so first
            self._step_down("the lease ran out before it was renewed")
        try:
            kv = await self._kv_bucket()
        except _TRANSIENT as err:
            log.warning("lease %s/%s: bucket unavailable: %r", self._bucket, self._key, err)
            return False
        async with self._lock:
            started = time.monotonic()
            try:
                revision = await self._take(kv)
            except _MISSING as err:
                self._bucket_lost(err)
                return False
            except _TRANSIENT as err:
                log.warning("lease %s/%s: could not campaign: %r", self._bucket, self._key, err)
                return False
            if revision is None:
                return False
            self._token = self._revision = revision
            self._lease_end = started + self._ttl
        log.info("lease %s/%s: %s is leader, fencing token %d", self._bucket, self._key, self._identity, revision)
        self._elected.set()
        self._lost.clear()
        _call(self._on_elected, revision)
        return True

    async def _take(self, kv: KeyValue) -> int | None:
        """Create the key, or take it back from our own previous life; the new revision or None."""
        fresh = msgspec.json.encode(Lease(holder=self._identity))
        try:
            return await kv.create(self._key, fresh)
        except nats.js.errors.KeyValueError:  # held by someone, or taken in the race after a delete
            pass
        try:
            entry = await kv.get(self._key)
        except nats.js.errors.KeyNotFoundError:
            return None
        if entry.revision is None or _decode_lease(entry.value, entry.revision).holder != self._identity:
            return None
        # Our identity, but not our lease: we restarted.  Take it over at once with a new epoch,
        # so decisions of our previous life are fenced off like any other leader's.
        try:
            revision: int = await kv.update(self._key, fresh, last=entry.revision)
        except nats.js.errors.KeyValueError:
            return None
        log.info("lease %s/%s: %s took back its own lease", self._bucket, self._key, self._identity)
        return revision

    async def renew(self) -> bool:
        """Extend the lease; False, and leadership lost at once, if it cannot be done in time."""
        kv = self._kv
        if kv is None:  # the bucket was lost: our lease went with it
            self._step_down("the lease bucket is gone")
            return False
        async with self._lock:
            started, last = time.monotonic(), self._revision
            if last is None:
                return False
            try:
                # Finishing after the lease ran out would be no renewal: the key may be gone or taken.
                async with asyncio.timeout(self._lease_end - started):
                    value = msgspec.json.encode(Lease(holder=self._identity, epoch=self._token or 0))
                    self._revision = await kv.update(self._key, value, last=last)
            except nats.js.errors.KeyValueError:
                reason = "someone else holds the lease"
            except _MISSING as err:
                self._bucket_lost(err)
                reason = f"the lease bucket is gone: {err!r}"
            except _TRANSIENT as err:
                reason = f"renewal failed: {err!r}"
            else:
                self._lease_end = started + self._ttl
                return True
        self._step_down(reason)
        return False

    async def release(self) -> bool:
        """Stop leading and delete the key if it is still ours, so a standby takes over at once.
        True if the key was deleted.  A running ``run()`` campaigns again afterwards; to step
        aside for good, cancel ``run()`` (or leave ``async with``), which releases on its way out."""
        async with self._lock:
            last = self._revision
            self._step_down("released")  # stop acting before the key goes
            kv = self._kv
            if last is None or kv is None:
                return False
            try:
                await kv.delete(self._key, last=last)
            except (*_TRANSIENT, nats.js.errors.APIError) as err:  # not ours any more, or unreachable
                log.info("lease %s/%s: not released: %r", self._bucket, self._key, err)
                return False
        return True

    # --- internals ------------------------------------------------------------------------------

    async def _hold(self) -> None:
        while True:
            await asyncio.sleep(max(0.0, min(self._renew_interval, self._lease_end - time.monotonic())))
            renewed = await self.renew()
            _checkpoint()
            if not renewed:
                return

    async def _wait_for_chance(self) -> None:
        # asyncio.timeout, not wait_for, which on Python 3.11 can swallow a cancellation.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._retry_interval):
                await self._wake.wait()
        self._wake.clear()

    async def _watch_releases(self, kv: KeyValue) -> None:
        # Only a speed-up: the periodic retry covers a watch that cannot start or breaks.
        try:
            watcher = await kv.watch(self._key)
        except _TRANSIENT as err:
            log.warning("lease %s/%s: cannot watch, relying on retries: %r", self._bucket, self._key, err)
            return
        try:
            _checkpoint()
            async for entry in watcher:
                if entry is not None and entry.operation in (KV_DEL, KV_PURGE):
                    self._wake.set()
        finally:
            with contextlib.suppress(*_TRANSIENT):
                await watcher.stop()  # type: ignore[no-untyped-call]  # nats-py leaves it unannotated

    async def _release_on_exit(self) -> None:
        # Bounded: shutdown must not hang on an unreachable server; the TTL covers that case.
        try:
            async with asyncio.timeout(min(self._ttl, 5.0)):
                await self.release()
        except TimeoutError:
            self._step_down("release timed out")

    def _step_down(self, reason: str) -> None:
        was_leader = self._token is not None
        self._token = self._revision = None
        self._lease_end = 0.0
        self._elected.clear()
        self._lost.set()
        if was_leader:
            log.info("lease %s/%s: %s stopped leading: %s", self._bucket, self._key, self._identity, reason)
            _call(self._on_lost)

    async def _kv_bucket(self) -> KeyValue:
        if self._kv is None:
            floor = await self._epoch_floor() if self._epoch_floor is not None else 0
            self._kv = await ensure_lease_bucket(
                self._js, self._bucket, self._ttl, reconfigure=self._reconfigure, floor=floor
            )
        return self._kv

    def _bucket_lost(self, err: BaseException) -> None:
        """The bucket is gone: the next call creates it again (above the epoch floor)."""
        log.warning("lease %s/%s: the bucket is gone (%r); it will be created again", self._bucket, self._key, err)
        self._kv = None
        self._wake.set()

    async def _wait_or_fail(self, event: asyncio.Event) -> None:
        task = self._task
        if task is None:
            await event.wait()
            return
        waiter = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not event.is_set() and task.done():
            if not task.cancelled() and task.exception() is not None:
                raise LeaderElectionError(f"lease {self._bucket}/{self._key}: the election stopped") from (
                    task.exception()
                )
            raise LeaderElectionError(f"lease {self._bucket}/{self._key}: the election is not running")


def _check_arguments(bucket: str, key: str, identity: str, ttl: float, renew: float, retry: float) -> None:
    problems = []
    if not _BUCKET_RE.match(bucket):
        problems.append(f"bucket {bucket!r}: use letters, digits, '_' and '-' only")
    if not _KEY_RE.match(key):
        problems.append(f"key {key!r}: use letters, digits and -/_= separated by single dots")
    if not identity.strip():
        problems.append("identity: must not be empty")
    if not ttl > 0:
        problems.append(f"ttl {ttl}: must be > 0 seconds")
    elif not 0 < renew < ttl:
        problems.append(f"renew_interval {renew}: must be > 0 and < ttl ({ttl}), ttl/3 is usual")
    if not retry > 0:
        problems.append(f"retry_interval {retry}: must be > 0 seconds")
    if problems:
        raise LeaderElectionError("; ".join(problems))


def _checkpoint() -> None:
    """Raise CancelledError if this task was cancelled but the cancellation got lost.

    On Python 3.11, ``asyncio.wait_for`` (which nats-py uses for every request) returns the result
    instead of raising when the cancellation and the reply arrive in the same loop iteration
    (fixed in 3.12).  The request counts stay on the task, so ``cancelling()`` still tells.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _call(callback: Callable[..., None] | None, *args: object) -> None:
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:  # a broken callback must not stop renewals
        log.exception("leader election callback %r failed", callback)


class EpochWatch:
    """The current epoch of one lease, as an executor of decisions needs it.

    A binder executes a decision only if its fence *equals* the epoch of the lease now, so a
    deposed leader's decisions (older) and forged ones (any other number) are dropped.  The key
    is watched, so the view follows every change; a fence newer than the view means the view may
    lag (a new leader's first decisions can outrun the watch), so the key is read again before
    answering.  Until the watch has delivered, every check reads the key.
    """

    def __init__(self, js: JetStreamContext, bucket: str, key: str) -> None:
        self._js, self._bucket, self._key = js, bucket, key
        self._epoch: int | None = None
        self._live = False  # the watch has delivered the key's state and is following it
        self.reads = 0  # direct reads of the key (for tests and metrics)

    @property
    def epoch(self) -> int | None:
        """The epoch as last seen (None: nobody holds the lease, or not known yet)."""
        return self._epoch

    async def check(self, fence: int) -> int | None:
        """The current epoch, read again from the server unless ``fence`` is not newer than a
        live view.  Raises what NATS raises when the key cannot be read."""
        if self._live and self._epoch is not None and fence <= self._epoch:
            return self._epoch
        kv = await self._js.key_value(self._bucket)
        self.reads += 1
        lease = await read_lease(kv, self._key)
        self._epoch = lease.epoch if lease is not None else None
        return self._epoch

    async def run(self) -> None:
        """Follow the key until cancelled; a broken watch (or a lost bucket) is started again."""
        while True:
            try:
                await self._follow()
            except _TRANSIENT as err:
                log.info("epoch watch %s/%s: %r; watching again", self._bucket, self._key, err)
            self._live = False
            await asyncio.sleep(0.5)  # a retry delay after a broken watch

    async def _follow(self) -> None:
        kv = await self._js.key_value(self._bucket)
        watcher = await kv.watch(self._key)
        try:
            async for entry in watcher:
                if entry is None:  # the initial state is delivered
                    self._live = True
                    continue
                if entry.operation in (KV_DEL, KV_PURGE) or entry.revision is None:
                    continue  # released: the last holder's epoch stays current until another takes it
                self._epoch = _decode_lease(entry.value, entry.revision).epoch
        finally:
            self._live = False
            with contextlib.suppress(*_TRANSIENT):
                await watcher.stop()  # type: ignore[no-untyped-call]
