"""lahar.adapters.leader against a real nats-server: one leader, takeover, release, fencing."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from lahar.adapters.leader import EpochWatch, LeaderElection, LeaderElectionError, ensure_lease_bucket, read_lease

TTL = 1.0  # short, so expiry tests are quick; renewals then come every ~0.33 s
KEY = "scheduler"


async def poll(condition: Callable[[], bool | Awaitable[bool]], timeout: float, what: str) -> float:
    """Wait until ``condition`` holds; returns the seconds it took."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while True:
        result = condition()
        if await result if isinstance(result, Awaitable) else result:
            return loop.time() - start
        assert loop.time() - start < timeout, f"timed out after {timeout}s waiting for {what}"
        await asyncio.sleep(0.01)


class Candidates:
    """Elections running in tasks, recording every election and loss; all stopped at the end."""

    def __init__(self, js: JetStreamContext, bucket: str) -> None:
        self.js, self.bucket = js, bucket
        self.elections: dict[str, LeaderElection] = {}
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.events: list[tuple[str, str, int | None]] = []

    def start(self, name: str, ttl: float = TTL, release_on_exit: bool = True) -> LeaderElection:
        election = LeaderElection(
            self.js,
            self.bucket,
            KEY,
            name,
            ttl,
            on_elected=lambda token: self.events.append((name, "elected", token)),
            on_lost=lambda: self.events.append((name, "lost", None)),
        )
        self.elections[name] = election
        self.tasks[name] = asyncio.create_task(election.run(release_on_exit=release_on_exit))
        return election

    def leaders(self) -> list[str]:
        return [name for name, e in self.elections.items() if e.is_leader]

    async def stop(self, name: str) -> None:
        task = self.tasks.pop(name)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def stop_all(self) -> None:
        for name in list(self.tasks):
            await self.stop(name)


@pytest.fixture
async def candidates(jetstream: JetStreamContext, lahar_prefix: str) -> AsyncIterator[Candidates]:
    group = Candidates(jetstream, f"{lahar_prefix}_leases")
    try:
        yield group
    finally:
        await group.stop_all()


async def lease_revision(js: JetStreamContext, bucket: str) -> int:
    revision = (await (await js.key_value(bucket)).get(KEY)).revision
    assert revision is not None
    return revision


async def test_only_one_of_three_candidates_leads(candidates: Candidates) -> None:
    for name in ("a", "b", "c"):
        candidates.start(name)
    await poll(lambda: bool(candidates.leaders()), 5, "a leader")
    [leader] = candidates.leaders()
    token = candidates.elections[leader].fencing_token
    assert token is not None

    async def renewed_three_times() -> bool:
        return await lease_revision(candidates.js, candidates.bucket) >= token + 3

    await poll(renewed_three_times, 5, "three renewals")
    assert candidates.leaders() == [leader]
    assert candidates.events == [(leader, "elected", token)]  # nobody else ever won, nobody lost
    assert await candidates.elections["a"].current_leader() == leader


async def test_standby_takes_over_when_the_leader_stops_renewing(candidates: Candidates) -> None:
    for name in ("a", "b", "c"):
        candidates.start(name, release_on_exit=False)
    await poll(lambda: bool(candidates.leaders()), 5, "a leader")
    [old] = candidates.leaders()
    old_token = candidates.elections[old].fencing_token
    assert old_token is not None

    await candidates.stop(old)  # like a crash: the lease is left to run out
    assert not candidates.elections[old].is_leader
    took = await poll(lambda: bool(candidates.leaders()), TTL + 1.5, "a new leader")
    [new] = candidates.leaders()
    assert new != old
    assert took > TTL / 3, "the standby must wait for the old lease to run out"
    new_token = candidates.elections[new].fencing_token
    assert new_token is not None and new_token > old_token


