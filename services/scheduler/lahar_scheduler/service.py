"""The scheduler service: a live snapshot fed by deltas, sessions on a period, decisions out.

It loads the Redis mirror at stream sequence S and follows the CLUSTER stream from S+1; a gap
in the sequence means something was missed, so it loads the mirror again.  Sessions run every
``period`` and early (debounced) when pods arrive or resources are freed.  Committed binds stay
*assumed* in the snapshot until the cache shows the pod bound, or a binder reports a failure.
Only the leader runs sessions; standbys keep a warm snapshot.

A session is pure, synchronous work that can take seconds on a large cluster, so it runs in a
worker thread: the event loop stays free to renew the leader lease, read acks and keep the NATS
connection alive.  ``snapshot_lock`` keeps every other change to the snapshot (deltas, results,
resyncs) waiting meanwhile; deltas queue up in the inbox and are applied after the session.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from nats.js.client import JetStreamContext
from opentelemetry import propagate, trace
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lahar.adapters.bus import Outgoing, dead_letter, ensure_streams, publish_batch
from lahar.adapters.mirror import Mirror
from lahar.api.codec import DecodeError
from lahar.service.metrics import ServiceMetrics
from lahar.wire.messages import BadMessage, Binds, Delta, Evict, decode_delta, decode_result, encode
from lahar.wire.names import Names
from lahar_scheduler.core import load_conf, run_session
from lahar_scheduler.decisions import Decisions, Sent, decisions, invalid_pod, missing_queues
from lahar_scheduler.deltas import apply_delta, decode
from lahar_scheduler.framework.conf import ConfError, SchedulerConf
from lahar_scheduler.framework.session import SessionResult
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.framework.types import TaskStatus

log = logging.getLogger("lahar.scheduler")
KINDS = ("nodes", "pods", "podgroups", "queues", "priorityclasses", "namespaces")
ASSUME_TIMEOUT = 60.0
MAX_LINKS = 64


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
        self.bad = Counter("lahar_scheduler_bad_messages_total", "Unusable messages", ["source"], registry=registry)
        self.resyncs = Counter("lahar_scheduler_resyncs_total", "Snapshot reloads from the mirror", registry=registry)
        self.rollbacks = Counter("lahar_scheduler_rollbacks_total", "Assumed binds undone", registry=registry)
        self.assumed = Gauge("lahar_scheduler_assumed", "Binds awaiting confirmation", registry=registry)
        self.leader = Gauge("lahar_scheduler_leader", "1 when this replica leads", registry=registry)
        self.nodes = Gauge("lahar_scheduler_nodes", "Nodes in the snapshot", registry=registry)
        self.pending = Gauge("lahar_scheduler_pending_tasks", "Tasks waiting for a node", registry=registry)
        self.placed = Gauge("lahar_scheduler_placed_tasks", "Tasks bound, binding or running", registry=registry)


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
    ) -> None:
        self.nc, self.js, self.mirror, self.names = nc, js, mirror, names
        self.conf = conf
        self.period, self.debounce, self.seed = period, debounce, seed
        self.tracer = tracer or trace.get_tracer("lahar.scheduler")
        self.metrics = Metrics.of(registry)
        self.clock = clock
        self.snapshot = Snapshot([], [], [], [])
        self.seq = 0
        self.fence = 0
        self.is_leader: Callable[[], bool] = lambda: True
        self.trigger = asyncio.Event()
        self.ready = asyncio.Event()
        self.assumed: dict[str, tuple[str, float]] = {}
        self.sent = Sent()
        self.sessions = 0
        self._links: dict[str, trace.SpanContext] = {}
        self._delta_sub: Any = None
        self._resync_needed = False
        self.inbox: asyncio.Queue[Msg] = asyncio.Queue()
        self._applied: collections.Counter[str] = collections.Counter()  # deltas by kind, this batch
        self.snapshot_lock = asyncio.Lock()  # held while the snapshot changes or a session reads it

    # -- lifecycle ---------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        await ensure_streams(self.js, self.names)
        await self.resync()
        results = await self.js.subscribe(
            self.names.result_subject,
            stream=self.names.results_stream,
            cb=self._on_result,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.NEW,
        )
        loop = asyncio.create_task(self._loop(stop), name="sessions")
        applier = asyncio.create_task(self._apply_inbox(), name="deltas")
        await stop.wait()
        loop.cancel()
        applier.cancel()
        await asyncio.gather(loop, applier, return_exceptions=True)
        await results.unsubscribe()
        if self._delta_sub is not None:
            await self._delta_sub.unsubscribe()

    async def resync(self) -> None:
        """Load the mirror at sequence S and follow the stream from S+1."""
        if self._delta_sub is not None:
            await self._delta_sub.unsubscribe()
            self._delta_sub = None
        while not self.inbox.empty():  # deltas of the old subscription: the mirror covers them
            self.inbox.get_nowait()
        seq, objects = await self.mirror.load(KINDS)
        async with self.snapshot_lock:
            self.snapshot = self._build(objects)
            self.seq = seq
            self._reassume()
        self.metrics.resyncs.inc()
        self._delta_sub = await self.js.subscribe(
            self.names.delta_subjects,
            stream=self.names.cluster_stream,
            cb=self._on_delta,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            config=_start_at(seq + 1),
        )
        self._resync_needed = False
        self.ready.set()
        self.trigger.set()

    def _build(self, objects: dict[str, dict[str, bytes]]) -> Snapshot:
        decoded: dict[str, list[Any]] = {k: [] for k in KINDS}
        for kind, held in objects.items():
            for key, raw in held.items():
                delta = Delta(kind=kind, op="ADDED", key=key, rv="", obj=msgspec.Raw(raw))
                try:
                    obj = decode(delta)
                except DecodeError as exc:
                    log.error("ignoring %s %s from the mirror: %s", kind, key, exc)
                    continue
                if obj is not None:
                    decoded[kind].append(obj)
        return Snapshot(
            decoded["nodes"],
            decoded["pods"],
            decoded["podgroups"],
            decoded["queues"],
            decoded["priorityclasses"],
            decoded["namespaces"],
            now=self.clock(),
        )

    # -- deltas --------------------------------------------------------------------------------
    async def _on_delta(self, msg: Msg) -> None:
        """The subscription's callback only queues: nats-py drains a backlog of callbacks without
        yielding to the event loop, which would starve the session loop for seconds."""
        self.inbox.put_nowait(msg)

    async def _apply_inbox(self) -> None:
        """Apply queued deltas in batches, yielding to other tasks between batches."""
        while True:
            msg = await self.inbox.get()
            batch = [msg]
            while len(batch) < 512 and not self.inbox.empty():
                batch.append(self.inbox.get_nowait())
            async with self.snapshot_lock:
                for m in batch:
                    await self._apply(m)
            # Counted per batch: a labelled counter's lookup costs more than applying some deltas.
            for kind, n in self._applied.items():
                self.metrics.deltas.labels(kind).inc(n)
            self._applied.clear()
            await asyncio.sleep(0)

    async def _apply(self, msg: Msg) -> None:
        sseq = msg.metadata.sequence.stream
        if sseq <= self.seq:
            return  # already in the snapshot (loaded from the mirror)
        if sseq != self.seq + 1 and not self._resync_needed:
            log.warning("delta stream gap: expected %d, got %d; reloading the mirror", self.seq + 1, sseq)
            self._resync_needed = True
            self.trigger.set()
            return
        if self._resync_needed:
            return
        self.seq = sseq
        try:
            delta = decode_delta(msg.data)
        except BadMessage as exc:
            self.metrics.bad.labels("delta").inc()
            log.error("unusable delta at sequence %d: %s", sseq, exc)
            await dead_letter(self.js, self.names, "delta", msg.data, str(exc))
            return
        try:
            obj = decode(delta)
        except DecodeError as exc:
            self.metrics.bad.labels("object").inc()
            log.error("ignoring %s %s: %s", delta.kind, delta.key, exc)
            await self._invalid(delta, str(exc))
            return
        self._applied[delta.kind] += 1
        change = apply_delta(self.snapshot, delta, obj)
        if delta.kind == "pods":
            self._confirm(delta)
            if delta.op == "ADDED":  # the creation is what a session's span links to
                ctx = trace.get_current_span(propagate.extract(msg.headers or {})).get_span_context()
                if ctx.is_valid:
                    self._links[delta.key] = ctx
        if change.pending or change.freed:
            self.trigger.set()

    async def _invalid(self, delta: Delta, why: str) -> None:
        """An object the scheduler cannot read: forget it, and tell the owner of a waiting pod why."""
        namespace, _, name = delta.key.rpartition("/")
        if delta.kind != "pods":
            return
        self.snapshot.delete_pod(namespace, name)
        if not self.is_leader() or _has_node(delta):
            return
        msg = invalid_pod(namespace, name, why, f"{self.names.prefix}-invalid", self.fence)
        await publish_batch(self.js, [Outgoing(self.names.decision_subject("podstatus"), encode(msg))])

    def _confirm(self, delta: Delta) -> None:
        """A pod delta settles an assumption: bound as decided, gone, or still waiting."""
        key = delta.key
        if key not in self.assumed:
            return
        task = self.snapshot.tasks.get(key)
        if delta.op == "DELETED" or task is None or task.node_name:
            del self.assumed[key]
            self._links.pop(key, None)
            return
        node, _ = self.assumed[key]
        self.snapshot.move(task, TaskStatus.BINDING, node)

    def _reassume(self) -> None:
        for key, (node, _) in list(self.assumed.items()):
            task = self.snapshot.tasks.get(key)
            if task is None or task.node_name:
                del self.assumed[key]
            elif task.status == TaskStatus.PENDING:
                self.snapshot.move(task, TaskStatus.BINDING, node)

    # -- results ---------------------------------------------------------------------------------
    async def _on_result(self, msg: Msg) -> None:
        try:
            res = decode_result(msg.data)
        except BadMessage as exc:
            self.metrics.bad.labels("result").inc()
            log.error("unusable result: %s", exc)
            await dead_letter(self.js, self.names, "result", msg.data, str(exc))
            return
        if res.kind != "bind" or res.outcome == "done":
            return
        key = f"{res.namespace}/{res.name}"
        async with self.snapshot_lock:
            self._forget(key, f"bind {res.outcome}: {res.message}")

    def _forget(self, key: str, why: str) -> None:
        if self.assumed.pop(key, None) is None:
            return
        task = self.snapshot.tasks.get(key)
        if task is not None and task.status == TaskStatus.BINDING and not task.pod.spec.node_name:
            self.snapshot.move(task, TaskStatus.PENDING, "")
            self.metrics.rollbacks.inc()
            log.info("bind of %s rolled back: %s", key, why)
            self.trigger.set()

    # -- sessions ----------------------------------------------------------------------------------
    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(self.trigger.wait(), self.period)
                await asyncio.sleep(self.debounce)  # gather a burst of arrivals into one session
            except TimeoutError:
                pass
            self.trigger.clear()
            if self._resync_needed:
                await self.resync()
            self.conf.refresh()
            self._expire_assumptions()
            leader = self.is_leader()
            self.metrics.leader.set(1 if leader else 0)
            if leader:
                await self.session()

    def _expire_assumptions(self) -> None:
        now = self.clock()
        for key, (_, since) in list(self.assumed.items()):
            if now - since > ASSUME_TIMEOUT:
                self._forget(key, "no confirmation in time")

    async def session(self) -> SessionResult:
        self.sessions += 1
        uid = f"{self.names.prefix}-{int(self.clock() * 1000)}-{self.sessions}"
        self.snapshot.now = now = self.clock()
        stamp = datetime.now(UTC).isoformat()
        started = time.perf_counter()
        async with self.snapshot_lock:
            result, out, batch = await asyncio.to_thread(self._decide, uid, stamp, now)
        self.metrics.sessions.inc()
        self.metrics.session_seconds.observe(time.perf_counter() - started)
        now = self.clock()
        for group in out.binds:
            for b in group.items:
                self.assumed[f"{b.namespace}/{b.name}"] = (b.node, now)
        self.metrics.assumed.set(len(self.assumed))
        self._gauges()
        decided = time.perf_counter()
        if batch:
            await publish_batch(self.js, batch)
        published = time.perf_counter()
        if out.binds or out.evictions:
            log.info(
                "session %s: %d binds, %d evictions in %.0f ms; decisions published in %.0f ms; %d deltas waiting",
                uid,
                len(result.binds),
                len(out.evictions),
                (decided - started) * 1000,
                (published - decided) * 1000,
                self.inbox.qsize(),
            )
        self.metrics.binds.inc(len(result.binds))
        self.metrics.evictions.inc(len(out.evictions))
        return result

    def _decide(self, uid: str, stamp: str, now: float) -> tuple[SessionResult, Decisions, list[Outgoing]]:
        """The session and its messages: runs in a worker thread while ``snapshot_lock`` is held."""
        with self.tracer.start_as_current_span("scheduler.session", attributes={"lahar.session": uid}) as span:
            result = run_session(self.snapshot, self.conf.conf, seed=self.seed + self.sessions, uid=uid)
            span.set_attribute("lahar.binds", len(result.binds))
            out = decisions(result, uid, self.fence, self.sent, stamp, now)
            out.podgroups.extend(missing_queues(self.snapshot, uid, self.fence, self.sent, stamp))
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
        for job, d in result.decisions.items():
            if not d.chosen and not d.outcome:
                continue
            links = [trace.Link(self._links[k]) for k in list(d.chosen)[:MAX_LINKS] if k in self._links]
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


class _NodeName(msgspec.Struct):
    nodeName: str = ""


class _Placed(msgspec.Struct):
    spec: _NodeName = msgspec.field(default_factory=_NodeName)


def _has_node(delta: Delta) -> bool:
    try:
        return bool(msgspec.json.decode(delta.obj, type=_Placed).spec.nodeName)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False


def _start_at(seq: int) -> Any:
    from nats.js.api import ConsumerConfig

    return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=seq)
