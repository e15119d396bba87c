"""The binder service: decisions in, Kubernetes API calls out, results back.

Replicas share one durable pull consumer on the DECISIONS work queue.  Each runs up to
``max_in_flight`` API calls at once.  A message is acknowledged only once every call in it has a
final outcome and the outcomes are published (so a replica killed mid-call loses nothing:
JetStream redelivers after ``ack_wait``); ``settle.py`` says what happens otherwise.

A decision is executed only while it is current (docs/CONSISTENCY.md): its fence must equal the
epoch of the scheduler's lease *now* (``EpochWatch``), and its deadline must not have passed.  A
decision that is not current is dropped and reported ``stale``/``expired``; if it was delivered
before, an earlier delivery may have run it, so its pods are read back and reported as found.
A bind is idempotent: if the pod is already on the decided node, that is success; on another node
it is a conflict, reported, never retried blindly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection
from typing import Any, Literal

import msgspec
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.client import JetStreamContext
from opentelemetry import propagate, trace
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lahar.adapters.bus import Outgoing, dead_letter, ensure_streams, publish_batch
from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound, PermanentKubeError, TransientKubeError
from lahar.adapters.leader import EpochWatch
from lahar.service.metrics import ServiceMetrics
from lahar.service.supervise import supervised
from lahar.wire.messages import (
    BadMessage,
    BindItem,
    Binds,
    Decision,
    Evict,
    Outcome,
    PodGroupStatus,
    PodStatus,
    QueueStatus,
    Result,
    decode_decision,
    encode,
)
from lahar.wire.names import Names
from lahar_binder import events
from lahar_binder.claims import ClaimRefused, reserve_claims, unreserve_claims
from lahar_binder.settle import Plan, admit, settle

log = logging.getLogger("lahar.binder")
# How long one fetch waits for decisions.  It returns at once when some arrive, so this bounds only
# how soon an idle binder sees its stop: half a second costs two pull requests a second when idle.
FETCH_WAIT = 0.5


class _PodSpec(msgspec.Struct):
    nodeName: str = ""


class _Pod(msgspec.Struct):
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


_pod = msgspec.json.Decoder(_Pod)


class _Meta(msgspec.Struct):
    uid: str = ""


class _Uid(msgspec.Struct):
    metadata: _Meta = msgspec.field(default_factory=_Meta)


_uid = msgspec.json.Decoder(_Uid)


class Metrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.calls = Counter(
            "lahar_binder_calls_total", "API calls by decision kind and outcome", ["kind", "outcome"], registry=registry
        )
        self.latency = Histogram("lahar_binder_call_seconds", "API call latency", ["kind"], registry=registry)
        self.in_flight = Gauge("lahar_binder_in_flight", "API calls in flight", registry=registry)
        # Volcano's per-task Bind stage: the binder owns the bind call.  Buckets as Volcano's
        # ExponentialBucketsRange(0.1, 500, 20).
        self.stage = Histogram(
            "volcano_scheduling_stage_duration_milliseconds",
            "Duration of per-task scheduling stages (Predicate, Scoring, PreBind, Bind) in milliseconds",
            ["stage"],
            buckets=[0.1 * 5000 ** (i / 19) for i in range(20)],
            registry=registry,
        )
        self.bad = Counter("lahar_binder_bad_messages_total", "Unusable decision messages", registry=registry)
        self.stale = Counter(
            "lahar_binder_not_current_total",
            "Decisions not executed: another epoch (stale) or past their deadline (expired)",
            ["why"],
            registry=registry,
        )
        self.errors = Counter(
            "lahar_binder_errors_total", "Unexpected errors handling a decision (redelivered)", registry=registry
        )
        self.dead = Counter("lahar_binder_given_up_total", "Decisions given up and dead-lettered", registry=registry)


class BinderService:
    def __init__(
        self,
        kube: KubeClient,
        js: JetStreamContext,
        names: Names,
        registry: CollectorRegistry,
        *,
        max_in_flight: int = 64,
        max_attempts: int = 5,
        ack_wait: float = 30.0,
        tracer: trace.Tracer | None = None,
        clock: Callable[[], float] = time.time,
        own: Collection[str] | None = None,
        event_workers: int = 2,
        event_queue: int = 1000,
    ) -> None:
        self.kube, self.js, self.names = kube, js, names
        self.clock = clock
        self.own = own  # the streams this service may make (lahar.wire.access); None: all
        self.epochs = EpochWatch(js, names.leader_bucket, names.scheduler_lease)
        self.max_in_flight = max_in_flight
        self.max_attempts = max_attempts
        self.ack_wait = ack_wait
        self.tracer = tracer or trace.get_tracer("lahar.binder")
        self.metrics = Metrics.of(registry)
        self.slots = asyncio.Semaphore(max_in_flight)  # API calls in flight
        self.calls_wanted = 0  # API calls of the messages being handled (running or waiting)
        self.tasks: set[asyncio.Task[None]] = set()
        self.working: dict[int, Msg] = {}  # messages being handled (by id), kept alive with in-progress acks
        self.ready = asyncio.Event()
        # Events are written beside the calls, never in their way (events.py).
        self.events = events.EventWriter(kube, registry, workers=event_workers, queue_size=event_queue, clock=clock)

    async def run(self, stop: asyncio.Event) -> None:
        loops = {"epoch-watch": self.epochs.run(), "in-progress": self._keep_alive(), "events": self.events.run()}
        await supervised(self._consume(stop), loops)

    async def _subscribe(self) -> Any:
        need = [self.names.decisions_stream, self.names.results_stream]
        await ensure_streams(self.js, self.names, own=self.own, need=need)
        return await self.js.pull_subscribe(
            self.names.decision_subjects,
            durable=self.names.binder_consumer,
            stream=self.names.decisions_stream,
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=self.ack_wait,
                max_ack_pending=max(10_000, self.max_in_flight * 8),
            ),
        )

    async def _consume(self, stop: asyncio.Event) -> None:
        sub = await self._subscribe()
        self.ready.set()
        while not stop.is_set():
            # Messages are fetched while API-call slots are free; a bind group uses one per pod.
            if self.calls_wanted >= self.max_in_flight:
                await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            want = max(1, (self.max_in_flight - self.calls_wanted) // 8)
            try:
                # A long poll: it returns as soon as decisions arrive, and costs nothing idle.
                msgs = await sub.fetch(batch=want, timeout=FETCH_WAIT)
            except (nats.errors.TimeoutError, TimeoutError):
                continue
            except nats.errors.ConnectionClosedError:
                break
            except (nats.js.errors.APIError, nats.errors.Error) as exc:
                # The stream or the consumer is gone (JetStream storage lost), or NATS is away.
                log.warning("cannot fetch decisions (%r); subscribing again", exc)
                await asyncio.sleep(0.5)  # a retry delay; the loop checks ``stop`` again
                with contextlib.suppress(nats.errors.Error, TimeoutError):
                    sub = await self._subscribe()
                continue
            for msg in msgs:
                task = asyncio.create_task(self._handle(msg))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        # Graceful stop: finish what is in flight; unfetched messages stay in the stream.
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=self.ack_wait)
        with contextlib.suppress(nats.errors.Error):
            await sub.unsubscribe()

    async def _keep_alive(self) -> None:
        """Tell JetStream the messages being handled are still being worked on, so a slow call
        never lets a message be redelivered to another binder while this one still runs it."""
        while True:
            await asyncio.sleep(self.ack_wait / 3)
            for msg in list(self.working.values()):
                with contextlib.suppress(nats.errors.Error):
                    await msg.in_progress()

    # -- one message ---------------------------------------------------------------------------
    async def _handle(self, msg: Msg) -> None:
        try:
            decision = decode_decision(msg.data)
        except BadMessage as exc:
            self.metrics.bad.inc()
            log.error("unusable decision on %s: %s", msg.subject, exc)
            await dead_letter(self.js, self.names, "decision", msg.data, str(exc))
            await _quietly(msg.ack())
            return
        try:
            self.working[id(msg)] = msg
            await self._execute(msg, decision)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # never leave a message neither acknowledged nor sent back
            self.metrics.errors.inc()
            log.exception("handling decision %s failed; it will be redelivered", decision.id)
            await self._carry_out(msg, decision, settle([False], _attempts(msg), self.max_attempts), repr(exc))
        finally:
            self.working.pop(id(msg), None)

    async def _execute(self, msg: Msg, decision: Decision) -> None:
        attempts = _attempts(msg)
        if not admit(attempts, self.max_attempts):
            why = f"delivered {attempts} times without an outcome"
            await self._carry_out(msg, decision, Plan("dead", gave_up=_all_calls(decision)), why)
            return
        verdict = await self._verdict(decision)
        if verdict != "current":
            self.metrics.stale.labels(verdict).inc()
            results = await self._not_executed(decision, verdict, attempts)
        else:
            results = await self._calls(decision, propagate.extract(msg.headers or {}))
        final = [r for r in results if r is not None]
        reported = await self._report([r for r in final if r.kind in ("bind", "evict")])
        plan = settle([r is not None for r in results], attempts, self.max_attempts, reported)
        await self._carry_out(msg, decision, plan, "API calls kept failing")

    async def _verdict(self, d: Decision) -> Literal["current", "stale", "expired"]:
        if d.fence != await self.epochs.check(d.fence):
            return "stale"
        expires = d.expires if isinstance(d, Binds | Evict) else 0.0
        if expires and self.clock() > expires:
            return "expired"
        return "current"

    async def _calls(self, decision: Decision, ctx: Any) -> list[Result | None]:
        calls = len(decision.items) if isinstance(decision, Binds) else 1
        self.calls_wanted += calls
        try:
            if isinstance(decision, Binds):
                return list(await asyncio.gather(*(self._bind(decision, item, ctx) for item in decision.items)))
            return [await self._one(decision, ctx)]
        finally:
            self.calls_wanted -= calls

    async def _not_executed(self, d: Decision, verdict: Outcome, attempts: int) -> list[Result | None]:
        """Results for a decision we do not run.  On a redelivery an earlier delivery may have run
        it before it went stale, so a bind's pod is read back: the scheduler must learn a bind
        that happened, or it could place something else in the room the pod took."""
        if isinstance(d, Binds):
            if attempts <= 1:
                return [_result(d, item, verdict, _NOT_RUN[verdict]) for item in d.items]
            return list(await asyncio.gather(*(self._found(d, item, verdict) for item in d.items)))
        if isinstance(d, Evict):
            return [_result(d, None, verdict, _NOT_RUN[verdict])]
        log.info("dropping status write %s: %s", d.id, _NOT_RUN[verdict])
        return [_result(d, None, verdict, _NOT_RUN[verdict])]

    async def _found(self, d: Binds, item: BindItem, verdict: Outcome) -> Result | None:
        try:
            current = _pod.decode(await self.kube.get("pods", item.namespace, item.name)).spec.nodeName
        except NotFound:
            return _result(d, item, "gone", "the pod no longer exists")
        except KubeError:
            return None  # unknown: try again on the next delivery
        if current == item.node:
            return _result(d, item, "done", "bound by an earlier delivery")
        if current:
            return _result(d, item, "conflict", f"already bound to {current}")
        return _result(d, item, verdict, _NOT_RUN[verdict])

    async def _carry_out(self, msg: Msg, d: Decision, plan: Plan, why: str) -> None:
        if plan.action == "nak":
            await _quietly(msg.nak(delay=plan.delay))
            return
        if plan.action == "dead":
            self.metrics.dead.inc()
            failed = [self._failed(d, i, _attempts(msg)) for i in plan.gave_up]
            await self._report([r for r in failed if r.kind in ("bind", "evict")])
            log.error("giving up decision %s after %d deliveries: %s", d.id, _attempts(msg), why)
            await dead_letter(self.js, self.names, "decision", msg.data, f"given up: {why}")
        await _quietly(msg.ack())

    def _failed(self, d: Decision, index: int, attempts: int) -> Result:
        why = f"gave up after {attempts} deliveries"
        if isinstance(d, Binds):
            return _result(d, d.items[index], "failed", why)
        return _result(d, None, "failed", why)

    async def _report(self, results: list[Result]) -> bool:
        """Publish outcomes; False if they could not be (the message must then come back)."""
        if not results:
            return True
        try:
            await publish_batch(self.js, [Outgoing(self.names.result_subject, encode(r)) for r in results])
        except Exception as exc:
            log.warning("could not report %d results: %s", len(results), exc)
            return False
        return True

    # -- API calls, each in one of ``max_in_flight`` slots --------------------------------------
    async def _call(self, kind: str, ctx: Any, attrs: dict[str, Any], work: Any) -> Result | None:
        async with self.slots:
            self.metrics.in_flight.inc()
            started = time.perf_counter()
            with self.tracer.start_as_current_span(f"binder.{kind}", context=ctx, attributes=attrs) as span:
                try:
                    result: Result = await work()
                except TransientKubeError as exc:
                    span.set_attribute("lahar.retry", str(exc))
                    self.metrics.calls.labels(kind, "retry").inc()
                    return None
                finally:
                    self.metrics.in_flight.dec()
                span.set_attribute("lahar.outcome", result.outcome)
            took = time.perf_counter() - started
            self.metrics.latency.labels(kind).observe(took)
            self.metrics.calls.labels(kind, result.outcome).inc()
            if kind == "bind" and result.outcome == "done":
                self.metrics.stage.labels("Bind").observe(took * 1000)
            return result

    async def _bind(self, d: Binds, item: BindItem, ctx: Any) -> Result | None:
        attrs = {
            "lahar.decision": d.id,
            "lahar.pod": f"{item.namespace}/{item.name}",
            "lahar.job": d.job,
            "lahar.node": item.node,
        }

        async def work() -> Result:
            if not item.claims:
                return await self._bind_pod(d, item)
            # DRA, as Volcano's cache runs the predicates plugin's PreBind (kube's DynamicResources
            # PreBind) before the bind and PreBindRollBack (its Unreserve) after a failed one: the
            # claims first, so the kubelet finds the pod reserved; out of reservedFor again if
            # any claim or the bind fails.
            try:
                uid = item.uid or _uid.decode(await self.kube.get("pods", item.namespace, item.name)).metadata.uid
            except NotFound:
                return _result(d, item, "gone", "the pod no longer exists")
            names = [c.name for c in item.claims]
            try:
                await reserve_claims(self.kube, item.namespace, item.name, uid, item.claims)
            except (ClaimRefused, PermanentKubeError) as exc:
                await unreserve_claims(self.kube, item.namespace, uid, names)
                return _result(d, item, "failed", str(exc))
            result = await self._bind_pod(d, item)
            if result.outcome in ("conflict", "failed"):
                await unreserve_claims(self.kube, item.namespace, uid, names)
            return result

        return await self._call("bind", ctx, attrs, work)

    async def _bind_pod(self, d: Binds, item: BindItem) -> Result:
        try:
            if item.annotations:
                await self.kube.bind(item.namespace, item.name, item.node, item.uid, item.annotations)
            else:
                await self.kube.bind(item.namespace, item.name, item.node, item.uid)
            self.events.record(events.bound(item))
            return _result(d, item, "done")
        except NotFound:
            return _result(d, item, "gone", "the pod no longer exists")
        except Conflict:
            return await self._settle_conflict(d, item)
        except PermanentKubeError as exc:
            return _result(d, item, "failed", str(exc))

    async def _settle_conflict(self, d: Binds, item: BindItem) -> Result:
        """Already bound: success if it is where we decided, else a conflict to report."""
        try:
            current = _pod.decode(await self.kube.get("pods", item.namespace, item.name)).spec.nodeName
        except KubeError as exc:
            return _result(d, item, "conflict", f"bind conflict, and the pod could not be read: {exc}")
        if current == item.node:
            # Our bind that went through without its reply: its event was never recorded.
            self.events.record(events.bound(item))
            return _result(d, item, "done", "already bound to this node")
        return _result(d, item, "conflict", f"already bound to {current or 'another node'}")

    async def _one(self, d: Decision, ctx: Any) -> Result | None:
        kind = _tag(d)
        attrs: dict[str, Any] = {"lahar.decision": d.id}
        if isinstance(d, Evict):
            attrs.update({"lahar.pod": f"{d.namespace}/{d.name}", "lahar.job": d.job, "lahar.node": d.node})

        async def work() -> Result:
            try:
                await self._write(d)
                self._record(d)
                return _result(d, None, "done")
            except NotFound:
                return _result(d, None, "gone", "the object no longer exists")
            except PermanentKubeError as exc:
                return _result(d, None, "failed", str(exc))

        return await self._call(kind, ctx, attrs, work)

    def _record(self, d: Decision) -> None:
        """The Events of a write that went through (Volcano records them with the write)."""
        if isinstance(d, Evict):
            self.events.record(events.evicted(d))
            group = events.evicted_from_group(d)
            if group is not None:
                self.events.record(group)
        elif isinstance(d, PodStatus):
            self.events.record(events.unschedulable_pod(d))
        elif isinstance(d, PodGroupStatus):
            for note in events.podgroup_notes(d):
                self.events.record(note)

    async def _write(self, d: Decision) -> None:
        if isinstance(d, Evict):
            await self.kube.evict(d.namespace, d.name)
        elif isinstance(d, PodGroupStatus):
            await self.kube.patch("podgroups", d.namespace, d.name, {"status": d.status})
        elif isinstance(d, QueueStatus):
            await self.kube.patch("queues", "", d.name, {"status": {"allocated": d.allocated}}, sub="status")
        elif isinstance(d, PodStatus):
            cond = {"type": "PodScheduled", "status": "False", "reason": d.reason, "message": d.message}
            status: dict[str, Any] = {"conditions": [cond]}
            if d.nominated_node:
                status["nominatedNodeName"] = d.nominated_node
            await self.kube.patch("pods", d.namespace, d.name, {"status": status}, sub="status", how="strategic")


_NOT_RUN: dict[Outcome, str] = {
    "stale": "not executed: decided in an epoch that is not the current one",
    "expired": "not executed: its deadline passed",
}


def _attempts(msg: Msg) -> int:
    return int(msg.metadata.num_delivered or 1)


def _all_calls(d: Decision) -> tuple[int, ...]:
    return tuple(range(len(d.items))) if isinstance(d, Binds) else (0,)


async def _quietly(ack: Any) -> None:
    """An ack or nak that cannot reach the server is not fatal: JetStream redelivers."""
    with contextlib.suppress(nats.errors.Error, TimeoutError):
        await ack


def _result(d: Decision, item: BindItem | None, outcome: Outcome, message: str = "") -> Result:
    if item is not None:
        return Result(
            id=d.id,
            kind="bind",
            namespace=item.namespace,
            name=item.name,
            outcome=outcome,
            node=item.node,
            message=message,
        )
    return Result(
        id=d.id,
        kind=_tag(d),
        namespace=getattr(d, "namespace", ""),
        name=getattr(d, "name", ""),
        outcome=outcome,
        node=getattr(d, "node", ""),
        message=message,
    )


def _tag(d: Decision) -> str:
    return type(d).__struct_config__.tag  # type: ignore[return-value]