async def test_graceful_release_hands_over_at_once(jetstream: JetStreamContext, lahar_prefix: str) -> None:
    bucket, ttl = f"{lahar_prefix}_leases", 6.0  # standbys retry every 2 s: a quicker takeover is the watch
    first = LeaderElection(jetstream, bucket, KEY, "first", ttl)
    second = LeaderElection(jetstream, bucket, KEY, "second", ttl)
    async with contextlib.AsyncExitStack() as first_running:
        await first_running.enter_async_context(first)
        first_token = await asyncio.wait_for(first.wait_until_leader(), 5)
        async with second:

            async def second_is_watching() -> bool:  # each running candidate watches the key
                return (await jetstream.stream_info(f"KV_{bucket}")).state.consumer_count == 2

            await poll(second_is_watching, 5, "the second candidate's watch")
            assert await second.current_leader() == "first" and not second.is_leader
            await first_running.aclose()  # the first shuts down, releasing the lease
            assert not first.is_leader
            second_token = await asyncio.wait_for(second.wait_until_leader(), 1.0)
    assert second_token > first_token
    assert await first.current_leader() is None  # the second released on exit as well


async def test_fencing_token_strictly_increases_across_leaders(jetstream: JetStreamContext, lahar_prefix: str) -> None:
    bucket = f"{lahar_prefix}_leases"
    a, b, c = (LeaderElection(jetstream, bucket, KEY, name, TTL) for name in ("a", "b", "c"))
    tokens = []
    assert await a.try_acquire() and a.fencing_token is not None
    tokens.append(a.fencing_token)
    assert not await b.try_acquire()
    assert await a.renew() and a.fencing_token == tokens[0]  # renewals keep the token
    assert await a.release()
    assert await b.try_acquire() and b.fencing_token is not None
    tokens.append(b.fencing_token)
    # b crashes (never renews); c gets the lease once it runs out
    await poll(c.try_acquire, TTL + 1.5, "c to take the expired lease")
    assert c.fencing_token is not None
    tokens.append(c.fencing_token)
    assert await c.release()
    assert await a.try_acquire() and a.fencing_token is not None
    tokens.append(a.fencing_token)
    assert tokens == sorted(set(tokens)), f"tokens must strictly increase: {tokens}"


async def test_a_stale_leaders_renewal_fails_and_it_stops_leading(
    jetstream: JetStreamContext, lahar_prefix: str
) -> None:
    bucket = f"{lahar_prefix}_leases"
    lost: list[str] = []
    stale = LeaderElection(jetstream, bucket, KEY, "stale", TTL, on_lost=lambda: lost.append("stale"))
    fresh = LeaderElection(jetstream, bucket, KEY, "fresh", TTL)
    assert await stale.try_acquire()
    # stale stalls (say a long GC pause): its lease runs out by its own clock...
    await poll(lambda: not stale.is_leader, TTL + 0.5, "the stale lease to run out locally")
    assert stale.fencing_token is None
    # ...and on the server, where fresh takes it
    await poll(fresh.try_acquire, TTL + 1.5, "fresh to take the expired lease")

    assert not await stale.renew()
    assert lost == ["stale"]
    await asyncio.wait_for(stale.wait_until_lost(), 1)
    assert await fresh.current_leader() == "fresh"  # the stale write changed nothing
    assert await fresh.renew()


async def test_a_failed_renewal_ends_leadership_at_once(jetstream: JetStreamContext, lahar_prefix: str) -> None:
    bucket = f"{lahar_prefix}_leases"
    events: list[str] = []
    leader = LeaderElection(jetstream, bucket, KEY, "leader", ttl=30, on_lost=lambda: events.append("lost"))
    assert await leader.try_acquire()
    kv = await jetstream.key_value(bucket)
    await kv.put(KEY, b"intruder")  # someone overwrote the key
    assert leader.is_leader  # we cannot know before we renew...
    assert not await leader.renew()  # ...and then we stop at once, long before the 30 s TTL
    assert (leader.is_leader, leader.fencing_token, events) == (False, None, ["lost"])


