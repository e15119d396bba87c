"""Kubernetes Events about what the binder carried out, as Volcano's scheduler records them.

Volcano's scheduler (pkg/scheduler/cache) records, through client-go's event recorder with the
source component "volcano": ``Scheduled`` on a pod it bound ("Successfully assigned NS/NAME to
NODE"), ``FailedScheduling`` (Warning) whenever it writes a pod's PodScheduled=False condition,
``Evict`` (Warning, "Pod is evicted, because of REASON") on a pod it evicts, and on the PodGroup
``Unschedulable`` (Warning) while it waits or ``Scheduled`` ("pod group is ready") once it runs.
The binder is where Lahar executes those writes, so it records them here.

The pure part (``Correlator``) does what client-go's ``EventCorrelator`` does, so a pod that
fails every session cannot flood the API server: a per-object token bucket (burst 25, one more
every 5 minutes), similar events (same object, type and reason; ten messages within ten minutes)
combined into one, and a repeat of the same event raising ``count`` and ``lastTimestamp`` of the
Event already written (a patch) rather than creating another.  The shell (``EventWriter``)
writes them best effort: ``record`` never waits, a full queue drops the event (counted), and API
errors drop it too.  Events never delay or fail a bind, an eviction or a status write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound
from lahar.service.metrics import ServiceMetrics
from lahar.wire.messages import BindItem, Evict, PodGroupStatus, PodStatus

log = logging.getLogger("lahar.binder.events")

SOURCE = "volcano"  # Volcano's scheduler records as its scheduler name (one name: "volcano")
NORMAL, WARNING = "Normal", "Warning"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
MAX_MESSAGE = 1024  # the API's limit on an Event's note; longer messages are cut

# client-go's defaults (tools/record/events_cache.go)
SPAM_BURST = 25
SPAM_REFILL_SECONDS = 300.0
SIMILAR_MAX = 10
SIMILAR_INTERVAL = 600.0
CACHE_ENTRIES = 4096
COMBINED = "(combined from similar events): "

# PodGroup phases in which Volcano records ``Unschedulable`` rather than ``Scheduled``.
_WAITING_PHASES = frozenset({"", "Pending", "Inqueue", "Unknown"})


# --- what to record (pure) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """An Event's involvedObject.  ``kubectl describe`` finds an object's Events by its uid."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    def as_dict(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}
        if self.uid:
            out["uid"] = self.uid
        return out


@dataclass(frozen=True)
class Note:
    """One event to record: about ``ref``, of ``type`` Normal or Warning."""

    ref: Ref
    type: str
    reason: str
    message: str


def pod_ref(namespace: str, name: str, uid: str) -> Ref:
    return Ref("v1", "Pod", namespace, name, uid)


def bound(item: BindItem) -> Note:
    message = f"Successfully assigned {item.namespace}/{item.name} to {item.node}"
    return Note(pod_ref(item.namespace, item.name, item.uid), NORMAL, "Scheduled", message)


def evicted(d: Evict) -> Note:
    """Volcano's message, whose reason is the action's name ("preempt", "reclaim", "shuffle"),
    followed by the PodGroup the room is for when the scheduler knows it."""
    message = f"Pod is evicted, because of {d.reason}"
    if d.for_job:
        message += f" for PodGroup {d.for_job}"
    return Note(pod_ref(d.namespace, d.name, d.uid), WARNING, "Evict", message)


def evicted_from_group(d: Evict) -> Note | None:
    """Volcano also records the eviction on the victim's PodGroup: Normal, the bare reason."""
    namespace, _, name = d.job.partition("/")
    if not name:
        return None
    return Note(Ref(PODGROUP_API, "PodGroup", namespace, name, d.group_uid), NORMAL, "Evict", d.reason)


def unschedulable_pod(d: PodStatus) -> Note:
    """Volcano records FailedScheduling with every PodScheduled=False condition it writes."""
    return Note(pod_ref(d.namespace, d.name, d.uid), WARNING, "FailedScheduling", d.message)


