"""``lahar bench restart``: a scheduler starting on a populated cluster, to its first decision.

1. NATS (JetStream) and Valkey start on free ports (``lahar.infra``).  The CLUSTER stream and the
   Redis mirror are filled the way the cache fills them on a rebuild: the mirror is reset at the
   stream's end, each batch of deltas is published and then written to the mirror with the
   stream sequence of its last delta, and the mirror is sealed with the stream's identity.  Not
   timed.
2. A fresh process (so the populating process's memory does not count) connects as the
   scheduler's user and starts ``SchedulerService``; a JetStream pull consumer on the decisions
   stream (a work queue, as the binders read it) waits for the first decision.  Times, from the
   moment the service connects (imports not included: ``import_seconds`` says what they cost):

   * ``snapshot_load_seconds``: until the snapshot is loaded from the mirror and followed;
   * ``mirror_read_seconds``: of that, reading the mirror (one Redis transaction);
   * ``first_session_seconds``: the first session and its messages, in the worker thread;
   * ``seconds_to_first_decision``: until the consumer receives the first decision message
     (the leader's lease and its settling included);
   * ``cpu_seconds_to_first_decision``: the process's CPU time meanwhile, a figure that depends
     less on what else the machine runs;
   * ``load_cpu_seconds`` and ``first_session_cpu_seconds``: the CPU time of the worker thread
     that built the snapshot from the mirror's bytes, and of the one that ran the first session
     and made its messages (steadier still: nothing else runs in those threads).
3. Then a second replica starts and loads while the first leads, the work queue is drained (as
   binders would), and the leader stops: ``takeover_seconds_to_first_decision`` runs from that
   stop to the standby's first decision (``takeover_reloads``: 0 when it needed no reload).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import resource
import time
from dataclasses import asdict, dataclass
from typing import Any

import msgspec

from lahar.wire.messages import Delta

PREFIX = "bench"
POPULATE_BATCH = 2000
_START_METHOD = "spawn"  # a fresh interpreter: nothing of the populating process is shared


@dataclass
class RestartConfig:
    nodes: int = 5000
    pods: int = 50000
    pending: int = 1000  # pods waiting in gangs of 10; the rest run
    seed: int = 0
    timeout: float = 120.0
    profile: str | None = None  # a pyinstrument HTML file of the timed part
    takeover: bool = True  # also time a standby's takeover when the leader stops


@dataclass
class Urls:
    admin_nats: str
    admin_redis: str
    nats: str  # the scheduler's user
    redis: str
    nats_ca: str


# -- populating (as the cache rebuilds the mirror) ----------------------------------------------
async def populate(urls: Urls, cfg: RestartConfig) -> dict[str, int]:
    """Fill the CLUSTER stream and the mirror; the object count per kind."""
    import redis.asyncio as aioredis

    from lahar.adapters.bus import Outgoing, cluster_identity, ensure_streams, publish_batch
    from lahar.adapters.connect import connect_nats
    from lahar.adapters.mirror import Mirror
    from lahar.wire.messages import encode
    from lahar.wire.names import Names
    from lahar_scheduler.restart_cluster import build

    names = Names(PREFIX)
    cluster = build(cfg.nodes, cfg.pods, cfg.pending, cfg.seed)
    nc = await connect_nats(urls.admin_nats, ca=urls.nats_ca)
    rc = aioredis.from_url(urls.admin_redis)
    try:
        js = nc.jetstream()
        await ensure_streams(js, names)
        live = await cluster_identity(js, names)
        assert live is not None  # just made
        mirror = Mirror(rc, names.redis_prefix)
        fence = 1
        await mirror.reset(fence=fence, seq=live.last_seq)
        deltas = [
            Delta(kind=kind, op="ADDED", key=key, rv="1000", obj=_raw(raw), epoch=fence)
            for kind, key, raw in cluster.items()
        ]
        for start in range(0, len(deltas), POPULATE_BATCH):
            batch = deltas[start : start + POPULATE_BATCH]
            out = [Outgoing(names.delta_subject(d.kind), encode(d)) for d in batch]
            seqs = await publish_batch(js, out, timeout=60.0)
            await mirror.apply(batch, max(seqs), stream=live.id, fence=fence, building=True)
        await mirror.seal(stream=live.id, fence=fence)
    finally:
        await nc.close()
        await rc.aclose()
    return {kind: cluster.count(kind) for kind in cluster.objects}


def _raw(data: bytes) -> Any:
    return msgspec.Raw(data)


# -- the timed part, in its own process ---------------------------------------------------------
@dataclass
class Timings:
    import_seconds: float = 0.0  # importing the service's modules (not in the times below)
    snapshot_load_seconds: float = 0.0
    mirror_read_seconds: float = 0.0
    first_session_seconds: float = 0.0
    seconds_to_first_decision: float = 0.0
    first_decision_subject: str = ""
    binds_first_session: int = 0
    messages_first_session: int = 0  # decisions the first session published (binds and statuses)
    cpu_seconds_to_first_decision: float = 0.0  # this process's CPU time (every thread) meanwhile
    load_cpu_seconds: float = 0.0  # the snapshot built from the mirror's bytes, in its worker thread
    first_session_cpu_seconds: float = 0.0  # the first session and its messages, in its worker thread
    peak_rss_bytes: int = 0  # the process, up to the first decision (one scheduler)
    # The standby: loaded while the first replica leads, it takes over when that one stops.
    takeover_seconds_to_first_decision: float = 0.0
    takeover_first_session_seconds: float = 0.0
    takeover_reloads: int = 0  # snapshot loads the standby made after the stop (0: it stayed warm)


class _Replica:
    """One scheduler service with its own connections, its mirror read and sessions timed."""

    def __init__(self, urls: Urls, identity: str) -> None:
        self.urls, self.identity = urls, identity
        self.mirror_read = 0.0
        self.load_cpu = 0.0  # thread CPU seconds of the last snapshot load
        self.sessions: list[tuple[float, float, int]] = []  # (start, seconds, binds) of each session
        self.session_cpu: list[float] = []  # thread CPU seconds of each session, in order
        self.messages = 0
        self.stop = asyncio.Event()
        self.svc: Any = None
        self.task: asyncio.Task[None] | None = None
        self._closers: list[Any] = []

    async def start(self) -> None:
        import redis.asyncio as aioredis
        from prometheus_client import CollectorRegistry

        from lahar.adapters.connect import connect_nats
        from lahar.adapters.mirror import LOAD_READ_SIZE, Mirror
        from lahar.wire.access import owned_streams
        from lahar.wire.names import Names
        from lahar_scheduler.service import ConfSource, SchedulerService

        names = Names(PREFIX)
        nc = await connect_nats(self.urls.nats, ca=self.urls.nats_ca, role="scheduler")
        rc = aioredis.from_url(self.urls.redis, socket_read_size=LOAD_READ_SIZE)  # as the service's
        self._closers = [nc.close, rc.aclose]
        mirror = Mirror(rc, names.redis_prefix)
        svc = self.svc = SchedulerService(
            nc,
            nc.jetstream(),
            mirror,
            names,
            CollectorRegistry(),
            ConfSource(None),
            identity=self.identity,
            own=owned_streams(names, "scheduler"),
        )
        self._wrap(mirror, svc)
        self.task = asyncio.create_task(svc.run(self.stop))

    def _wrap(self, mirror: Any, svc: Any) -> None:
        read, decide, publish, build = mirror.load, svc._decide, svc._publish, svc.view.load

        async def timed_load(kinds: Any = ()) -> Any:
            t0 = time.perf_counter()
            state = await read(kinds)
            self.mirror_read = time.perf_counter() - t0
            return state

        def timed_build(*args: Any) -> Any:  # in the service's worker thread
            c0 = time.thread_time()
            loaded = build(*args)
            self.load_cpu = time.thread_time() - c0
            return loaded

        def timed_decide(*args: Any) -> Any:
            # The session and its messages (in the service's worker thread); publishing follows.
            t0, c0 = time.perf_counter(), time.thread_time()
            out = decide(*args)
            self.session_cpu.append(time.thread_time() - c0)
            self.sessions.append((t0, time.perf_counter() - t0, len(out[0].binds)))
            return out

        async def counted_publish(batch: list[Any]) -> None:
            self.messages = self.messages or len(batch)
            await publish(batch)

        mirror.load, svc._decide, svc._publish, svc.view.load = timed_load, timed_decide, counted_publish, timed_build

    def first_session(self, since: float = 0.0) -> tuple[float, int]:
        """The seconds and binds of the first session that started after ``since``."""
        return next(((took, binds) for start, took, binds in self.sessions if start >= since), (0.0, 0))

    @property
    def leads(self) -> bool:
        return self.svc is not None and self.svc.is_leader

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(20):
                    await self.task
        for close in self._closers:
            with contextlib.suppress(Exception):
                await close()


async def measure(urls: Urls, timeout: float, profile: str | None = None, takeover: bool = True) -> Timings:
    from lahar.adapters.connect import connect_nats
    from lahar.wire.names import Names

    names = Names(PREFIX)
    got = Timings()
    t0 = time.perf_counter()
    import lahar_scheduler.service  # noqa: F401  (what the service process imports before it starts)

    got.import_seconds = time.perf_counter() - t0
    watch_nc = await connect_nats(urls.admin_nats, ca=urls.nats_ca)
    consumer = await watch_nc.jetstream().pull_subscribe(
        names.decision_subjects, durable="bench-restart", stream=names.decisions_stream
    )
    leader, standby = _Replica(urls, "scheduler-a"), _Replica(urls, "scheduler-b")
    profiler = _profiler(profile)
    try:
        async with asyncio.timeout(timeout):
            started, cpu = time.perf_counter(), time.process_time()
            await leader.start()
            await leader.svc.ready.wait()
            got.snapshot_load_seconds = time.perf_counter() - started
            msg = await _first(consumer)
            got.seconds_to_first_decision = time.perf_counter() - started
            got.cpu_seconds_to_first_decision = time.process_time() - cpu
            got.first_decision_subject = msg.subject.removeprefix(f"{PREFIX}.")
            if profiler is not None:
                profiler.stop()
                _write_profile(profiler, profile or "")
            got.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            got.mirror_read_seconds, got.messages_first_session = leader.mirror_read, leader.messages
            got.first_session_seconds, got.binds_first_session = leader.first_session()
            got.load_cpu_seconds = leader.load_cpu
            got.first_session_cpu_seconds = leader.session_cpu[0] if leader.session_cpu else 0.0
            if takeover:
                await _takeover(leader, standby, watch_nc.jetstream(), consumer, names, got)
    finally:
        for replica in (leader, standby):
            await replica.close()
        with contextlib.suppress(Exception):
            await watch_nc.close()
    return got


async def _takeover(first: _Replica, second: _Replica, js: Any, consumer: Any, names: Any, got: Timings) -> None:
    """Start a second replica, let it load and follow; drain the work queue (as binders would);
    stop whichever replica leads then (on a busy machine the first can lose its lease to the
    second); time until the other one's first decision."""
    from lahar.adapters.bus import stream_messages

    await second.start()
    while not (second.svc.ready.is_set() and second.svc.campaigning.is_set() and (first.leads or second.leads)):
        await _drain(consumer)  # a leader re-elected meanwhile settles only once the queue is empty
    while await stream_messages(js, names.decisions_stream):
        await _drain(consumer)
    leader, standby = (first, second) if first.leads else (second, first)
    loads, old = standby.svc.follower.loads, leader.svc.fence
    stopped = time.perf_counter()
    await leader.close()
    await _first(consumer, after=old)  # the old leader's last decisions are acknowledged on the way
    got.takeover_seconds_to_first_decision = time.perf_counter() - stopped
    got.takeover_first_session_seconds = standby.first_session(stopped)[0]
    got.takeover_reloads = standby.svc.follower.loads - loads


