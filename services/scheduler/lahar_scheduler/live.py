"""The scheduler's snapshot, kept current from the mirror, the cluster's deltas and the binders'
reports.  No I/O: the service shell feeds it messages and turns what it returns into messages,
spans and metrics.

Besides the snapshot it keeps the binds assumed but not yet seen (``Assumptions``), the span
context of each waiting pod's creation (for the session span's links), and the pods it cannot
read (each gets a condition saying why, from whichever replica leads).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from lahar.adapters.mirror import MirrorState
from lahar.api.codec import DecodeError
from lahar.api.objects import AllocationResult
from lahar.wire.messages import NO_OBJECT, Binds, Delta, Result
from lahar_scheduler.assumptions import Assumptions, Effect
from lahar_scheduler.deltas import Change, apply_delta, decode, decode_raw
from lahar_scheduler.framework.devices import card_use
from lahar_scheduler.framework.snapshot import DraObjects, Snapshot
from lahar_scheduler.framework.types import TaskStatus
from lahar_scheduler.gcpause import collector_paused
from lahar_scheduler.podspecs import PodDecoder

log = logging.getLogger("lahar.scheduler")

KINDS = (
    "nodes",
    "pods",
    "podgroups",
    "queues",
    "priorityclasses",
    "namespaces",
    "resourcequotas",
    "numatopologies",
    "poddisruptionbudgets",
    "hypernodes",
    "resourceclaims",
    "resourceslices",
    "deviceclasses",
)
MAX_LINKS = 50_000  # creation span contexts kept for pods still waiting (the oldest go first)
MAX_INVALID = 10_000


@dataclass
class Loaded:
    objects: int = 0
    skipped: list[tuple[str, str, str]] | None = None  # (kind, key, why) of objects that could not be read


class LiveView:
    def __init__(self, now: float = 0.0) -> None:
        self.snapshot = Snapshot([], [], [], [], now=now)
        self.assumptions = Assumptions()
        self.links: dict[str, Any] = {}  # pod -> the span context of its creation delta
        self.invalid: dict[str, str] = {}  # pod -> why the scheduler cannot read it
        self.rollbacks = 0
        # GPU cards chosen for assumed binds (pod -> the annotations its Binding carries), so a
        # pod placed again from its assumption holds its cards again until the cache shows it.
        self.cards: dict[str, dict[str, str]] = {}

    # -- the mirror --------------------------------------------------------------------------
    def load(self, state: MirrorState, now: float) -> Loaded:
        """Replace the snapshot with the mirror's objects; one unreadable object never stops the
        load: it is skipped and reported.

        The load makes a few million objects that live as long as the snapshot.  The cyclic
        garbage collector would scan the growing heap again and again meanwhile (it took 40% of
        a load at 50,000 pods), and then once more, whole, in the first session; so it is paused
        during the load, and what exists after it is frozen (``gc.freeze``: never scanned, still
        freed by reference counting).  A reload unfreezes first, and collects once after, so
        the old snapshot's cycles (nodes and their table) are not kept frozen forever."""
        reload = bool(self.snapshot.tasks or self.snapshot.node_objects)
        with collector_paused():
            gc.unfreeze()
            loaded = self._load(state, now)
            if reload:
                gc.collect()
            # Frozen before the collector is on again: its first automatic pass would otherwise
            # scan every object the load made (seconds at 50,000 pods).
            gc.freeze()
        return loaded

    def _load(self, state: MirrorState, now: float) -> Loaded:
        decoded: dict[str, list[Any]] = {k: [] for k in KINDS}
        spec_shapes: list[bytes | None] = []  # of decoded["pods"], one each
        pods = PodDecoder()  # each distinct pod spec decoded once (see podspecs)
        assumed = self.snapshot.dra.assumed
        skipped: list[tuple[str, str, str]] = []
        self.invalid.clear()
        for kind, held in state.objects.items():
            for key, raw in held.items():
                try:
                    if kind == "pods":
                        obj, shape = pods.decode(key, raw)
                    else:
                        obj, shape = decode_raw(kind, key, raw), None
                except Exception as exc:  # any failure to read one object: skip it, say why
                    skipped.append((kind, key, str(exc)))
                    if kind == "pods" and not _has_node(raw):
                        self._mark_invalid(key, str(exc))
                    continue
                if obj is not None:
                    decoded[kind].append(obj)
                    if kind == "pods":
                        spec_shapes.append(shape)
        self.snapshot = Snapshot(
            decoded["nodes"],
            decoded["pods"],
            decoded["podgroups"],
            decoded["queues"],
            decoded["priorityclasses"],
            decoded["namespaces"],
            now=now,
            resource_quotas=decoded["resourcequotas"],
            numatopologies=decoded["numatopologies"],
            pdbs=decoded["poddisruptionbudgets"],
            hypernodes=decoded["hypernodes"],
            spec_shapes=spec_shapes,
            dra=DraObjects(
                slices=decoded["resourceslices"],
                classes={c.metadata.name: c for c in decoded["deviceclasses"]},
            ),
        )
        for claim in decoded["resourceclaims"]:
            self.snapshot.dra.upsert_claim(claim)
        for key, ours in assumed.items():  # our allocations the mirror does not show yet
            if key in self.snapshot.dra.claims and self.snapshot.dra.allocation(key) is None:
                self.snapshot.dra.assumed[key] = ours
        for key, node in list(self.assumptions.items()):
            self._effect(key, ("place", node))
        self.links = {k: v for k, v in self.links.items() if self._waiting(k)}
        return Loaded(sum(len(v) for v in decoded.values()), skipped)

    # -- deltas --------------------------------------------------------------------------------
    def apply(self, delta: Delta, trace_context: Any = None) -> Change:
        """Apply one delta.  Raises (DecodeError, or what a malformed object makes the snapshot
        raise) for a delta that must be dead-lettered; an unreadable pod is first forgotten and
        recorded, so it gets a condition."""
        try:
            obj = decode(delta)
        except DecodeError as exc:
            if delta.kind == "pods":
                namespace, _, name = delta.key.rpartition("/")
                self.snapshot.delete_pod(namespace, name)
                if not _has_node(delta.obj):
                    self._mark_invalid(delta.key, str(exc))
            raise
        change = apply_delta(self.snapshot, delta, obj)
        if delta.kind == "pods":
            self._pod_changed(delta, trace_context)
        return change

    def _pod_changed(self, delta: Delta, trace_context: Any) -> None:
        key = delta.key
        self.invalid.pop(key, None)
        task = self.snapshot.tasks.get(key)
        pod_node = None if delta.op == "DELETED" or task is None else task.pod.spec.node_name
        self._effect(key, self.assumptions.observe(key, pod_node))
        if pod_node != "":
            self.cards.pop(key, None)  # bound (its pod carries the cards now) or gone
        if pod_node is None:
            self.snapshot.dra.forget_assumed(key)  # gone: its claims' allocations may never be written
        if pod_node == "" and delta.op == "ADDED" and trace_context is not None:
            if len(self.links) >= MAX_LINKS:
                self.links.pop(next(iter(self.links)))
            self.links[key] = trace_context
        elif pod_node != "":
            self.links.pop(key, None)

    # -- binders' reports and our own decisions ---------------------------------------------------
    def result(self, res: Result) -> bool:
        """Apply a binder's report; True when a bind was rolled back (room freed)."""
        if res.kind != "bind":
            return False
        key = f"{res.namespace}/{res.name}"
        task = self.snapshot.tasks.get(key)
        pod_node = None if task is None else task.pod.spec.node_name
        return self._effect(key, self.assumptions.result(key, res.outcome, res.node, pod_node), res.message)

    def assume(self, binds: Iterable[Binds]) -> None:
        """Decisions just published: their pods count as placed until a report or the cache says."""
        for group in binds:
            for item in group.items:
                key = f"{item.namespace}/{item.name}"
                self.assumptions.assume(key, item.node, group.expires)
                if item.annotations:
                    self.cards[key] = item.annotations
                for claim in item.claims:
                    if claim.allocation != NO_OBJECT:
                        allocation = _allocation.decode(claim.allocation)
                        self.snapshot.dra.assumed[f"{item.namespace}/{claim.name}"] = (key, allocation)

    def expire(self, now: float) -> int:
        """Roll back assumptions whose decisions can no longer run; how many."""
        gone = self.assumptions.expire(now)
        for key in gone:
            self._effect(key, ("release",), "its decision expired without a report")
        return len(gone)

    # -- helpers -----------------------------------------------------------------------------------
    def _effect(self, key: str, effect: Effect, why: str = "") -> bool:
        if effect is None:
            return False
        task = self.snapshot.tasks.get(key)
        if task is None:
            return False
        if effect[0] == "place":
            node = effect[1]
            if task.status == TaskStatus.PENDING and node in self.snapshot.nodes.by_name:
                held = self.cards.get(key)
                if held is not None and task.devreq is not None:
                    task.card_annotations = held
                    task.cards = card_use(held, task.devreq)
                self.snapshot.move(task, TaskStatus.BINDING, node)
            return False
        self.cards.pop(key, None)
        self.snapshot.dra.forget_assumed(key)
        if task.status == TaskStatus.BINDING and not task.pod.spec.node_name:
            self.snapshot.move(task, TaskStatus.PENDING, "")
            self.rollbacks += 1
            log.info("bind of %s rolled back: %s", key, why)
            return True
        return False

    def _waiting(self, key: str) -> bool:
        task = self.snapshot.tasks.get(key)
        return task is not None and not task.pod.spec.node_name

    def _mark_invalid(self, key: str, why: str) -> None:
        if len(self.invalid) >= MAX_INVALID:
            self.invalid.pop(next(iter(self.invalid)))
        self.invalid[key] = why


_allocation = msgspec.json.Decoder(AllocationResult)


class _NodeName(msgspec.Struct):
    nodeName: str = ""


class _Placed(msgspec.Struct):
    spec: _NodeName = msgspec.field(default_factory=_NodeName)


def _has_node(raw: bytes | msgspec.Raw) -> bool:
    try:
        return bool(msgspec.json.decode(raw, type=_Placed).spec.nodeName)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return False
