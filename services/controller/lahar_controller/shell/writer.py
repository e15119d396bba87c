"""Performing the rules' effects through the API: in order, fenced, idempotent where Kubernetes
lets it be.

* ``Create``: an object that already exists counts as created.  ``Delete``: one already gone
  counts as deleted.  ``Annotate``: a merge patch; a pod already gone is left alone.
* ``Update`` / ``UpdateStatus``: PUT with the resourceVersion the step read, so a write over a
  newer object fails (Conflict) and the request is retried on fresher data; a second write to the
  same object in one step takes the resourceVersion the first one returned.
* ``Apply``: create, or overwrite the existing object (read first for its resourceVersion); the
  content last applied is remembered, so a step that asks for the same content again costs no call.
* ``Event``: a core/v1 Event, best effort (a failed event never fails the step); the same Warning
  about the same object is sent at most once per ``WARNING_EVERY`` seconds.

Consecutive effects on pods (a job's creations, a kill's mark-then-delete) run concurrently, one
chain per pod, at most ``pod_concurrency`` calls at once.  A failed effect stops the rest: the
step's error says why and the caller retries the request.  Before every call the replica checks
it still leads (``may_write``); a deposed one raises ``Deposed`` and writes nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound
from lahar_controller.job.effects import Annotate, Apply, Create, Delete, Effect, Event, Update, UpdateStatus
from lahar_controller.kubetime import format_time
from lahar_controller.shell.calls import NotAllowed, UnknownKind, check, resource_of
from lahar_controller.shell.metrics import Metrics

log = logging.getLogger("lahar.controller")

Obj = dict[str, Any]
Ref = tuple[str, str, str]  # (resource, namespace, name)
WARNING_EVERY = 30.0
COMPONENT = "lahar-controller"
MESSAGE_LIMIT = 1024


class Deposed(Exception):
    """This replica no longer leads: it must not write."""


@dataclass
class Done:
    error: str = ""  # non-empty: an effect failed and the ones after it were not performed
    written: dict[Ref, Obj] = field(default_factory=dict)  # objects as the API returned them
    created: list[Ref] = field(default_factory=list)  # what this run created (not updated)


def _meta(obj: Obj) -> Obj:
    m: Obj = obj.get("metadata") or {}
    return m


def ref_of(obj: Obj) -> Ref:
    meta = _meta(obj)
    resource = resource_of(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    return resource, meta.get("namespace") or "", meta["name"]


def _is_pod(effect: Effect) -> bool:
    if isinstance(effect, Create):
        return effect.obj.get("kind") == "Pod" and effect.obj.get("apiVersion") == "v1"
    if isinstance(effect, (Delete, Annotate)):
        return effect.kind == "Pod" and effect.api_version == "v1"
    return False


def _pod_name(effect: Effect) -> str:
    if isinstance(effect, Create):
        return str(_meta(effect.obj).get("name", ""))
    assert isinstance(effect, (Delete, Annotate))
    return effect.name


def _decode(body: bytes) -> Obj:
    got = msgspec.json.decode(body)
    return got if isinstance(got, dict) else {}


class Writer:
    def __init__(
        self,
        kube: KubeClient,
        may_write: Callable[[], bool],
        metrics: Metrics,
        *,
        identity: str = COMPONENT,
        pod_concurrency: int = 64,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube, self.may_write, self.metrics = kube, may_write, metrics
        self.identity = identity
        self.clock = clock
        self._pods = asyncio.Semaphore(pod_concurrency)
        self._applied: dict[Ref, bytes] = {}
        self._warned: dict[tuple[str, str, str], float] = {}

    async def run(self, effects: Sequence[Effect]) -> Done:
        done = Done()
        i = 0
        while i < len(effects) and not done.error:
            if _is_pod(effects[i]):
                j = i
                while j < len(effects) and _is_pod(effects[j]):
                    j += 1
                await self._pod_run(effects[i:j], done)
                i = j
            else:
                done.error = await self._guarded(effects[i], done)
                i += 1
        return done

    async def _pod_run(self, effects: Sequence[Effect], done: Done) -> None:
        chains: dict[str, list[Effect]] = {}
        for effect in effects:
            chains.setdefault(_pod_name(effect), []).append(effect)
        errors: list[str] = []

        async def chain(steps: list[Effect]) -> None:
            for step in steps:
                async with self._pods:
                    error = await self._guarded(step, done)
                if error:
                    errors.append(error)
                    return

        try:
            async with asyncio.TaskGroup() as group:
                for steps in chains.values():
                    group.create_task(chain(steps))
        except* Deposed:
            raise Deposed from None
        if errors:
            done.error = errors[0] if len(errors) == 1 else f"{errors[0]} (and {len(errors) - 1} more)"

    async def _guarded(self, effect: Effect, done: Done) -> str:
        """Perform one effect; the reason it failed, or ""."""
        try:
            await self._one(effect, done)
        except (KubeError, UnknownKind) as exc:
            return f"{type(effect).__name__} {_describe(effect)}: {exc}"
        except NotAllowed as exc:
            log.error("%s", exc)
            return str(exc)
        return ""

    async def _one(self, effect: Effect, done: Done) -> None:
        if isinstance(effect, Create):
            await self.create(effect.obj, done)
        elif isinstance(effect, Apply):
            await self._apply(effect.obj, done)
        elif isinstance(effect, Update):
            await self.update(effect.obj, done)
        elif isinstance(effect, UpdateStatus):
            await self.update(effect.obj, done, sub="status")
        elif isinstance(effect, Delete):
            await self.delete(resource_of(effect.api_version, effect.kind), effect.namespace, effect.name)
        elif isinstance(effect, Annotate):
            patch = {"metadata": {"annotations": effect.annotations}}
            await self.patch(resource_of(effect.api_version, effect.kind), effect.namespace, effect.name, patch)
        else:
            await self.event(effect)

    # -- calls -------------------------------------------------------------------------------------
    def _allow(self, verb: str, resource: str) -> None:
        check(verb, resource)
        if not self.may_write():
            raise Deposed(f"not leading: {verb} {resource} not performed")

    def _count(self, verb: str, resource: str, exc: KubeError | None = None) -> None:
        if exc is None:
            self.metrics.writes.labels(resource, verb).inc()
        else:
            self.metrics.write_errors.labels(resource, verb, exc.reason or str(exc.status)).inc()

    async def create(self, obj: Obj, done: Done | None = None) -> bool:
        """Create; False when it already existed."""
        resource, namespace, _ = ref = ref_of(obj)
        self._allow("create", resource)
        try:
            body = await self.kube.create(resource, namespace, obj)
        except Conflict:
            return False
        except KubeError as exc:
            self._count("create", resource, exc)
            raise
        self._count("create", resource)
        if done is not None:
            done.written[ref] = _decode(body)
            done.created.append(ref)
        return True

    async def update(self, obj: Obj, done: Done, sub: str = "") -> None:
        resource, namespace, name = ref = ref_of(obj)
        verb_on = f"{resource}/{sub}" if sub else resource
        self._allow("update", verb_on)
        before = done.written.get(ref)
        if before is not None:  # the object changed under this step already: write over that
            rv = _meta(before).get("resourceVersion")
            obj = {**obj, "metadata": {**_meta(obj), "resourceVersion": rv}}
        try:
            body = await self.kube.replace(resource, namespace, name, obj, sub=sub)
        except KubeError as exc:
            self._count("update", verb_on, exc)
            raise
        self._count("update", verb_on)
        done.written[ref] = _decode(body)

    async def get(self, resource: str, namespace: str, name: str) -> Obj:
        """A fresh read (raises NotFound)."""
        check("get", resource)
        return _decode(await self.kube.get(resource, namespace, name))

    async def _apply(self, obj: Obj, done: Done) -> None:
        ref = ref_of(obj)
        content = msgspec.json.encode(obj)
        if self._applied.get(ref) == content:
            return
        self._applied.pop(ref, None)
        if not await self.create(obj, done):
            await self._overwrite(obj, done)
        self._applied[ref] = content

    async def _overwrite(self, obj: Obj, done: Done) -> None:
        resource, namespace, name = ref_of(obj)
        current = await self.get(resource, namespace, name)
        keep = {k: v for k, v in _meta(current).items() if k in ("resourceVersion", "uid", "creationTimestamp")}
        wanted = {**obj, "metadata": {**_meta(obj), **keep}}
        if all(wanted.get(k) == current.get(k) for k in wanted if k != "metadata"):
            return
        await self.update(wanted, done)

    async def delete(self, resource: str, namespace: str, name: str, **options: str) -> bool:
        """Delete; False when it was already gone."""
        self._allow("delete", resource)
        self._applied.pop((resource, namespace, name), None)
        try:
            await self.kube.delete(resource, namespace, name, **options)
        except NotFound:
            return False
        except KubeError as exc:
            self._count("delete", resource, exc)
            raise
        self._count("delete", resource)
        return True

    async def patch(self, resource: str, namespace: str, name: str, patch: Obj, sub: str = "") -> bool:
        """Merge patch; False when the object is gone."""
        verb_on = f"{resource}/{sub}" if sub else resource
        self._allow("patch", verb_on)
        try:
            await self.kube.patch(resource, namespace, name, patch, sub=sub)
        except NotFound:
            return False
        except KubeError as exc:
            self._count("patch", verb_on, exc)
            raise
        self._count("patch", verb_on)
        return True

    async def event(self, effect: Event) -> None:
        """Best effort: an event that cannot be written is counted and dropped."""
        if effect.type == "Warning" and self._recently_warned(effect):
            return
        obj = event_object(effect, self.clock(), self.identity)
        self._allow("create", "events")
        try:
            await self.kube.create("events", obj["metadata"]["namespace"], obj)
        except KubeError as exc:
            self._count("create", "events", exc)
            log.info("event %s on %s not written: %s", effect.reason, effect.about.get("name"), exc)
            return
        self._count("create", "events")

    def _recently_warned(self, effect: Event) -> bool:
        now = time.monotonic()
        key = (str(effect.about.get("uid") or effect.about.get("name")), effect.reason, effect.message)
        if now - self._warned.get(key, -WARNING_EVERY) < WARNING_EVERY:
            return True
        if len(self._warned) > 10_000:  # forget the old ones now and then
            self._warned = {k: t for k, t in self._warned.items() if now - t < WARNING_EVERY}
        self._warned[key] = now
        return False


def event_object(effect: Event, now: datetime, identity: str) -> Obj:
    about = effect.about
    stamp = format_time(now)
    involved = {k: about[k] for k in ("apiVersion", "kind", "namespace", "name", "uid") if about.get(k)}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{about.get('name', 'object')}.{secrets.token_hex(8)}",
            "namespace": about.get("namespace") or "default",
        },
        "involvedObject": involved,
        "type": effect.type,
        "reason": effect.reason,
        "message": effect.message[:MESSAGE_LIMIT],
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": identity,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


def _describe(effect: Effect) -> str:
    if isinstance(effect, (Create, Apply, Update, UpdateStatus)):
        meta = _meta(effect.obj)
        return f"{effect.obj.get('kind')} {meta.get('namespace') or ''}/{meta.get('name')}".replace(" /", " ")
    if isinstance(effect, (Delete, Annotate)):
        return f"{effect.kind} {effect.namespace}/{effect.name}".replace(" /", " ")
    return f"event {effect.reason}"
