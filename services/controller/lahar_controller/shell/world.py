"""The cluster as the controller sees it: every object of the kinds it follows, from the mirror
and the deltas, handed to listeners as informer events.

A listener gets ``(old, new)``: ``(None, obj)`` for an addition, ``(previous, obj)`` for an update
(the previous version is kept per key, so a rule can compare phases), ``(obj, None)`` for a
deletion.  Loading the mirror again (after a gap) is diffed against what is held, so deletions
missed meanwhile become events too.  An object that does not decode, or that a listener fails on,
is counted and skipped; the others go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
from prometheus_client import Counter

from lahar.adapters.mirror import MirrorState
from lahar.wire.messages import Delta

log = logging.getLogger("lahar.controller")

Obj = dict[str, Any]
Listener = Callable[[Obj | None, Obj | None], None]


class BadObject(ValueError):
    pass


def decode(raw: bytes) -> Obj:
    obj = msgspec.json.decode(raw)
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        raise BadObject(f"not a Kubernetes object: {type(obj).__name__}")
    return obj


def _rv(obj: Obj) -> str:
    return str(obj["metadata"].get("resourceVersion") or "")


def namespace_of(key: str) -> str:
    return key.partition("/")[0] if "/" in key else ""


class World:
    def __init__(self, kinds: Iterable[str], bad: Counter) -> None:
        self.kinds = tuple(kinds)
        self.objects: dict[str, dict[str, Obj]] = {k: {} for k in self.kinds}
        self.bad = bad  # one label: why
        self._listeners: dict[str, list[Listener]] = {k: [] for k in self.kinds}
        self._namespaces: dict[str, dict[str, set[str]]] = {}  # kind -> namespace -> keys

    def listen(self, kind: str, listener: Listener) -> None:
        self._listeners[kind].append(listener)

    def forget_listeners(self) -> None:
        """Stop handing events to anyone (a deposed replica's controllers); the world follows on."""
        for listeners in self._listeners.values():
            listeners.clear()

    def replay(self) -> None:
        """Hand every object held to the listeners as an addition, kind by kind in ``kinds`` order,
        as a first load would (controllers attached to a warm world start from all of it)."""
        for kind in self.kinds:
            for key, obj in list(self.objects[kind].items()):
                self._tell(kind, key, None, obj)

    def index_by_namespace(self, kind: str) -> None:
        if kind in self._namespaces:
            return
        self._namespaces[kind] = {}
        for key in self.objects[kind]:  # a world already warm when the index is asked for
            self._index(kind, key, present=True)

    # -- reading -----------------------------------------------------------------------------------
    def get(self, kind: str, key: str) -> Obj | None:
        return self.objects[kind].get(key)

    def of_kind(self, kind: str) -> Iterable[Obj]:
        return self.objects[kind].values()

    def in_namespace(self, kind: str, namespace: str) -> list[Obj]:
        keys = self._namespaces[kind].get(namespace, set())
        return [self.objects[kind][k] for k in keys]

    def names_in(self, kind: str, namespace: str) -> frozenset[str]:
        return frozenset(k.partition("/")[2] for k in self._namespaces[kind].get(namespace, set()))

    # -- following ---------------------------------------------------------------------------------
    def load(self, state: MirrorState) -> None:
        """Take the mirror's objects; what differs from what is held becomes events."""
        for kind in self.kinds:
            fresh: dict[str, Obj] = {}
            for key, raw in state.objects.get(kind, {}).items():
                try:
                    fresh[key] = decode(raw)
                except (msgspec.DecodeError, BadObject) as exc:
                    self.bad.labels("object").inc()
                    log.error("skipping an unreadable %s %s in the mirror: %s", kind, key, exc)
            held = self.objects[kind]
            for key in [k for k in held if k not in fresh]:
                self._set(kind, key, None)
            for key, obj in fresh.items():
                old = held.get(key)
                if old is None or _rv(old) != _rv(obj):
                    self._set(kind, key, obj)

    def apply(self, delta: Delta) -> None:
        """One delta (a bad object raises: the follower dead-letters it)."""
        if delta.kind not in self.objects:
            return
        if delta.op == "DELETED":
            self._set(delta.kind, delta.key, None)
        else:
            self._set(delta.kind, delta.key, decode(bytes(delta.obj)))

    def _set(self, kind: str, key: str, new: Obj | None) -> None:
        held = self.objects[kind]
        old = held.get(key)
        if new is None:
            if old is None:
                return
            del held[key]
        else:
            held[key] = new
        self._index(kind, key, present=new is not None)
        self._tell(kind, key, old, new)

    def _tell(self, kind: str, key: str, old: Obj | None, new: Obj | None) -> None:
        for listener in self._listeners[kind]:
            try:
                listener(old, new)
            except Exception:  # one object a rule cannot take must not stop the others
                self.bad.labels("listener").inc()
                log.exception("the controller could not take a change of %s %s", kind, key)

    def _index(self, kind: str, key: str, *, present: bool) -> None:
        by_namespace = self._namespaces.get(kind)
        if by_namespace is None:
            return
        namespace = namespace_of(key)
        if present:
            by_namespace.setdefault(namespace, set()).add(key)
            return
        keys = by_namespace.get(namespace)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del by_namespace[namespace]
