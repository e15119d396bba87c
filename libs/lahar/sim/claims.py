"""The part of kube-controller-manager's resourceclaim controller a scheduler relies on: a pod
that is gone, replaced or done (Succeeded/Failed, or deleted before it was bound) leaves the
``reservedFor`` of its claims, whether the pod or the claim changed (a reservation written for a
pod that does not exist goes at once); a claim left with no consumer that carries the
``resource.kubernetes.io/delete-protection`` finalizer (the scheduler allocated it) is
deallocated by a status update, then loses the finalizer by an ordinary update, so its devices
are free again and a claim being deleted goes.

For a pod's claim from a ResourceClaimTemplate, the controller makes the claim: named
``<pod>-<claim>-<5 random>`` (the base shortened to 57 characters), owned by the pod (so the
garbage collector deletes it with the pod), with the ``resource.kubernetes.io/pod-claim-name``
annotation, the template's labels and annotations and its spec; then it records the name in
the pod's ``status.resourceClaimStatuses``.  A template that does not exist yet leaves the pod
waiting; the claim is made once it is created.  A made claim no pod needs any more (its pod
done, unreserved) is deleted.

Not modelled: consumers other than pods.  Like the garbage collector, the work runs soon after
the store's event, never inside its fan-out.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from lahar.sim.dra import CLAIMS, TEMPLATES
from lahar.sim.store import DELETED, Event, Table, object_key

if TYPE_CHECKING:
    from lahar.sim.api import Api

Obj = dict[str, Any]
FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
_DONE = ("Succeeded", "Failed")
_PODS = ("", "pods")
_MAX_BASE = 57  # leaves room for the 5 random characters in a 63-character name


class ClaimReleaser:
    def __init__(self, api: Api) -> None:
        self.api = api
        self.pending: list[tuple[str, str]] = []  # (namespace, pod uid) no longer a consumer
        self.to_make: list[tuple[str, str]] = []  # (namespace, pod name) with template claims to make
        self._scheduled = False
        # pod uid -> the claims (namespace, name) reserved for it, so a pod that finishes costs
        # its own claims, not a scan of every claim
        self.reserved: dict[str, set[tuple[str, str]]] = {}
        api.store.listeners.append(self.on_event)

    def _index(self, event: Event) -> None:
        meta = event.obj["metadata"]
        key = (meta.get("namespace") or "", meta["name"])
        for uid in _uids(event.prev):
            held = self.reserved.get(uid)
            if held is not None:
                held.discard(key)
                if not held:
                    del self.reserved[uid]
        if event.type != DELETED:
            for uid in _uids(event.obj):
                self.reserved.setdefault(uid, set()).add(key)

    def on_event(self, table: Table, event: Event) -> None:
        if table.rtype.key == CLAIMS:
            self._index(event)
            if event.type != DELETED:
                self._check_consumers(event.obj)
            return
        if table.rtype.key == TEMPLATES and event.type != DELETED:
            # Pods of its namespace may wait for this template.
            self.to_make.append((event.obj["metadata"].get("namespace") or "", ""))
            self._schedule()
            return
        if table.rtype.key != _PODS:
            return
        meta = event.obj["metadata"]
        if event.type != DELETED and _needs_claims(event.obj):
            self.to_make.append((meta.get("namespace") or "", meta["name"]))
            self._schedule()
        if (event.type == DELETED or _done(event.obj)) and meta.get("uid") in self.reserved:
            self.pending.append((meta.get("namespace") or "", meta["uid"]))
            self._schedule()

    def _check_consumers(self, claim: Obj) -> None:
        """syncClaim on a claim's own change: a reservation for a pod that does not exist (or
        another pod of that name), or that is done, goes."""
        namespace = claim["metadata"].get("namespace") or ""
        pods = self.api.rtype(*_PODS)
        for ref in (claim.get("status") or {}).get("reservedFor") or []:
            if ref.get("resource") != "pods" or ref.get("apiGroup"):
                continue
            entry = self.api.store.get(pods, namespace, ref.get("name", ""))
            pod = entry.obj if entry is not None else None
            if pod is None or pod["metadata"].get("uid") != ref.get("uid") or _done(pod):
                self.pending.append((namespace, ref.get("uid", "")))
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
        while self.to_make:
            namespace, name = self.to_make.pop(0)
            for pod in self._pods(namespace, name):
                if _needs_claims(pod):
                    self._make_claims(pod)
        table = self.api.store.tables.get(CLAIMS)
        while self.pending:
            namespace, uid = self.pending.pop(0)
            for claim_ns, name in sorted(self.reserved.get(uid, ())):
                entry = table.objects.get(object_key(claim_ns, name)) if table is not None else None
                if table is not None and entry is not None and claim_ns == namespace and _reserves(entry.obj, uid):
                    self._release(table, entry.obj, uid)

    # -- claims from templates ----------------------------------------------------------------------

    def _pods(self, namespace: str, name: str) -> list[Obj]:
        """The pod ``name``, or every pod of the namespace when ``name`` is empty."""
        rtype = self.api.rtype(*_PODS)
        if name:
            entry = self.api.store.get(rtype, namespace, name)
            return [entry.obj] if entry is not None else []
        objects = self.api.table(rtype).objects.values()
        return [e.obj for e in objects if e.obj["metadata"].get("namespace") == namespace]

    def _make_claims(self, pod: Obj) -> None:
        meta = pod["metadata"]
        status = pod.get("status") or {}
        made = {s.get("name"): s for s in status.get("resourceClaimStatuses") or []}
        new = []
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            template = entry.get("resourceClaimTemplateName")
            if not template or entry.get("name") in made:
                continue
            claim = self._claim_from(pod, entry["name"], template)
            if claim is not None:
                new.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
        if new:
            current = self.api.store.get(self.api.rtype(*_PODS), meta["namespace"], meta["name"])
            if current is None:
                return
            old = current.obj
            status = dict(old.get("status") or {})
            status["resourceClaimStatuses"] = [*(status.get("resourceClaimStatuses") or []), *new]
            self.api.commit(self.api.table(self.api.rtype(*_PODS)), {**old, "status": status}, old)

    def _claim_from(self, pod: Obj, claim_name: str, template_name: str) -> Obj | None:
        meta = pod["metadata"]
        rtype = self.api.rtype(*TEMPLATES)
        found = self.api.store.get(rtype, meta["namespace"], template_name)
        if found is None:
            return None  # the pod waits until the template exists
        for entry in self.api.table(self.api.rtype(*CLAIMS)).objects.values():
            if _made_for(entry.obj, meta["uid"], claim_name):
                return entry.obj  # made before the pod's status recorded it
        spec = found.obj.get("spec") or {}
        template_meta = spec.get("metadata") or {}
        base = f"{meta['name']}-{claim_name}-"
        if len(base) > _MAX_BASE:  # kube shortens both parts in proportion
            pod_part = meta["name"][: len(meta["name"]) * _MAX_BASE // len(base)]
            claim_part = claim_name[: len(claim_name) * _MAX_BASE // len(base)]
            base = f"{pod_part}-{claim_part}"
        owner = {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]}
        claim_meta: Obj = {
            "generateName": base,
            "namespace": meta["namespace"],
            "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
            "annotations": {**(template_meta.get("annotations") or {}), POD_CLAIM_NAME: claim_name},
        }
        if template_meta.get("labels"):
            claim_meta["labels"] = dict(template_meta["labels"])
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": claim_meta}
        return self.api.seed_object(self.api.rtype(*CLAIMS), {**claim, "spec": spec.get("spec") or {}})

    # -- releasing ---------------------------------------------------------------------------------

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
        if not rest and _owner_uid(obj) == uid:
            # Made from a template for this pod, which is done or gone: nobody needs it now.
            last = self.api.store.get(table.rtype, obj["metadata"]["namespace"], obj["metadata"]["name"])
            if last is not None and not last.obj["metadata"].get("deletionTimestamp"):
                self.api.delete_object(table, last, None)


def _reserves(obj: Obj, uid: str) -> bool:
    return any(r.get("uid") == uid for r in (obj.get("status") or {}).get("reservedFor") or [])


def _needs_claims(pod: Obj) -> bool:
    """A live pod with a template claim whose claim it does not name yet."""
    meta, status = pod["metadata"], pod.get("status") or {}
    if meta.get("deletionTimestamp") or status.get("phase") in _DONE:
        return False
    made = {s.get("name") for s in status.get("resourceClaimStatuses") or []}
    entries = (pod.get("spec") or {}).get("resourceClaims") or []
    return any(e.get("resourceClaimTemplateName") and e.get("name") not in made for e in entries)


def _made_for(claim: Obj, pod_uid: str, claim_name: str) -> bool:
    meta = claim["metadata"]
    owned = any(r.get("uid") == pod_uid and r.get("controller") for r in meta.get("ownerReferences") or [])
    return owned and (meta.get("annotations") or {}).get(POD_CLAIM_NAME) == claim_name


def _owner_uid(claim: Obj) -> str:
    refs = claim["metadata"].get("ownerReferences") or []
    return next((r.get("uid", "") for r in refs if r.get("controller") and r.get("kind") == "Pod"), "")


def _uids(claim: Obj | None) -> set[str]:
    if claim is None:
        return set()
    return {r.get("uid", "") for r in (claim.get("status") or {}).get("reservedFor") or [] if r.get("uid")}


def _done(pod: Obj) -> bool:
    """kube's isPodDone: terminal, or deleted before it was scheduled."""
    if (pod.get("status") or {}).get("phase") in _DONE:
        return True
    return bool(pod["metadata"].get("deletionTimestamp")) and not (pod.get("spec") or {}).get("nodeName")
