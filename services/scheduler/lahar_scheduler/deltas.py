"""Applying the cache's deltas to a live snapshot (pure; the service shell feeds them in)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from lahar.api.codec import DecodeError, dec_hook, decode_json_as
from lahar.api.objects import (
    DeviceClass,
    HyperNode,
    Namespace,
    Node,
    Numatopology,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PodSpec,
    PriorityClass,
    Queue,
    ResourceClaim,
    ResourceQuota,
    ResourceSlice,
)
from lahar.api.podresources import pod_resource_causes
from lahar.api.quantity import Quantity
from lahar.wire.messages import Delta
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.framework.types import TaskStatus

_TYPES: dict[str, type[Any]] = {
    "nodes": Node,
    "pods": Pod,
    "podgroups": PodGroup,
    "queues": Queue,
    "priorityclasses": PriorityClass,
    "namespaces": Namespace,
    "resourcequotas": ResourceQuota,
    "numatopologies": Numatopology,
    "poddisruptionbudgets": PodDisruptionBudget,
    "hypernodes": HyperNode,
    "resourceclaims": ResourceClaim,
    "resourceslices": ResourceSlice,
    "deviceclasses": DeviceClass,
}


@dataclass
class Change:
    """What a delta changed, so the service knows whether to start a session early."""

    pending: bool = False  # a pod of ours now waits for a node
    freed: bool = False  # resources were released (pod gone or finished, node added)
    relevant: bool = False  # anything the scheduler reads


class _Quantities:
    """The decode hook for quantities: one shared ``Quantity`` per distinct text (a cluster has
    few: every pod of a job asks the same), and whether a negative one went by, so the full
    check of a pod's resource lists runs only for a pod that can fail it."""

    MAX = 4096

    def __init__(self) -> None:
        self.known: dict[Any, Quantity] = {}
        self.negative = False

    def hook(self, typ: type, obj: Any) -> Any:
        if typ is not Quantity:
            return dec_hook(typ, obj)
        q = self.known.get(obj) if isinstance(obj, str) else None
        if q is not None:
            return q
        q = dec_hook(typ, obj)  # raises on what is not a quantity: the slow path names it
        if q.amount < 0:
            self.negative = True  # never kept: every pod that carries one is checked
        elif isinstance(obj, str):
            if len(self.known) >= self.MAX:
                self.known.clear()
            self.known[obj] = q
        return q


_quantities = _Quantities()
_decoders = {kind: msgspec.json.Decoder(typ, dec_hook=_quantities.hook) for kind, typ in _TYPES.items()}


def decode(delta: Delta) -> Any:
    """The typed object a delta carries, or a ``DecodeError`` naming the field.  A pod with a
    negative request, limit or overhead is a ``DecodeError`` too: counted as it says, it would
    free room on its node."""
    if delta.kind not in _decoders or not delta.has_object:
        return None
    return decode_raw(delta.kind, delta.key, delta.obj)


def decode_raw(kind: str, key: str, raw: bytes | msgspec.Raw) -> Any:
    """``decode`` for an object's JSON as the mirror holds it (None for a kind not read)."""
    decoder = _decoders.get(kind)
    if decoder is None:
        return None
    _quantities.negative = False
    try:
        obj = decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        # The slow path, for its error that names the field.
        obj = decode_json_as(bytes(raw), _TYPES[kind], f"{kind}/{key}")
    if _quantities.negative and isinstance(obj, Pod):
        causes = pod_resource_causes(obj.spec)
        if causes:
            field, why = causes[0]
            raise DecodeError(f"{kind}/{key}.{field}", why)
    return obj


_spec_decoder = msgspec.json.Decoder(PodSpec, dec_hook=_quantities.hook)


def decode_spec(raw: bytes) -> PodSpec | None:
    """A pod's spec alone, as ``decode_raw`` reads it inside a pod; None when it carries a
    negative quantity or is not a valid spec (``decode_raw`` of the whole pod then says why).
    Shared quantities come from the same hook as ``decode_raw``'s."""
    _quantities.negative = False
    try:
        spec = _spec_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    return None if _quantities.negative else spec