def podgroup_notes(d: PodGroupStatus) -> list[Note]:
    """As Volcano, the phase decides: a PodGroup that runs is ``Scheduled`` (its conditions keep
    the Unschedulable one of before); one that waits is ``Unschedulable`` with the condition's
    message, if it has that condition."""
    ref = Ref(PODGROUP_API, "PodGroup", d.namespace, d.name, d.uid)
    if str(d.status.get("phase") or "") not in _WAITING_PHASES:
        return [Note(ref, NORMAL, "Scheduled", "pod group is ready")]
    for cond in reversed(d.status.get("conditions") or []):
        if cond.get("type") == "Unschedulable" and cond.get("status") == "True":
            return [Note(ref, WARNING, "Unschedulable", str(cond.get("message") or ""))]
    return []


# --- rate limits and aggregation (pure) --------------------------------------------------------------


class _Lru(OrderedDict[Any, Any]):
    """A dict that forgets its least recently used entries beyond ``capacity``."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity

    def use(self, key: Any, make: Callable[[], Any]) -> Any:
        if key in self:
            self.move_to_end(key)
            return self[key]
        value = self[key] = make()
        if len(self) > self.capacity:
            self.popitem(last=False)
        return value


@dataclass
class TokenBucket:
    burst: int
    refill_seconds: float
    tokens: float = -1.0
    last: float = 0.0

    def take(self, now: float) -> bool:
        if self.tokens < 0:  # new: a full bucket
            self.tokens, self.last = float(self.burst), now
        self.tokens = min(float(self.burst), self.tokens + max(0.0, now - self.last) / self.refill_seconds)
        self.last = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


@dataclass
class _Seen:
    name: str
    count: int
    first: float


@dataclass
class _Similar:
    messages: set[str] = field(default_factory=set)
    since: float = 0.0


@dataclass(frozen=True)
class Write:
    """An Event to create (``count`` 1, or again after it vanished) or to patch (a repeat)."""

    note: Note
    name: str
    count: int
    first: float
    last: float
    create: bool


class Correlator:
    """client-go's EventCorrelator: spam filter, then similar-event aggregation, then repeats
    counted on the Event already written.  Pure: the caller passes the time."""

    def __init__(
        self,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        similar_max: int = SIMILAR_MAX,
        similar_interval: float = SIMILAR_INTERVAL,
        capacity: int = CACHE_ENTRIES,
    ) -> None:
        self.burst, self.refill = burst, refill_seconds
        self.similar_max, self.similar_interval = similar_max, similar_interval
        self.buckets = _Lru(capacity)
        self.similar = _Lru(capacity)
        self.seen = _Lru(capacity)

    def correlate(self, note: Note, now: float) -> Write | None:
        """What to write for ``note``, or None when the object's rate limit drops it."""
        bucket: TokenBucket = self.buckets.use(note.ref, lambda: TokenBucket(self.burst, self.refill))
        if not bucket.take(now):
            return None
        note = self._aggregate(note, now)
        key = (note.ref, note.type, note.reason, note.message)
        seen: _Seen | None = self.seen.get(key)
        if seen is None:
            seen = self.seen.use(key, lambda: _Seen(event_name(note.ref.name, now), 0, now))
        else:
            self.seen.move_to_end(key)
        seen.count += 1
        return Write(note, seen.name, seen.count, seen.first, now, create=seen.count == 1)

    def _aggregate(self, note: Note, now: float) -> Note:
        """After ``similar_max`` distinct messages of one (object, type, reason) within the
        interval, they are recorded as one Event whose message says so."""
        group: _Similar = self.similar.use((note.ref, note.type, note.reason), _Similar)
        if now - group.since > self.similar_interval:
            group.messages, group.since = set(), now
        group.messages.add(note.message)
        if len(group.messages) < self.similar_max:
            return note
        return Note(note.ref, note.type, note.reason, COMBINED + note.message)

    def forget(self, write: Write) -> None:
        """The write failed: the next repeat creates the Event afresh."""
        n = write.note
        self.seen.pop((n.ref, n.type, n.reason, n.message), None)