async def _drain(consumer: Any) -> None:
    import nats.errors

    try:
        msgs = await consumer.fetch(256, timeout=0.5)
    except (TimeoutError, nats.errors.TimeoutError):
        return
    for m in msgs:
        await m.ack()


async def _first(consumer: Any, after: int = -1) -> Any:
    """The first decision message of an epoch above ``after`` (every message is acknowledged,
    as a binder does once it ran it or found its epoch stale)."""
    import msgspec
    import nats.errors

    while True:
        try:
            msgs = await consumer.fetch(1, timeout=0.5)
        except (TimeoutError, nats.errors.TimeoutError):
            continue
        await msgs[0].ack()
        if msgspec.json.decode(msgs[0].data, type=_Fenced).fence > after:
            return msgs[0]


class _Fenced(msgspec.Struct):
    fence: int = 0


def _write_profile(profiler: Any, path: str) -> None:
    with open(path, "w") as f:
        f.write(profiler.output_text(unicode=True) if path.endswith(".txt") else profiler.output_html())


def _profiler(path: str | None) -> Any:
    if not path:
        return None
    from pyinstrument import Profiler

    profiler = Profiler(async_mode="disabled")
    profiler.start()
    return profiler


def _child(urls: Urls, cfg: RestartConfig, out: Any) -> None:
    import uvloop

    try:
        out.put(("ok", asdict(uvloop.run(measure(urls, cfg.timeout, cfg.profile, cfg.takeover)))))
    except BaseException as exc:  # reported to the parent, which fails with it
        out.put(("error", repr(exc)))