def apply_delta(snapshot: Snapshot, delta: Delta, obj: Any) -> Change:
    """Apply one decoded delta; ``obj`` is ``decode(delta)`` (None for kinds the scheduler ignores)."""
    kind, change = delta.kind, Change()
    namespace, _, name = delta.key.rpartition("/")
    if kind == "pods":
        _pod(snapshot, delta, obj, namespace, name, change)
    elif kind == "nodes":
        if delta.op == "DELETED":
            change.relevant = snapshot.delete_node(name)
        else:
            change.relevant = change.freed = snapshot.upsert_node(obj)
    elif kind == "podgroups":
        old = snapshot.jobs.get(f"{namespace}/{name}")
        old_spec = old.podgroup.spec if old is not None and old.podgroup is not None else None
        if delta.op == "DELETED":
            snapshot.delete_podgroup(namespace, name)
        else:
            snapshot.upsert_podgroup(obj)
        change.relevant = True
        # Status-only changes (usually the scheduler's own writes coming back) start no session.
        change.pending = delta.op == "DELETED" or old_spec is None or old_spec != obj.spec
    elif kind == "queues":
        if delta.op == "DELETED":
            snapshot.delete_queue(name)
        else:
            snapshot.upsert_queue(obj)
        change.relevant = change.pending = True
    elif kind == "priorityclasses":
        if delta.op == "DELETED":
            snapshot.delete_priority_class(name)
        else:
            snapshot.upsert_priority_class(obj)
        change.relevant = True
    elif kind == "namespaces":
        if delta.op == "DELETED":
            snapshot.namespace_labels.pop(name, None)
        else:
            snapshot.namespace_labels[name] = dict(obj.metadata.labels)
    elif kind == "resourcequotas":
        if delta.op == "DELETED":
            snapshot.delete_quota(namespace, name)
        else:
            snapshot.upsert_quota(obj)
        # Used changes as pods come and go; a quota change alone starts no session early.
        change.relevant = True
    elif kind == "numatopologies":
        if delta.op == "DELETED":
            snapshot.delete_numatopology(name)
        else:
            snapshot.upsert_numatopology(obj)
        change.relevant = True  # the exporter reports cpus as pods come and go
    elif kind == "poddisruptionbudgets":
        if delta.op == "DELETED":
            snapshot.delete_pdb(namespace, name)
        else:
            snapshot.upsert_pdb(obj)
        # disruptionsAllowed bounds victims only: no session needs to start for it.
    elif kind == "hypernodes":
        if delta.op == "DELETED":
            snapshot.delete_hypernode(name)
        else:
            snapshot.upsert_hypernode(obj)
        # A new domain may let a job that waits for one fit.
        change.relevant = change.pending = True
    elif kind in _DRA:
        _dra(snapshot, delta, obj, namespace, name, change)
    return change


_DRA = frozenset({"resourceclaims", "resourceslices", "deviceclasses"})


def _dra(snapshot: Snapshot, delta: Delta, obj: Any, namespace: str, name: str, change: Change) -> None:
    dra, gone = snapshot.dra, delta.op == "DELETED"
    if delta.kind == "resourceclaims":
        key = f"{namespace}/{name}"
        held = dra.allocation(key)
        if gone:
            dra.delete_claim(key)
        else:
            dra.upsert_claim(obj)
        # A new claim may be the one a pod waits for, and a deallocated one frees devices; other
        # status writes (usually the binder's own allocations coming back) start no session.
        change.relevant, change.pending = True, delta.op != "MODIFIED"
        change.freed = held is not None and dra.allocation(key) is None
        return
    if delta.kind == "resourceslices":
        if gone:
            dra.delete_slice(name)
        else:
            dra.upsert_slice(obj)
    elif gone:
        dra.classes.pop(name, None)
    else:
        dra.classes[name] = obj
    # New devices or a changed class may let a waiting pod fit.
    change.relevant = change.pending = True


def _pod(snapshot: Snapshot, delta: Delta, pod: Pod | None, namespace: str, name: str, change: Change) -> None:
    old = snapshot.delete_pod(namespace, name)
    if old is not None and old.node_name:
        change.freed = True
    if delta.op == "DELETED" or pod is None:
        change.relevant = old is not None
        return
    task = snapshot.upsert_pod(pod)
    if task is None:
        return
    change.relevant = True
    if task.status == TaskStatus.PENDING and task.job:
        change.pending = True
    if task.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.RELEASING):
        change.freed = True