async def test_bucket_is_created_idempotently_and_checked(jetstream: JetStreamContext, lahar_prefix: str) -> None:
    bucket = f"{lahar_prefix}_leases"
    kvs = await asyncio.gather(*(ensure_lease_bucket(jetstream, bucket, 2.0) for _ in range(3)))
    status = await kvs[0].status()
    assert (status.history, status.ttl) == (1, 2.0)

    with pytest.raises(LeaderElectionError, match=rf"bucket '{bucket}': exists with ttl=2.0s.*needs ttl=1.0s"):
        async with LeaderElection(jetstream, bucket, KEY, "x", ttl=1.0):
            pass


async def test_reconfigure_adopts_the_new_ttl(jetstream: JetStreamContext, lahar_prefix: str) -> None:
    """State left by a run with another lease TTL must not stop the services (``lead`` reconfigures)."""
    bucket = f"{lahar_prefix}_retuned"
    await ensure_lease_bucket(jetstream, bucket, 5.0)
    async with LeaderElection(jetstream, bucket, KEY, "x", ttl=10.0, reconfigure=True) as leader:
        assert await leader.try_acquire()
        status = await (await jetstream.key_value(bucket)).status()
        assert (status.history, status.ttl) == (1, 10.0)


def test_bad_arguments_are_all_reported(jetstream: JetStreamContext) -> None:
    with pytest.raises(LeaderElectionError) as caught:
        LeaderElection(jetstream, "bad.bucket", "bad key", " ", ttl=0, retry_interval=0)
    message = str(caught.value)
    for part in ("bucket 'bad.bucket'", "key 'bad key'", "identity", "ttl 0", "retry_interval 0"):
        assert part in message
    with pytest.raises(LeaderElectionError, match="renew_interval 5: must be > 0 and < ttl"):
        LeaderElection(jetstream, "b", "k", "i", ttl=5, renew_interval=5)


async def test_run_stops_even_when_a_nats_call_swallows_the_cancellation(
    jetstream: JetStreamContext, lahar_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered = asyncio.Event()
    real_create = KeyValue.create

    async def create_that_swallows_cancel(self: KeyValue, key: str, value: bytes) -> int:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):  # what asyncio.wait_for does on 3.11 when
            await asyncio.sleep(30)  # the reply and the cancellation arrive together
        return await real_create(self, key, value)

    monkeypatch.setattr(KeyValue, "create", create_that_swallows_cancel)
    election = LeaderElection(jetstream, f"{lahar_prefix}_leases", KEY, "x", TTL)
    task = asyncio.create_task(election.run())
    await asyncio.wait_for(entered.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 2)
    assert not election.is_leader
    assert await election.current_leader() is None  # it won the lease, noticed the cancel, released


async def test_a_lease_that_ran_out_unrenewed_is_reported_lost_before_campaigning_again(
    jetstream: JetStreamContext, lahar_prefix: str
) -> None:
    events: list[str] = []
    election = LeaderElection(
        jetstream,
        f"{lahar_prefix}_leases",
        KEY,
        "x",
        TTL,
        on_elected=lambda token: events.append(f"elected {token}"),
        on_lost=lambda: events.append("lost"),
    )
    assert await election.try_acquire()
    first = election.fencing_token
    await poll(lambda: not election.is_leader, TTL + 0.5, "the lease to run out locally")
    await poll(election.try_acquire, TTL + 1.5, "the lease again")
    second = election.fencing_token
    assert first is not None and second is not None and second > first
    assert events == [f"elected {first}", "lost", f"elected {second}"]