def event_name(object_name: str, now: float) -> str:
    """client-go's: the object's name and the time in hex nanoseconds."""
    return f"{object_name}.{int(now * 1e9):x}"


def timestamp(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def _cut(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 3] + "..."


def event_body(w: Write) -> dict[str, Any]:
    """A core/v1 Event as client-go's recorder makes it."""
    n = w.note
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": w.name, "namespace": n.ref.namespace or "default"},
        "involvedObject": n.ref.as_dict(),
        "reason": n.reason,
        "message": _cut(n.message),
        "type": n.type,
        "source": {"component": SOURCE},
        "reportingComponent": SOURCE,
        "firstTimestamp": timestamp(w.first),
        "lastTimestamp": timestamp(w.last),
        "count": w.count,
    }


def repeat_patch(w: Write) -> dict[str, Any]:
    return {"count": w.count, "lastTimestamp": timestamp(w.last), "message": _cut(w.note.message)}


# --- writing (the shell) -----------------------------------------------------------------------------


class EventMetrics(ServiceMetrics):
    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry)
        self.written = Counter(
            "lahar_binder_events_total", "Events written (created, or a repeat counted)", ["reason"], registry=registry
        )
        self.dropped = Counter(
            "lahar_binder_events_dropped_total",
            "Events not written: queue full, rate limited (per object), or refused/failed by the API",
            ["why"],
            registry=registry,
        )


class EventWriter:
    """Best-effort Event writes on ``workers`` tasks, each with its own bounded queue.  An
    object's notes always go to the same worker, so its create comes before its patches."""

    def __init__(
        self,
        kube: KubeClient,
        registry: CollectorRegistry,
        *,
        workers: int = 2,
        queue_size: int = 1000,
        clock: Callable[[], float] = time.time,
        correlator: Correlator | None = None,
    ) -> None:
        self.kube = kube
        self.clock = clock
        self.metrics = EventMetrics.of(registry)
        self.correlator = correlator or Correlator()
        per_worker = max(1, queue_size // workers)
        self.queues: list[asyncio.Queue[Note]] = [asyncio.Queue(per_worker) for _ in range(workers)]

    def record(self, note: Note) -> None:
        """Queue ``note``; never waits.  A full queue drops it."""
        queue = self.queues[hash(note.ref) % len(self.queues)]
        try:
            queue.put_nowait(note)
        except asyncio.QueueFull:
            self.metrics.dropped.labels("queue_full").inc()

    async def run(self) -> None:
        """The workers; runs until cancelled."""
        await asyncio.gather(*(self._work(q) for q in self.queues))

    async def _work(self, queue: asyncio.Queue[Note]) -> None:
        while True:
            note = await queue.get()
            write = self.correlator.correlate(note, self.clock())
            if write is None:
                self.metrics.dropped.labels("rate_limited").inc()
                continue
            try:
                await self._write(write)
            except Exception as exc:  # best effort: nothing here may stop the binder
                self.correlator.forget(write)
                self.metrics.dropped.labels("api_error").inc()
                level = logging.DEBUG if isinstance(exc, KubeError) else logging.WARNING
                log.log(level, "event %s on %s/%s not written: %r", note.reason, note.ref.namespace, note.ref.name, exc)
                continue
            self.metrics.written.labels(note.reason).inc()

    async def _write(self, w: Write) -> None:
        ns = w.note.ref.namespace or "default"
        if not w.create:
            try:
                await self.kube.patch("events", ns, w.name, repeat_patch(w))
                return
            except NotFound:
                pass  # expired or deleted: create it again, with its count (as client-go does)
        try:
            await self.kube.create("events", ns, event_body(w))
        except Conflict:
            # Written already (a repeat raced its create after a NotFound): count it on it.
            await self.kube.patch("events", ns, w.name, repeat_patch(w))
