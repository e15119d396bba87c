"""Garbage collection by ownerReferences, as kube-controller-manager's garbage collector does it.

* **Background** (the default): the owner goes at once; then every dependent none of whose
  owners is left is deleted (one whose other owners live only loses the dangling references).
* **Foreground**: the owner keeps a ``foregroundDeletion`` finalizer while its dependents are
  deleted, and goes once no dependent that sets ``blockOwnerDeletion`` is left.
* **Orphan**: the owner keeps an ``orphan`` finalizer until its dependents have lost their
  reference to it; they stay.

It follows the store's events and keeps two indexes (uid → where the object is, owner uid →
its dependents), so a deletion costs the size of its family, not of the store.  The work runs
on the event loop soon after the event (``call_soon``), never inside the store's event fan-out,
so every listener sees the events in the order they happened.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any

from lahar.sim.store import DELETED, Entry, Event, Table, object_key

if TYPE_CHECKING:
    from lahar.sim.api import Api

Obj = dict[str, Any]
Where = tuple[tuple[str, str], str]  # (table key, object key)
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
POLICIES = ("Foreground", "Background", "Orphan")


def owner_uids(obj: Obj | None) -> set[str]:
    if obj is None:
        return set()
    return {
        ref["uid"] for ref in obj["metadata"].get("ownerReferences") or () if isinstance(ref, dict) and "uid" in ref
    }


def deletion_finalizer(policy: str) -> str | None:
    return {"Foreground": FOREGROUND, "Orphan": ORPHAN}.get(policy)


class GarbageCollector:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.where: dict[str, Where] = {}
        self.dependents: defaultdict[str, set[Where]] = defaultdict(set)
        self.queue: deque[str] = deque()  # owner uids to look at
        self._scheduled = False
        api.store.listeners.append(self.on_event)

    # --- following the store ---------------------------------------------------------------------

    def on_event(self, table: Table, event: Event) -> None:
        meta = event.obj["metadata"]
        uid, here = meta.get("uid"), (table.rtype.key, object_key(meta.get("namespace"), meta["name"]))
        if not uid:
            return
        owners, before = owner_uids(event.obj), owner_uids(event.prev)
        if event.type == DELETED:
            self.where.pop(uid, None)
            owners, before = set(), owners
            self._wake(uid)  # its dependents may have no owner left
        else:
            self.where[uid] = here
            finalizers = meta.get("finalizers") or ()
            if meta.get("deletionTimestamp") and (FOREGROUND in finalizers or ORPHAN in finalizers):
                self._wake(uid)
        for gone in before - owners:
            self.dependents[gone].discard(here)
            if not self.dependents[gone]:
                del self.dependents[gone]
            if event.type == DELETED:
                self._wake(gone)  # an owner in foreground deletion may now go
        for owner in owners - before:
            self.dependents[owner].add(here)

    def _wake(self, uid: str) -> None:
        self.queue.append(uid)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a test driving Api directly): drain() when it wants
        self._scheduled = True
        loop.call_soon(self.drain)

    def drain(self) -> None:
        self._scheduled = False
        while self.queue:
            self._process(self.queue.popleft())

    # --- acting ------------------------------------------------------------------------------------

    def _entry(self, where: Where) -> tuple[Table, Entry] | None:
        table = self.api.store.tables.get(where[0])
        entry = table.objects.get(where[1]) if table is not None else None
        return (table, entry) if table is not None and entry is not None else None

    def _process(self, uid: str) -> None:
        found = self._entry(self.where[uid]) if uid in self.where else None
        deps = [d for d in list(self.dependents.get(uid, ())) if self._entry(d) is not None]
        if found is None:
            for dep in deps:
                self._attempt_delete(dep)
            return
        table, entry = found
        meta = entry.obj["metadata"]
        finalizers = meta.get("finalizers") or []
        if not meta.get("deletionTimestamp"):
            return
        if ORPHAN in finalizers:
            for dep in deps:
                self._drop_references(dep, {uid})
            self._finish(table, entry, ORPHAN)
        elif FOREGROUND in finalizers:
            for dep in deps:
                self._attempt_delete(dep)
            if not any(self._blocks(d, uid) for d in deps if self._entry(d) is not None):
                self._finish(table, self._entry(self.where[uid])[1], FOREGROUND)  # type: ignore[index]

    def _blocks(self, dep: Where, owner: str) -> bool:
        found = self._entry(dep)
        refs = found[1].obj["metadata"].get("ownerReferences") or [] if found else []
        return any(r.get("uid") == owner and r.get("blockOwnerDeletion") for r in refs)

    def _state(self, uid: str) -> str:
        """``absent``, ``waiting`` (foreground deletion), ``deleting`` or ``solid``."""
        found = self._entry(self.where[uid]) if uid in self.where else None
        if found is None:
            return "absent"
        meta = found[1].obj["metadata"]
        if not meta.get("deletionTimestamp"):
            return "solid"
        return "waiting" if FOREGROUND in (meta.get("finalizers") or ()) else "deleting"

    def _attempt_delete(self, dep: Where) -> None:
        found = self._entry(dep)
        if found is None or found[1].obj["metadata"].get("deletionTimestamp"):
            return
        table, entry = found
        states = {uid: self._state(uid) for uid in owner_uids(entry.obj)}
        if "solid" in states.values() or "deleting" in states.values():
            # Someone still owns it: only references to owners that are gone or waiting go.
            stale = {uid for uid, s in states.items() if s in ("absent", "waiting")}
            if stale and "solid" in states.values():
                self._drop_references(dep, stale)
            return
        waiting = [uid for uid, s in states.items() if s == "waiting" and self._blocks(dep, uid)]
        self.api.delete_object(table, entry, None, "Foreground" if waiting else "Background")

    def _drop_references(self, dep: Where, uids: set[str]) -> None:
        found = self._entry(dep)
        if found is None:
            return
        table, entry = found
        meta = entry.obj["metadata"]
        refs = [r for r in meta.get("ownerReferences") or [] if r.get("uid") not in uids]
        new_meta = {k: v for k, v in meta.items() if k != "ownerReferences"}
        if refs:
            new_meta["ownerReferences"] = refs
        self.api.commit(table, {**entry.obj, "metadata": new_meta}, entry.obj)

    def _finish(self, table: Table, entry: Entry, finalizer: str) -> None:
        """Take our finalizer off; without any other, the object goes (``commit`` removes it)."""
        meta = entry.obj["metadata"]
        rest = [f for f in meta.get("finalizers") or [] if f != finalizer]
        new_meta = {k: v for k, v in meta.items() if k != "finalizers"}
        if rest:
            new_meta["finalizers"] = rest
        self.api.commit(table, {**entry.obj, "metadata": new_meta}, entry.obj)
