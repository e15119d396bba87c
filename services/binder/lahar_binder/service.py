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

from lahar.adapters.bus import dead_letter, ensure_streams
from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound, PermanentKubeError, TransientKubeError
from lahar.wire.messages import (
    BadMessage,
    Bind,
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


class Metrics:
    _by_registry: dict[int, Metrics] = {}

    @classmethod
    def of(cls, registry: CollectorRegistry) -> Metrics:
        """One set per registry: a service re-created after a leadership change reuses them."""
        got = cls._by_registry.get(id(registry))
        if got is None:
            got = cls._by_registry[id(registry)] = cls(registry)
        return got

    def __init__(self, registry: CollectorRegistry) -> None:
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
        self.slots = asyncio.Semaphore(max_in_flight)
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
            free = self._free()
            if free == 0:
                await asyncio.wait(self.tasks, return_when=asyncio.FIRST_COMPLETED)
                continue
            try:
                # A long poll: it returns as soon as decisions arrive, and costs nothing idle.
                msgs = await sub.fetch(batch=free, timeout=5.0)
            except (nats.errors.TimeoutError, TimeoutError):
                continue
            except nats.errors.ConnectionClosedError:
                break
            for msg in msgs:
                await self.slots.acquire()
                task = asyncio.create_task(self._handle(msg))
                self.tasks.add(task)
                task.add_done_callback(self._done)
        # Graceful stop: finish what is in flight; unfetched messages stay in the stream.
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=self.ack_wait)
        await sub.unsubscribe()

    def _free(self) -> int:
        return self.max_in_flight - len(self.tasks)

    def _done(self, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        self.slots.release()
        self.metrics.in_flight.set(len(self.tasks))

    # -- one decision ---------------------------------------------------------------------------
    async def _handle(self, msg: Msg) -> None:
        self.metrics.in_flight.set(len(self.tasks))
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
        kind = _tag(decision)
        attrs: dict[str, Any] = {"lahar.decision": decision.id, "lahar.kind": kind}
        if isinstance(decision, Bind | Evict):
            attrs["lahar.pod"] = f"{decision.namespace}/{decision.name}"
            attrs["lahar.job"] = decision.job
            attrs["lahar.node"] = decision.node
        started = time.perf_counter()
        with self.tracer.start_as_current_span(f"binder.{kind}", context=ctx, attributes=attrs) as span:
            try:
                result = await self._perform(decision)
            except TransientKubeError as exc:
                attempts = msg.metadata.num_delivered
                if attempts < self.max_attempts:
                    span.set_attribute("lahar.retry", attempts)
                    await msg.nak(delay=min(0.2 * 2**attempts, 10.0))
                    return
                result = self._result(decision, "failed", f"gave up after {attempts} attempts: {exc}")
            span.set_attribute("lahar.outcome", result.outcome)
        self.metrics.latency.labels(kind).observe(time.perf_counter() - started)
        self.metrics.calls.labels(kind, result.outcome).inc()
        if isinstance(decision, Bind | Evict):
            await self._report(result)
        await msg.ack()

    async def _report(self, result: Result) -> None:
        try:
            await self.js.publish(self.names.result_subject, encode(result))
        except Exception as exc:
            log.warning("could not report %s: %s", result.id, exc)

    def _result(self, d: Decision, outcome: Outcome, message: str = "") -> Result:
        name = getattr(d, "name", "")
        node = getattr(d, "node", "")
        return Result(
            id=d.id,
            kind=_tag(d),
            namespace=getattr(d, "namespace", ""),
            name=name,
            outcome=outcome,
            node=node,
            message=message,
        )

    async def _perform(self, d: Decision) -> Result:
        try:
            if isinstance(d, Bind):
                return await self._bind(d)
            if isinstance(d, Evict):
                await self.kube.evict(d.namespace, d.name)
            elif isinstance(d, PodGroupStatus):
                await self.kube.patch("podgroups", d.namespace, d.name, {"status": d.status})
            elif isinstance(d, QueueStatus):
                await self.kube.patch("queues", "", d.name, {"status": {"allocated": d.allocated}}, sub="status")
            elif isinstance(d, PodStatus):
                await self._pod_status(d)
            return self._result(d, "done")
        except NotFound:
            return self._result(d, "gone", "the object no longer exists")
        except PermanentKubeError as exc:
            return self._result(d, "failed", str(exc))

    async def _bind(self, d: Bind) -> Result:
        try:
            await self.kube.bind(d.namespace, d.name, d.node, d.uid)
            return self._result(d, "done")
        except Conflict:
            # Already bound: success if it is where we decided, else a conflict to report.
            try:
                current = _pod.decode(await self.kube.get("pods", d.namespace, d.name)).spec.nodeName
            except KubeError as exc:
                return self._result(d, "conflict", f"bind conflict, and the pod could not be read: {exc}")
            if current == d.node:
                return self._result(d, "done", "already bound to this node")
            return self._result(d, "conflict", f"already bound to {current or 'another node'}")

    async def _pod_status(self, d: PodStatus) -> None:
        cond = {"type": "PodScheduled", "status": "False", "reason": d.reason, "message": d.message}
        status: dict[str, Any] = {"conditions": [cond]}
        if d.nominated_node:
            status["nominatedNodeName"] = d.nominated_node
        await self.kube.patch("pods", d.namespace, d.name, {"status": status}, sub="status", how="strategic")


def _tag(d: Decision) -> str:
    return type(d).__struct_config__.tag  # type: ignore[return-value]
