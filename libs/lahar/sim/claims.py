"""The part of kube-controller-manager's resourceclaim controller a scheduler relies on: a pod
that is gone, replaced or done (Succeeded/Failed, or deleted before it was bound) leaves the
``reservedFor`` of its claims; a claim left with no consumer that carries the
``resource.kubernetes.io/delete-protection`` finalizer (the scheduler allocated it) is
deallocated by a status update, then loses the finalizer by an ordinary update, so its devices
are free again and a claim being deleted goes.

Not modelled: claims made from ResourceClaimTemplates (the controller creates them for a pod and
deletes them after it), and consumers other than pods.  Like the garbage collector, the work
runs soon after the store's event, never inside its fan-out.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lahar.sim.dra import CLAIMS
from lahar.sim.store import DELETED, Event, Table

if TYPE_CHECKING:
    from lahar.sim.api import Api

Obj = dict[str, Any]
FINALIZER = "resource.kubernetes.io/delete-protection"
_DONE = ("Succeeded", "Failed")


class ClaimReleaser:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.pending: list[tuple[str, str]] = []  # (namespace, pod uid) no longer a consumer
        self._scheduled = False
        api.store.listeners.append(self.on_event)

    def on_event(self, table: Table, event: Event) -> None:
        if table.rtype.key != ("", "pods"):
            return
        meta = event.obj["metadata"]
        # kube's isPodDone: terminal, or deleted before it was scheduled.
        done = (event.obj.get("status") or {}).get("phase") in _DONE or (
            bool(meta.get("deletionTimestamp")) and not (event.obj.get("spec") or {}).get("nodeName")
        )
        if (event.type == DELETED or done) and meta.get("uid"):
            self.pending.append((meta.get("namespace") or "", meta["uid"]))
            self._schedule()

    def _schedule(self) -> None:
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
        table = self.api.store.tables.get(CLAIMS)
        while self.pending:
            namespace, uid = self.pending.pop(0)
            if table is None:
                continue
            for entry in list(table.objects.values()):
                obj = entry.obj
                if obj["metadata"].get("namespace") == namespace and _reserves(obj, uid):
                    self._release(table, obj, uid)

    def _release(self, table: Table, obj: Obj, uid: str) -> None:
        status = dict(obj.get("status") or {})
        rest = [r for r in status.get("reservedFor") or [] if r.get("uid") != uid]
        protected = FINALIZER in (obj["metadata"].get("finalizers") or [])
        if rest:
            status["reservedFor"] = rest
        else:
            status.pop("reservedFor", None)
            if protected:
                status.pop("allocation", None)  # the scheduler's allocation: the devices are free
        stored = self.api.store.get(table.rtype, obj["metadata"]["namespace"], obj["metadata"]["name"])
        if stored is None:
            return
        self.api.commit(table, {**obj, "status": status}, obj)
        if not rest and protected:
            fresh = self.api.store.get(table.rtype, obj["metadata"]["namespace"], obj["metadata"]["name"])
            if fresh is not None:
                meta = dict(fresh.obj["metadata"])
                left = [f for f in meta.get("finalizers") or [] if f != FINALIZER]
                if left:
                    meta["finalizers"] = left
                else:
                    meta.pop("finalizers", None)
                self.api.commit(table, {**fresh.obj, "metadata": meta}, fresh.obj)


def _reserves(obj: Obj, uid: str) -> bool:
    return any(r.get("uid") == uid for r in (obj.get("status") or {}).get("reservedFor") or [])
