"""The binder service: decisions in, Kubernetes API calls out, results back.

Replicas share one durable pull consumer on the DECISIONS work queue.  Each runs up to
``max_in_flight`` API calls at once.  A message is acknowledged only once its outcome is known
(so a replica killed mid-call loses nothing: JetStream redelivers after ``ack_wait``).  A bind is
idempotent: if the pod is already on the decided node, that is success; on another node it is a
conflict, reported, never retried blindly.  Transient failures (429, 5xx, timeouts) are
redelivered with backoff, up to ``max_attempts``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import msgspec
import nats.errors
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from nats.js.client import JetStreamContext
from opentelemetry import propagate, trace
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lahar.adapters.bus import Outgoing, dead_letter, ensure_streams, publish_batch
from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound, PermanentKubeError, TransientKubeError
from lahar.service.metrics import ServiceMetrics
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

log = logging.getLogger("lahar.binder")


class _PodSpec(msgspec.Struct):
    nodeName: str = ""


class _Pod(msgspec.Struct):
    spec: _PodSpec = msgspec.field(default_factory=_PodSpec)


_pod = msgspec.json.Decoder(_Pod)


class Metrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.calls = Counter(
            "lahar_binder_calls_total", "API calls by decision kind and outcome", ["kind", "outcome"], registry=registry
        )
        self.latency = Histogram("lahar_binder_call_seconds", "API call latency", ["kind"], registry=registry)
        self.in_flight = Gauge("lahar_binder_in_flight", "API calls in flight", registry=registry)
        self.bad = Counter("lahar_binder_bad_messages_total", "Unusable decision messages", registry=registry)
        self.stale = Counter("lahar_binder_stale_total", "Decisions from a superseded leader", registry=registry)


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
    ) -> None:
        self.kube, self.js, self.names = kube, js, names
        self.max_in_flight = max_in_flight
        self.max_attempts = max_attempts
        self.ack_wait = ack_wait
        self.tracer = tracer or trace.get_tracer("lahar.binder")
        self.metrics = Metrics.of(registry)
        self.slots = asyncio.Semaphore(max_in_flight)  # API calls in flight
        self.calls_wanted = 0  # API calls of the messages being handled (running or waiting)
        self.tasks: set[asyncio.Task[None]] = set()
        self.fence = 0
        self.ready = asyncio.Event()

    async def run(self, stop: asyncio.Event) -> None:
        await ensure_streams(self.js, self.names)
        sub = await self.js.pull_subscribe(
            self.names.decision_subjects,
            durable=self.names.binder_consumer,
            stream=self.names.decisions_stream,
            config=ConsumerConfig(
                ack_policy=AckPolicy.EXPLICIT,
                ack_wait=self.ack_wait,
                max_ack_pending=max(10_000, self.max_in_flight * 8),
            ),
        )
        self.ready.set()
        while not stop.is_set():
            # Messages are fetched while API-call slots are free; a bind group uses one per pod.
            if self.calls_wanted >= self.max_in_flight:
                await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            want = max(1, (self.max_in_flight - self.calls_wanted) // 8)
            try:
                # A long poll: it returns as soon as decisions arrive, and costs nothing idle.
                msgs = await sub.fetch(batch=want, timeout=2.0)
            except (nats.errors.TimeoutError, TimeoutError):
                continue
            except nats.errors.ConnectionClosedError:
                break
            for msg in msgs:
                task = asyncio.create_task(self._handle(msg))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
        # Graceful stop: finish what is in flight; unfetched messages stay in the stream.
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=self.ack_wait)
        await sub.unsubscribe()

    # -- one message ---------------------------------------------------------------------------
    async def _handle(self, msg: Msg) -> None:
        try:
            decision = decode_decision(msg.data)
        except BadMessage as exc:
            self.metrics.bad.inc()
            log.error("unusable decision on %s: %s", msg.subject, exc)
            await dead_letter(self.js, self.names, "decision", msg.data, str(exc))
            await msg.ack()
            return
        if decision.fence < self.fence:
            self.metrics.stale.inc()
            log.warning("dropping decision %s from a superseded leader", decision.id)
            await msg.ack()
            return
        self.fence = max(self.fence, decision.fence)
        ctx = propagate.extract(msg.headers or {})
        calls = len(decision.items) if isinstance(decision, Binds) else 1
        self.calls_wanted += calls
        try:
            if isinstance(decision, Binds):
                results = await asyncio.gather(*(self._bind(decision, item, ctx) for item in decision.items))
            else:
                results = [await self._one(decision, ctx)]
        finally:
            self.calls_wanted -= calls
        if any(r is None for r in results):  # a transient failure: redeliver the whole message
            attempts = msg.metadata.num_delivered
            if attempts < self.max_attempts:
                await self._report([r for r in results if r is not None])
                await msg.nak(delay=min(0.2 * 2**attempts, 10.0))
                return
            results = [r or self._failed(decision, i, attempts) for i, r in enumerate(results)]
        await self._report([r for r in results if r is not None and r.kind in ("bind", "evict")])
        await msg.ack()

    def _failed(self, d: Decision, index: int, attempts: int) -> Result:
        why = f"gave up after {attempts} attempts"
        if isinstance(d, Binds):
            return _result(d, d.items[index], "failed", why)
        return _result(d, None, "failed", why)

    async def _report(self, results: list[Result]) -> None:
        if not results:
            return
        try:
            await publish_batch(self.js, [Outgoing(self.names.result_subject, encode(r)) for r in results])
        except Exception as exc:  # the scheduler also learns from the pod itself
            log.warning("could not report %d results: %s", len(results), exc)

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
            self.metrics.latency.labels(kind).observe(time.perf_counter() - started)
            self.metrics.calls.labels(kind, result.outcome).inc()
            return result

    async def _bind(self, d: Binds, item: BindItem, ctx: Any) -> Result | None:
        attrs = {
            "lahar.decision": d.id,
            "lahar.pod": f"{item.namespace}/{item.name}",
            "lahar.job": d.job,
            "lahar.node": item.node,
        }

        async def work() -> Result:
            try:
                await self.kube.bind(item.namespace, item.name, item.node, item.uid)
                return _result(d, item, "done")
            except NotFound:
                return _result(d, item, "gone", "the pod no longer exists")
            except Conflict:
                return await self._settle_conflict(d, item)
            except PermanentKubeError as exc:
                return _result(d, item, "failed", str(exc))

        return await self._call("bind", ctx, attrs, work)

    async def _settle_conflict(self, d: Binds, item: BindItem) -> Result:
        """Already bound: success if it is where we decided, else a conflict to report."""
        try:
            current = _pod.decode(await self.kube.get("pods", item.namespace, item.name)).spec.nodeName
        except KubeError as exc:
            return _result(d, item, "conflict", f"bind conflict, and the pod could not be read: {exc}")
        if current == item.node:
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
                return _result(d, None, "done")
            except NotFound:
                return _result(d, None, "gone", "the object no longer exists")
            except PermanentKubeError as exc:
                return _result(d, None, "failed", str(exc))

        return await self._call(kind, ctx, attrs, work)

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
