"""The scheduler service: a live snapshot fed by deltas, sessions on a period, decisions out.

Every replica follows the cluster (``Follower``: the mirror at S, the CLUSTER stream from S+1) and
the binders' reports, so a standby's snapshot is warm and knows every bind.  One replica leads,
by a NATS KV lease whose epoch fences its decisions (docs/CONSISTENCY.md).  A new leader first
*settles*: it runs no session until no decision of an older epoch is left in the work queue
(executed, or dropped by the binders as stale), it has read every report, and it has applied
every delta; the reports of binds done by older epochs are adopted as assumptions, so the room
they took is never given away again.

A session is pure, synchronous work that can take seconds on a large cluster, so it runs in a
worker thread: the event loop stays free to renew the lease, read acks and keep the NATS
connection alive.  ``snapshot_lock`` keeps every other change to the snapshot (deltas, reports,
reloads) waiting meanwhile.  Every loop runs supervised: one that dies ends the process.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from opentelemetry import propagate, trace
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lahar.adapters.bus import MISSING, Outgoing, dead_letter, ensure_streams, publish_batch, stream_messages
from lahar.adapters.extender import HttpExtenderTransport
from lahar.adapters.follow import Follower
from lahar.adapters.leader import LeaderElection
from lahar.adapters.mirror import Mirror, MirrorState
from lahar.leadership import lead
from lahar.service.metrics import ServiceMetrics
from lahar.service.supervise import supervised
from lahar.wire.messages import BadMessage, Binds, Delta, Evict, decode_result, encode
from lahar.wire.names import Names
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.decisions import Decisions, Sent, decisions, missing_queues, pod_conditions
from lahar_scheduler.framework.conf import ConfError, SchedulerConf
from lahar_scheduler.framework.session import SessionResult
from lahar_scheduler.framework.types import TaskStatus
from lahar_scheduler.gcpause import collector_paused
from lahar_scheduler.live import KINDS, LiveView
from lahar_scheduler.volcano import BOUND, WATCHED, VolcanoMetrics

log = logging.getLogger("lahar.scheduler")
MAX_LINKS = 64  # span links per job decision
DECISION_TTL = 30.0  # seconds a decision may wait for a binder before no binder may run it
RESULTS_LOOKBACK = 120.0  # seconds of binder reports a starting replica reads
SETTLE_LOG_EVERY = 5.0
SETTLE_POLL = 0.05  # seconds between a new leader's checks of what it still waits for
NOT_LOADED = "the snapshot is not loaded from the mirror yet"


class Metrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.sessions = Counter("lahar_scheduler_sessions_total", "Sessions run", registry=registry)
        self.session_seconds = Histogram(
            "lahar_scheduler_session_seconds", "Session duration (volcano_e2e_scheduling_latency)", registry=registry
        )
        self.binds = Counter("lahar_scheduler_binds_total", "Bind decisions published", registry=registry)
        self.evictions = Counter("lahar_scheduler_evictions_total", "Evictions published", registry=registry)
        self.deltas = Counter("lahar_scheduler_deltas_total", "Deltas applied", ["kind"], registry=registry)
        self.bad = Counter(
            "lahar_scheduler_bad_messages_total", "Unusable messages and objects", ["source"], registry=registry
        )
        self.bad_deltas = Counter(
            "lahar_scheduler_bad_deltas_total", "Deltas skipped, by why", ["why"], registry=registry
        )
        self.resyncs = Counter("lahar_scheduler_resyncs_total", "Snapshot reloads from the mirror", registry=registry)
        self.rollbacks = Counter("lahar_scheduler_rollbacks_total", "Assumed binds undone", registry=registry)
        self.assumed = Gauge("lahar_scheduler_assumed", "Binds awaiting confirmation", registry=registry)
        self.leader = Gauge("lahar_scheduler_leader", "1 when this replica leads", registry=registry)
        self.epoch = Gauge("lahar_scheduler_epoch", "The epoch this replica leads in (0: standby)", registry=registry)
        self.settle = Histogram(
            "lahar_scheduler_settle_seconds", "From election to the first session of an epoch", registry=registry
        )
        self.publish_failures = Counter(
            "lahar_scheduler_publish_failures_total",
            "Sessions whose decisions could not all be published",
            registry=registry,
        )
        self.nodes = Gauge("lahar_scheduler_nodes", "Nodes in the snapshot", registry=registry)
        self.pending = Gauge("lahar_scheduler_pending_tasks", "Tasks waiting for a node", registry=registry)
        self.placed = Gauge("lahar_scheduler_placed_tasks", "Tasks bound, binding or running", registry=registry)
        self.idle = Counter(
            "lahar_scheduler_idle_sessions_total",
            "Sessions that decided nothing (no bind, eviction or status to send; they make no span)",
            registry=registry,
        )
        self.volcano = VolcanoMetrics(registry)


class ConfSource:
    """The configuration file, reloaded when it changes; the last good one is kept on errors."""

    def __init__(self, path: str | None) -> None:
        self.path = Path(path) if path else None
        self.mtime = 0.0
        self.conf: SchedulerConf = load_conf(self.path.read_text() if self.path else None)
        if self.path:
            self.mtime = self.path.stat().st_mtime

    def refresh(self) -> None:
        if self.path is None:
            return
        try:
            mtime = self.path.stat().st_mtime
        except OSError as exc:
            log.error("scheduler configuration %s unreadable, keeping the last good one: %s", self.path, exc)
            return
        if mtime == self.mtime:
            return
        self.mtime = mtime
        try:
            self.conf = load_conf(self.path.read_text())
            log.info("scheduler configuration %s reloaded", self.path)
        except (ConfError, OSError) as exc:
            log.error("scheduler configuration %s is invalid, keeping the last good one: %s", self.path, exc)


class SchedulerService:
    def __init__(
        self,
        nc: NATS,
        js: JetStreamContext,
        mirror: Mirror,
        names: Names,
        registry: CollectorRegistry,
        conf: ConfSource,
        *,
        period: float = 1.0,
        debounce: float = 0.05,
        seed: int = 0,
        tracer: trace.Tracer | None = None,
        clock: Callable[[], float] = time.time,
        identity: str = "scheduler",
        leader_ttl: float = 2.0,
        decision_ttl: float = DECISION_TTL,
        own: Collection[str] | None = None,
    ) -> None:
        self.nc, self.js, self.mirror, self.names = nc, js, mirror, names
        self.conf = conf
        self.own = own  # the streams this service may make (lahar.wire.access); None: all
        self.period, self.debounce, self.seed = period, debounce, seed
        self.tracer = tracer or trace.get_tracer("lahar.scheduler")
        self.metrics = Metrics.of(registry)
        self.clock = clock
        self.identity, self.leader_ttl, self.decision_ttl = identity, leader_ttl, decision_ttl
        self.view = LiveView(clock())
        self.fence = 0
        self.leading = False  # elected and settled: sessions run
        self.settling = ""  # why a new leader does not schedule yet ("" when it does, or standby)
        self.election: LeaderElection | None = None
        self.campaigning = asyncio.Event()
        self.trigger = asyncio.Event()
        self.prompt = asyncio.Event()  # the next session is due now: no debounce (or the rest of it)
        self.sent = Sent()
        self.sessions = 0
        # The extender plugin's HTTP (an idle pool until a configuration names an extender).
        self.transport = HttpExtenderTransport()
        self.snapshot_lock = asyncio.Lock()  # held while the snapshot changes or a session reads it
        self.follower = Follower(
            js,
            mirror,
            names,
            kinds=KINDS,
            source="delta",
            load=self._load,
            apply=self._apply,
            bad=self.metrics.bad_deltas,
            lock=self.snapshot_lock,
            applied=self._applied_batch,
            own=own,
        )
        self.ready = self.follower.ready  # a snapshot is loaded and followed
        self._applied: collections.Counter[str] = collections.Counter()  # deltas by kind, this batch
        self._results_sub: Any = None
        self.results: asyncio.Queue[Msg] = asyncio.Queue()
        self._work_subjects = frozenset(names.decision_subject(kind) for kind in ("bind", "evict"))

    @property
    def snapshot(self) -> Any:
        return self.view.snapshot

    @property
    def is_leader(self) -> bool:
        """Leading now: settled, and the lease has not run out by our clock."""
        return self.leading and self.election is not None and self.election.is_leader

    # -- lifecycle ---------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        await self._ensure_streams()
        loops = {
            "follow": self.follower.run(),
            "results": self._follow_results(),
            "sessions": self._loop(),
            "lease": self._lead(),
        }
        try:
            await supervised(stop.wait(), loops)
        finally:
            self.leading = False
            self.transport.close()

    async def _ensure_streams(self) -> None:
        need = [self.names.decisions_stream, self.names.results_stream]
        await ensure_streams(self.js, self.names, own=self.own, need=need)

    # -- the snapshot: mirror and deltas (through the follower, with snapshot_lock held) ---------
    async def _load(self, state: MirrorState) -> None:
        # In a worker thread, as sessions: at 50,000 pods the load takes seconds, and meanwhile
        # the event loop must keep renewing the lease (a restarting leader lost it during its
        # own load, then waited for a new election and its settling) and the connections alive.
        loaded = await asyncio.to_thread(self.view.load, state, self.clock())
        self.metrics.resyncs.inc()
        for kind, key, why in loaded.skipped or []:
            self.metrics.bad.labels("object").inc()
            log.error("ignoring %s %s from the mirror: %s", kind, key, why)
        log.info("snapshot loaded from the mirror at sequence %d: %d objects", state.seq, loaded.objects)
        self.trigger.set()

    def _apply(self, delta: Delta, headers: dict[str, str] | None) -> None:
        ctx = None
        if delta.kind == "pods" and delta.op == "ADDED" and headers:
            span_ctx = trace.get_current_span(propagate.extract(headers)).get_span_context()
            ctx = span_ctx if span_ctx.is_valid else None
        change = self.view.apply(delta, ctx)
        self._applied[delta.kind] += 1
        if delta.kind == "pods" and delta.op == "ADDED" and self.is_leader:
            task = self.snapshot.tasks.get(delta.key)
            if task is not None and not task.node_name:
                self.metrics.volcano.task_stage(WATCHED, task, self.clock())
        if change.pending or change.freed:
            self.trigger.set()

    def _applied_batch(self) -> None:
        # Counted per batch: a labelled counter's lookup costs more than applying some deltas.
        for kind, n in self._applied.items():
            self.metrics.deltas.labels(kind).inc(n)
        self._applied.clear()

    # -- binders' reports ------------------------------------------------------------------------
    async def _follow_results(self) -> None:
        """Every replica reads every report (a standby learns the binds of the leader it may
        replace); a lost stream or consumer is subscribed to again."""
        while True:
            self._results_sub = await self._subscribe_results()
            try:
                await self._read_results()
            except (nats.js.errors.NotFoundError, *MISSING) as exc:
                log.warning("the results stream went away (%r); subscribing again", exc)
                await self._ensure_streams()

    async def _subscribe_results(self) -> Any:
        start = datetime.fromtimestamp(self.clock(), UTC) - timedelta(seconds=RESULTS_LOOKBACK)
        self.results = asyncio.Queue()
        return await self.js.subscribe(
            self.names.result_subject,
            stream=self.names.results_stream,
            cb=self._queue_result,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.BY_START_TIME,
            config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=start),
        )

    async def _queue_result(self, msg: Msg) -> None:
        self.results.put_nowait(msg)

    async def _read_results(self) -> None:
        checked = time.monotonic()
        while True:
            try:
                msg = await asyncio.wait_for(self.results.get(), 1.0)
            except TimeoutError:
                msg = None
            if msg is not None:
                batch = [msg]
                while not self.results.empty() and len(batch) < 512:
                    batch.append(self.results.get_nowait())
                await self._apply_results(batch)
            if time.monotonic() - checked > 2.0:  # is the consumer still there?
                checked = time.monotonic()
                await self._results_sub.consumer_info()

    async def _apply_results(self, batch: list[Msg]) -> None:
        freed = False
        async with self.snapshot_lock:
            for msg in batch:
                try:
                    res = decode_result(msg.data)
                except BadMessage as exc:
                    self.metrics.bad.labels("result").inc()
                    log.error("unusable result: %s", exc)
                    await dead_letter(self.js, self.names, "result", msg.data, str(exc))
                    continue
                freed |= self.view.result(res)
                if res.kind == "bind" and res.outcome == "done" and self.is_leader:
                    self._bound(res.namespace, res.name)
        self._rollbacks()
        if freed:
            self.trigger.set()

    def _bound(self, namespace: str, name: str) -> None:
        task = self.snapshot.tasks.get(f"{namespace}/{name}")
        if task is not None:
            self.metrics.volcano.task_stage(BOUND, task, self.clock())

    async def _results_caught_up(self) -> bool:
        if self._results_sub is None or not self.results.empty():
            return False
        try:
            info = await self._results_sub.consumer_info()
        except (nats.errors.Error, TimeoutError):
            return False
        return int(info.num_pending or 0) == 0 and self.results.empty()

    # -- leadership --------------------------------------------------------------------------------
    async def _lead(self) -> None:
        never = asyncio.Event()  # the service stops by cancellation, which releases the lease
        await lead(
            self.js,
            self.names,
            "scheduler",
            self.identity,
            self.leader_ttl,
            never,
            self._act,
            self.campaigning,
            epoch_floor=self.mirror.epoch_floor,
            key=self.names.scheduler_lease,
            on_start=self._elections,
        )

    def _elections(self, election: LeaderElection) -> None:
        self.election = election

    async def _act(self, ended: asyncio.Event, fence: int) -> None:
        await self.mirror.record_epoch("scheduler", fence)
        self.fence = fence
        self.metrics.epoch.set(fence)
        try:
            if not await self._settle(ended, fence):
                return
            self.sent = Sent()  # what an earlier epoch sent is no guide: send every status again
            self.leading = True
            self.prompt.set()  # the epoch's first session: nothing to gather, start it now
            self.trigger.set()
            await ended.wait()
        finally:
            self.leading = False
            self.settling = ""
            self.metrics.epoch.set(0)
            self.metrics.volcano.clear()  # queue and job gauges are the leader's

    async def _settle(self, ended: asyncio.Event, fence: int) -> bool:
        """Wait until nothing of an older epoch can still change the cluster unseen; False if the
        lease was lost meanwhile."""
        started = time.monotonic()
        logged = started
        while not ended.is_set():
            self.settling = await self._unsettled()
            if not self.settling:
                took = time.monotonic() - started
                self.metrics.settle.observe(took)
                log.info("epoch %d: settled in %.2f s; scheduling", fence, took)
                return True
            if time.monotonic() - logged >= SETTLE_LOG_EVERY:
                logged = time.monotonic()
                log.warning("epoch %d: not scheduling yet (%.0f s): %s", fence, logged - started, self.settling)
            if self.settling == NOT_LOADED:  # goes on the moment the load ends
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.ready.wait(), SETTLE_POLL)
            else:
                await asyncio.sleep(SETTLE_POLL)  # the polling interval of a settle still waiting
        self.settling = ""  # no longer leading: nothing to settle
        return False

    async def _unsettled(self) -> str:
        """Why the new epoch must still wait, or ""."""
        if not self.ready.is_set():
            # Checked first, locally: while the snapshot loads (seconds, in a worker thread) the
            # NATS requests below, 20 a second, would only take the interpreter from the load.
            return NOT_LOADED
        try:
            older = await stream_messages(self.js, self.names.decisions_stream)
        except (nats.errors.Error, TimeoutError) as exc:
            return f"cannot read the decision queue ({exc!r})"
        if older:
            return f"{older} decisions of older epochs are not yet executed or dropped (are binders running?)"
        if not await self._results_caught_up():
            return "binders' reports are not all read"
        if not await self.follower.caught_up():
            return "the cluster's deltas are not all applied"
        return ""

    # -- sessions ----------------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.trigger.wait(), self.period)
            except TimeoutError:
                pass
            else:
                # Gather a burst of arrivals into one session; a new leader's first is due at once.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.prompt.wait(), self.debounce)
            self.prompt.clear()
            self.trigger.clear()
            self.conf.refresh()
            async with self.snapshot_lock:
                self.view.expire(self.clock())
            self._rollbacks()
            leader = self.is_leader
            self.metrics.leader.set(1 if leader else 0)
            if leader and self.ready.is_set():
                await self.session()

    def _rollbacks(self) -> None:
        if self.view.rollbacks:
            self.metrics.rollbacks.inc(self.view.rollbacks)
            self.view.rollbacks = 0
            self.trigger.set()
        self.metrics.assumed.set(len(self.view.assumptions))

    async def session(self) -> SessionResult:
        self.sessions += 1
        uid = f"{self.names.prefix}-{int(self.clock() * 1000)}-{self.sessions}"
        self.snapshot.now = now = self.clock()
        # Kubernetes' form of a metav1.Time: seconds, and "Z" rather than "+00:00".
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        started = time.perf_counter()
        # No collection in the middle of the session or before its decisions are out: a full
        # one there cost a new leader's first session 40-70 ms at 50,000 pods (gcpause).
        with collector_paused():
            async with self.snapshot_lock:
                result, out, batch = await asyncio.to_thread(self._decide, uid, stamp, now)
                self.view.assume(out.binds)  # before the lock goes: a report may follow at once
            decided = time.perf_counter()
            took = decided - started
            if batch and self.is_leader:
                await self._publish(batch)
        published = time.perf_counter()
        # The metrics once the decisions are out (they walk every job: tens of milliseconds at
        # 5,000 PodGroups that binders need not wait for).
        self.metrics.sessions.inc()
        self.metrics.session_seconds.observe(took)
        self.metrics.volcano.session(result, self.snapshot.jobs, took, self.clock())
        if _idle(result, out):
            self.metrics.idle.inc()
        self.metrics.assumed.set(len(self.view.assumptions))
        self._gauges()
        if out.binds or out.evictions:
            log.info(
                "session %s: %d binds, %d evictions in %.0f ms; decisions published in %.0f ms; %d deltas waiting",
                uid,
                len(result.binds),
                len(out.evictions),
                (decided - started) * 1000,
                (published - decided) * 1000,
                self.follower.inbox.qsize(),
            )
        self.metrics.binds.inc(len(result.binds))
        self.metrics.evictions.inc(len(out.evictions))
        return result

    async def _publish(self, batch: list[Outgoing]) -> None:
        """Publish a session's decisions.  If that fails, what was assumed stays assumed (some
        messages may have been stored): their deadlines, or the binders' reports, settle them."""
        # Binds and evictions first, on their own: binders can start on them while the status
        # writes are still queued (after a start, every PodGroup's status is sent again: at
        # 5,000 PodGroups, queuing those took seconds before the first bind left).
        work = [m for m in batch if m.subject in self._work_subjects]
        rest = [m for m in batch if m.subject not in self._work_subjects]
        try:
            for part in (work, rest):
                if part:
                    await publish_batch(self.js, part)
        except Exception as exc:
            self.metrics.publish_failures.inc()
            self.sent = Sent()  # statuses that were not written are written again next time
            log.error("publishing %d decisions failed: %r", len(batch), exc)
            if isinstance(exc, MISSING):
                await self._ensure_streams()

    def _decide(self, uid: str, stamp: str, now: float) -> tuple[SessionResult, Decisions, list[Outgoing]]:
        """The session and its messages: runs in a worker thread while ``snapshot_lock`` is held.

        A session that decided nothing makes no span (an idle cluster would fill a trace store
        with empty sessions; ``lahar_scheduler_idle_sessions_total`` counts them); the span of
        one that did starts when the session started."""
        started = time.time_ns()
        result = run_session(
            self.snapshot,
            self.conf.conf,
            seed=self.seed + self.sessions,
            uid=uid,
            clock=time.perf_counter,
            transport=self.transport,
        )
        expires = now + self.decision_ttl
        out = decisions(result, uid, self.fence, self.sent, stamp, now, expires, snapshot=self.snapshot)
        out.podgroups.extend(missing_queues(self.snapshot, uid, self.fence, self.sent, stamp))
        out.pods.extend(pod_conditions(self.snapshot, self.view.invalid, uid, self.fence, self.sent))
        if _idle(result, out):
            return result, out, []
        attrs: dict[str, Any] = {"lahar.session": uid, "lahar.binds": len(result.binds)}
        with self.tracer.start_as_current_span("scheduler.session", start_time=started, attributes=attrs):
            return result, out, self._outgoing(result, out)

    def _gauges(self) -> None:
        pending = placed = 0
        for job in self.snapshot.jobs.values():
            pending += job.count(TaskStatus.PENDING)
            placed += job.count(TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)
        self.metrics.nodes.set(len(self.snapshot.nodes.infos))
        self.metrics.pending.set(pending)
        self.metrics.placed.set(placed)

    def _outgoing(self, result: SessionResult, out: Decisions) -> list[Outgoing]:
        """Decision messages, each bind/evict carrying the context of its job's span."""
        job_ctx: dict[str, dict[str, str]] = {}
        links_of = self.view.links
        for job, d in result.decisions.items():
            if not d.chosen and not d.outcome:
                continue
            links = [trace.Link(links_of[k]) for k in list(d.chosen)[:MAX_LINKS] if k in links_of]
            attrs: dict[str, Any] = {
                "lahar.job": job,
                "lahar.queue": d.queue,
                "lahar.outcome": d.outcome or "pending",
                "lahar.nodes_considered": d.nodes_considered,
                "lahar.nodes_chosen": sorted(set(d.chosen.values())),
            }
            for name, verdict in d.verdicts.items():
                attrs[f"lahar.verdict.{name}"] = verdict
            with self.tracer.start_as_current_span("scheduler.job", links=links, attributes=attrs):
                headers: dict[str, str] = {}
                propagate.inject(headers)
                job_ctx[job] = headers
        batch = []
        traced: list[tuple[str, Binds | Evict]] = [("bind", m) for m in out.binds]
        traced += [("evict", m) for m in out.evictions]
        for kind, msg in traced:
            headers = dict(job_ctx.get(msg.job, {}))
            headers["Nats-Msg-Id"] = msg.id
            batch.append(Outgoing(self.names.decision_subject(kind), encode(msg), headers))
        for group, kind in ((out.podgroups, "podgroup"), (out.queues, "queue"), (out.pods, "podstatus")):
            for m in group:
                batch.append(Outgoing(self.names.decision_subject(kind), encode(m), {"Nats-Msg-Id": m.id}))
        return batch


def _idle(result: SessionResult, out: Decisions) -> bool:
    """Nothing to send and nothing pipelined: the session changed nothing anyone can see."""
    sends = out.binds or out.evictions or out.podgroups or out.queues or out.pods
    return not sends and not result.pipelined
