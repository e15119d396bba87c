"""What a job-controller step asks the service to do, in order.

Effects are generic API calls so the service maps each to one request; a failed effect stops the
rest, and the request is retried (the next run recomputes from what the cluster then holds).
Objects carry the resourceVersion the step read, so a write over a newer object conflicts; when
one step writes the same object twice (a Job ``Update`` then its ``UpdateStatus``), the second write
takes the resourceVersion the first one returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Create:
    """Create the object; one that already exists counts as created."""

    obj: Obj


@dataclass(frozen=True, slots=True)
class Apply:
    """Create the object, or overwrite the existing one's content (e.g. a hosts ConfigMap)."""

    obj: Obj


@dataclass(frozen=True, slots=True)
class Update:
    """Replace the object (metadata and spec)."""

    obj: Obj


@dataclass(frozen=True, slots=True)
class UpdateStatus:
    obj: Obj


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete the object; one already gone counts as deleted."""

    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Annotate:
    """Merge these annotations into the object (e.g. the out-of-sync mark before a pod is killed)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Event:
    """A Kubernetes Event about ``about`` (apiVersion, kind, namespace, name, uid)."""

    about: Obj
    type: str  # Normal | Warning
    reason: str
    message: str


Effect = Create | Apply | Update | UpdateStatus | Delete | Annotate | Event


class JobError(Exception):
    """A step that cannot complete (missing queue or PVC, unknown plugin, ...); the request is retried."""


def delete_of(obj: Obj) -> Delete:
    meta = obj.get("metadata") or {}
    return Delete(str(obj.get("apiVersion", "")), str(obj.get("kind", "")), meta.get("namespace") or "", meta["name"])


def event_about(job: Obj, type_: str, reason: str, message: str) -> Event:
    meta = job.get("metadata") or {}
    about = {
        "apiVersion": job.get("apiVersion", "batch.volcano.sh/v1alpha1"),
        "kind": job.get("kind", "Job"),
        "namespace": meta.get("namespace") or "",
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
    }
    return Event(about, type_, reason, message)