async def test_the_epoch_is_readable_from_the_key_and_survives_renewals(
    jetstream: JetStreamContext, lahar_prefix: str
) -> None:
    bucket = f"{lahar_prefix}_leases"
    leader = LeaderElection(jetstream, bucket, KEY, "a", TTL)
    assert await leader.try_acquire()
    epoch = leader.fencing_token
    kv = await jetstream.key_value(bucket)
    lease = await read_lease(kv, KEY)
    assert lease is not None and (lease.holder, lease.epoch) == ("a", epoch)
    for _ in range(3):
        assert await leader.renew()
    lease = await read_lease(kv, KEY)
    assert lease is not None and lease.epoch == epoch  # renewals move the revision, not the epoch
    assert await lease_revision(jetstream, bucket) == epoch + 3


async def test_a_restarted_replica_with_the_same_identity_takes_its_lease_back_at_once(
    jetstream: JetStreamContext, lahar_prefix: str
) -> None:
    bucket = f"{lahar_prefix}_leases"
    before = LeaderElection(jetstream, bucket, KEY, "scheduler-1", ttl=30)
    assert await before.try_acquire()
    old = before.fencing_token
    assert old is not None
    # The process dies without releasing; its successor has the same identity (a pod name).
    after = LeaderElection(jetstream, bucket, KEY, "scheduler-1", ttl=30)
    other = LeaderElection(jetstream, bucket, KEY, "scheduler-2", ttl=30)
    assert not await other.try_acquire()  # a different identity still waits for the lease
    assert await after.try_acquire()  # at once, not after 30 s
    new = after.fencing_token
    assert new is not None and new > old  # a new epoch: the old life's decisions are fenced off
    assert not await before.renew()  # the previous life, had it survived, is deposed


async def test_a_lost_bucket_is_made_again_and_epochs_never_go_back(
    jetstream: JetStreamContext, lahar_prefix: str
) -> None:
    bucket = f"{lahar_prefix}_leases"
    floor = {"epoch": 0}

    async def epoch_floor() -> int:
        return floor["epoch"]

    leader = LeaderElection(jetstream, bucket, KEY, "a", TTL, epoch_floor=epoch_floor)
    for _ in range(5):  # push the revisions up a little
        assert await leader.try_acquire()
        assert await leader.renew()
    first = leader.fencing_token
    assert first is not None
    floor["epoch"] = first + 100  # what the caller recorded elsewhere (Redis) as granted
    await jetstream.delete_stream(f"KV_{bucket}")  # JetStream storage lost
    assert not await leader.renew()
    assert not leader.is_leader
    assert await poll_acquire(leader, 5)
    second = leader.fencing_token
    assert second is not None and second > first + 100


async def poll_acquire(election: LeaderElection, timeout: float) -> bool:
    await poll(election.try_acquire, timeout, "the lease")
    return True


async def test_the_epoch_watch_follows_leaders_and_rereads_for_newer_fences(
    jetstream: JetStreamContext, lahar_prefix: str
) -> None:
    bucket = f"{lahar_prefix}_leases"
    a = LeaderElection(jetstream, bucket, KEY, "a", 30)
    b = LeaderElection(jetstream, bucket, KEY, "b", 30)
    assert await a.try_acquire()
    ea = a.fencing_token
    assert ea is not None
    watch = EpochWatch(jetstream, bucket, KEY)
    task = asyncio.create_task(watch.run())
    try:
        await poll(lambda: watch.epoch == ea, 5, "the watch to see a's epoch")
        reads = watch.reads
        assert await watch.check(ea) == ea and watch.reads == reads  # answered from the live view
        assert await watch.check(ea - 1) == ea  # an older fence: not current
        assert await watch.check(2**63 - 1) == ea and watch.reads == reads + 1  # forged: re-read, still a's
        assert await a.release()
        assert await b.try_acquire()
        eb = b.fencing_token
        assert eb is not None and eb > ea
        assert await watch.check(eb) == eb  # newer than the view: read at once, even if the watch lags
        await poll(lambda: watch.epoch == eb, 5, "the watch to see b's epoch")
        assert await watch.check(ea) == eb  # a's decisions are no longer current
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
