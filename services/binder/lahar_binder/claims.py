"""A pod's ResourceClaims, written before its bind as kube-scheduler's DRA PreBind does.

For each claim the decision names: read it; refuse if it is being deleted; done if the pod is
already in ``reservedFor`` (a redelivered decision whose first run went through).  With an
allocation: add the ``resource.kubernetes.io/delete-protection`` finalizer (an ordinary update:
the status subresource cannot change metadata), then write ``status.allocation`` and the pod in
``status.reservedFor`` in one status update.  Without one (the claim was allocated earlier, for
another pod), only add the pod to ``reservedFor``.  A 409 on either update reads the claim
again and retries, as client-go's RetryOnConflict does there.

A claim another scheduler allocated to other devices meanwhile is refused (kube-scheduler's
"got allocated elsewhere in the meantime"); the same devices are taken as our own earlier write.

If the bind then fails, ``unreserve_claims`` takes the pod out of ``reservedFor`` again, as
kube-scheduler's Unreserve does; the resourceclaim controller deallocates a claim left with no
consumer.  That is best effort: a claim it cannot update is left for the controller, which
releases it once the pod is gone.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lahar.adapters.kube import Conflict, KubeClient, KubeError, NotFound
from lahar.wire.messages import NO_OBJECT, ClaimAllocation

log = logging.getLogger("lahar.binder")

FINALIZER = "resource.kubernetes.io/delete-protection"
RETRIES = 5  # client-go's retry.DefaultRetry steps

Obj = dict[str, Any]


class ClaimRefused(Exception):
    """The claim cannot be written for this pod: the bind must not go ahead."""


async def reserve_claims(kube: KubeClient, namespace: str, pod: str, uid: str, claims: list[ClaimAllocation]) -> None:
    for claim in claims:
        ours = None if bytes(claim.allocation) == bytes(NO_OBJECT) else json.loads(bytes(claim.allocation))
        await _reserve(kube, namespace, claim.name, pod, uid, ours)


async def _reserve(kube: KubeClient, namespace: str, name: str, pod: str, uid: str, ours: Obj | None) -> None:
    for _ in range(RETRIES):
        try:
            obj = json.loads(await kube.get("resourceclaims", namespace, name))
        except NotFound:
            raise ClaimRefused(f'resourceclaim "{name}" not found') from None
        try:
            await _write(kube, namespace, obj, pod, uid, ours)
            return
        except Conflict:
            continue  # changed since we read it: read it again
    raise ClaimRefused(f'resourceclaim "{name}": still conflicting after {RETRIES} attempts')


async def _write(kube: KubeClient, namespace: str, obj: Obj, pod: str, uid: str, ours: Obj | None) -> None:
    meta = obj["metadata"]
    name = meta["name"]
    if meta.get("deletionTimestamp"):
        raise ClaimRefused(f'resourceclaim "{name}" got deleted in the meantime')
    status = obj.get("status") or {}
    reserved = status.get("reservedFor") or []
    if any(r.get("uid") == uid for r in reserved):
        return
    held = status.get("allocation")
    if ours is not None and held is None:
        if FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), FINALIZER]
            obj = json.loads(await kube.replace("resourceclaims", namespace, name, obj))
            status = obj.get("status") or {}
            if status.get("allocation") is not None:  # allocated between our read and update
                raise Conflict(409, "Conflict", "allocated meanwhile")
        status["allocation"] = ours
    elif ours is not None and _devices(held) != _devices(ours):
        raise ClaimRefused(f'resourceclaim "{name}" got allocated elsewhere in the meantime')
    elif held is None:
        raise ClaimRefused(f'resourceclaim "{name}" is not allocated')
    status["reservedFor"] = [*reserved, {"resource": "pods", "name": pod, "uid": uid}]
    obj["status"] = status
    await kube.replace("resourceclaims", namespace, name, obj, sub="status")


def _devices(allocation: Obj | None) -> set[tuple[str, str, str, str]]:
    results = ((allocation or {}).get("devices") or {}).get("results") or []
    return {(r.get("request", ""), r.get("driver", ""), r.get("pool", ""), r.get("device", "")) for r in results}


async def unreserve_claims(kube: KubeClient, namespace: str, uid: str, names: list[str]) -> None:
    for name in names:
        try:
            await _unreserve(kube, namespace, name, uid)
        except KubeError as exc:
            log.warning("could not take pod %s out of resourceclaim %s/%s: %s", uid, namespace, name, exc)


async def _unreserve(kube: KubeClient, namespace: str, name: str, uid: str) -> None:
    for _ in range(RETRIES):
        try:
            obj = json.loads(await kube.get("resourceclaims", namespace, name))
        except NotFound:
            return
        status = obj.get("status") or {}
        reserved = status.get("reservedFor") or []
        left = [r for r in reserved if r.get("uid") != uid]
        if len(left) == len(reserved):
            return
        obj["status"] = (
            {**status, "reservedFor": left} if left else {k: v for k, v in status.items() if k != "reservedFor"}
        )
        try:
            await kube.replace("resourceclaims", namespace, name, obj, sub="status")
            return
        except Conflict:
            continue