def run(cfg: RestartConfig) -> dict[str, Any]:
    """Populate, then measure in a fresh process; the report."""
    import uvloop

    from lahar.infra.stack import Infra

    with Infra(prefix=PREFIX) as infra:
        urls = Urls(
            infra.nats_url,
            infra.redis_url,
            infra.url("nats", "scheduler"),
            infra.url("redis", "scheduler"),
            infra.nats_ca,
        )
        t0 = time.perf_counter()
        counts = uvloop.run(populate(urls, cfg))
        populate_seconds = time.perf_counter() - t0
        ctx: Any = multiprocessing.get_context(_START_METHOD)
        out = ctx.Queue()
        child = ctx.Process(target=_child, args=(urls, cfg, out), daemon=True)
        child.start()
        try:
            status, value = out.get(timeout=cfg.timeout + 60)
        finally:
            child.join(30)
            if child.is_alive():
                child.kill()
    if status != "ok":
        raise RuntimeError(f"the measured scheduler failed: {value}")
    report: dict[str, Any] = {
        "nodes": counts.get("nodes", 0),
        "pods": counts.get("pods", 0),
        "pending_pods": min(cfg.pending, cfg.pods),
        "podgroups": counts.get("podgroups", 0),
        "populate_seconds": round(populate_seconds, 3),
    }
    for key, v in value.items():
        report[key] = round(v, 3) if isinstance(v, float) else v
    return report
