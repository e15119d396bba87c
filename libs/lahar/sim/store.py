"""The object store: one global resourceVersion counter (as etcd's revision), a table per
resource, a bounded event history per table (the watch cache) and the live watchers.

Objects are plain dicts that are never mutated once stored; each is kept next to its JSON
bytes, encoded once at write time, so that lists and watch fan-out only join bytes.  Everything
here runs on the event loop thread, so a write and its fan-out are atomic without locks.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from lahar.sim.resources import ResourceType
from lahar.sim.selectors import Predicate

Obj = dict[str, Any]
_encode = msgspec.json.Encoder().encode

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


class Entry:
    __slots__ = ("obj", "raw", "rv")

    def __init__(self, obj: Obj, raw: bytes, rv: int) -> None:
        self.obj = obj
        self.raw = raw
        self.rv = rv


class Event:
    __slots__ = ("_line", "obj", "prev", "raw", "rv", "type")

    def __init__(self, type_: str, obj: Obj, raw: bytes, rv: int, prev: Obj | None) -> None:
        self.type = type_
        self.obj = obj
        self.raw = raw
        self.rv = rv
        self.prev = prev
        self._line: bytes | None = None

    @property
    def line(self) -> bytes:
        """The watch-stream line, built once and shared by every watcher."""
        if self._line is None:
            self._line = watch_line(self.type, self.raw)
        return self._line


def watch_line(type_: str, raw: bytes) -> bytes:
    return b'{"type":"' + type_.encode() + b'","object":' + raw + b"}\n"


def object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Watcher:
    """One watch stream's filter and its pending output."""

    # A watcher that falls this far behind is closed, as the real server drops slow watchers;
    # the client re-watches from its last resourceVersion.
    MAX_PENDING = 200_000

    def __init__(self, namespace: str | None, label: Predicate | None, field: Predicate | None) -> None:
        self.namespace = namespace
        self.label = label
        self.field = field
        self.pending: list[bytes] = []
        self.wake = asyncio.Event()
        self.closed = False
        self.overflowed = False

    def matches(self, obj: Obj) -> bool:
        if self.label is not None and not self.label(obj):
            return False
        return self.field is None or self.field(obj)

    def offer(self, event: Event) -> None:
        if self.namespace is not None and event.obj["metadata"].get("namespace") != self.namespace:
            return
        if self.label is None and self.field is None:
            self.push(event.line)
            return
        now = self.matches(event.obj)
        if event.type != MODIFIED or event.prev is None:
            if now:
                self.push(event.line)
            return
        before = self.matches(event.prev)
        if now and before:
            self.push(event.line)
        elif now:
            self.push(watch_line(ADDED, event.raw))
        elif before:
            # Leaving the selection: a DELETED with the previous content at the new version,
            # as the API server's watch cache does it.
            prev = dict(event.prev)
            prev["metadata"] = {**prev["metadata"], "resourceVersion": str(event.rv)}
            self.push(watch_line(DELETED, _encode(prev)))

    def push(self, line: bytes) -> None:
        if self.closed:
            return
        self.pending.append(line)
        if len(self.pending) > self.MAX_PENDING:
            self.overflowed = True
            self.close()
        self.wake.set()

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    def drain(self) -> bytes:
        chunk = b"".join(self.pending)
        self.pending.clear()
        self.wake.clear()
        return chunk


class Table:
    """The objects of one resource and its watch cache."""

    def __init__(self, rtype: ResourceType, history_size: int) -> None:
        self.rtype = rtype
        self.objects: dict[str, Entry] = {}
        self.history: deque[Event] = deque()
        self.history_size = history_size
        self.compacted_rv = 0  # the newest resourceVersion dropped from history
        self.watchers: set[Watcher] = set()
        self._sorted: list[str] | None = None

    def sorted_keys(self) -> list[str]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted

    def keys_from(self, start: str) -> list[str]:
        keys = self.sorted_keys()
        return keys[bisect.bisect_left(keys, start) :]

    def record(self, event: Event) -> None:
        if len(self.history) >= self.history_size:
            self.compacted_rv = self.history.popleft().rv
        self.history.append(event)
        for watcher in self.watchers:
            watcher.offer(event)

    def snapshot(self, rv: int) -> dict[str, Entry] | None:
        """The objects as they were at ``rv`` (None when the history no longer reaches back)."""
        if rv < self.compacted_rv:
            return None
        objects = dict(self.objects)
        for event in reversed(self.history):
            if event.rv <= rv:
                break
            meta = event.obj["metadata"]
            key = object_key(meta.get("namespace"), meta["name"])
            if event.type == ADDED:
                objects.pop(key, None)
            elif event.prev is not None:  # modified or deleted: back to what it was
                prev = event.prev
                objects[key] = Entry(prev, _encode(prev), int(prev["metadata"].get("resourceVersion") or 0))
        return objects

    def events_after(self, rv: int) -> Iterator[Event]:
        # History is ordered by rv; skip the older part from the left.
        for event in self.history:
            if event.rv > rv:
                yield event


Listener = Callable[[Table, Event], None]


class Store:
    def __init__(self, history_size: int = 10_000) -> None:
        self.rv = 1
        self.history_size = history_size
        self.tables: dict[tuple[str, str], Table] = {}
        self.listeners: list[Listener] = []

    def table(self, rtype: ResourceType) -> Table:
        table = self.tables.get(rtype.key)
        if table is None:
            table = self.tables[rtype.key] = Table(rtype, self.history_size)
            # Like the API server's watch cache, its history begins when it is made: a watch from
            # an older resourceVersion gets 410 (for a CRD's resources: older than the CRD).
            table.compacted_rv = self.rv
        return table

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Entry | None:
        table = self.tables.get(rtype.key)
        return None if table is None else table.objects.get(object_key(namespace, name))

    def put(self, table: Table, obj: Obj, prev: Obj | None) -> Entry:
        """Store a new or changed object under a new resourceVersion and tell the watchers."""
        self.rv += 1
        rv = self.rv
        obj = dict(obj)
        obj["metadata"] = meta = dict(obj["metadata"])
        meta["resourceVersion"] = str(rv)
        raw = _encode(obj)
        key = object_key(meta.get("namespace"), meta["name"])
        if key not in table.objects:
            table._sorted = None
        entry = table.objects[key] = Entry(obj, raw, rv)
        self._emit(table, Event(MODIFIED if prev is not None else ADDED, obj, raw, rv, prev))
        return entry

    def remove(self, table: Table, obj: Obj) -> Obj:
        """Remove an object; the DELETED event carries its last state at a new resourceVersion
        (and, as ``prev``, the object as it was stored)."""
        self.rv += 1
        prev = obj
        obj = dict(obj)
        obj["metadata"] = meta = dict(obj["metadata"])
        meta["resourceVersion"] = str(self.rv)
        key = object_key(meta.get("namespace"), meta["name"])
        if table.objects.pop(key, None) is not None:
            table._sorted = None
        self._emit(table, Event(DELETED, obj, _encode(obj), self.rv, prev))
        return obj

    def drop_table(self, key: tuple[str, str]) -> None:
        table = self.tables.pop(key, None)
        if table is not None:
            for watcher in list(table.watchers):
                watcher.close()

    def _emit(self, table: Table, event: Event) -> None:
        table.record(event)
        for listener in self.listeners:
            listener(table, event)
