"""The cluster as admission sees it: a read-only view with an in-memory implementation.

Rules only call these methods, so the same rule code answers from a conformance case's
``existing`` objects (``InMemoryView``) and from the Redis mirror (``lahar_admission.mirror``,
which refreshes an ``InMemoryView`` snapshot from Redis in the background).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import msgspec

from lahar.api import safeyaml
from lahar.api.codec import dec_hook
from lahar_admission.types import AdmissionConfig, Namespace, PodGroup, Queue, ResGroup

CONFIGMAP_NAMESPACE = "volcano-system"
CONFIGMAP_NAME = "volcano-admission-configmap"
CONFIGMAP_KEY = "volcano-admission.conf"


class ViewUnavailable(RuntimeError):
    """The view cannot answer (the mirror is down or too stale); the service decides what to do."""


class ClusterView(Protocol):
    def queue(self, name: str) -> Queue | None: ...

    def queues(self) -> Iterable[Queue]: ...

    def children(self, parent: str) -> list[Queue]: ...

    def namespace(self, name: str) -> Namespace | None: ...

    def podgroup(self, namespace: str, name: str) -> PodGroup | None: ...

    def admission_config(self) -> AdmissionConfig | None: ...


def not_found(resource: str, name: str) -> str:
    """The informer lister's NotFound error text, e.g. ``queue.scheduling.volcano.sh "q" not found``."""
    return f'{resource} "{name}" not found'


class InMemoryView:
    """A snapshot: queues indexed by name and by parent, namespaces, podgroups, admission config."""

    def __init__(
        self,
        queues: Iterable[Queue] = (),
        namespaces: Iterable[Namespace] = (),
        podgroups: Iterable[PodGroup] = (),
        config: AdmissionConfig | None = None,
    ) -> None:
        self._queues: dict[str, Queue] = {q.metadata.name: q for q in queues}
        self._children: dict[str, list[Queue]] = {}
        for q in self._queues.values():
            self._children.setdefault(q.spec.parent, []).append(q)
        self._namespaces = {n.metadata.name: n for n in namespaces}
        self._podgroups = {(p.metadata.namespace, p.metadata.name): p for p in podgroups}
        self._config = config

    def queue(self, name: str) -> Queue | None:
        return self._queues.get(name)

    def queues(self) -> Iterable[Queue]:
        return self._queues.values()

    def children(self, parent: str) -> list[Queue]:
        # Volcano's parent index files a queue with an empty parent under "" (not "root").
        return list(self._children.get(parent, ()))

    def namespace(self, name: str) -> Namespace | None:
        return self._namespaces.get(name)

    def podgroup(self, namespace: str, name: str) -> PodGroup | None:
        return self._podgroups.get((namespace, name))

    def admission_config(self) -> AdmissionConfig | None:
        return self._config

    @property
    def queue_count(self) -> int:
        return len(self._queues)


class ObjectError(ValueError):
    """An ``existing`` object that does not decode; the message names the object and field."""


def _convert(raw: Any, typ: type[Any], where: str) -> Any:
    try:
        return msgspec.convert(raw, typ, dec_hook=dec_hook, str_keys=True)
    except msgspec.ValidationError as exc:
        raise ObjectError(f"{where}: {exc}") from None


def parse_admission_config(text: str) -> AdmissionConfig | None:
    """Parse ``volcano-admission.conf`` the way Volcano does: an unreadable file means no config."""
    try:
        data = safeyaml.load(text, "volcano-admission.conf")
    except safeyaml.YamlError:
        return None
    if data is None:
        # An all-comments file decodes to an empty config (no groups), not "no config".
        return AdmissionConfig()
    if not isinstance(data, dict):
        return None
    try:
        conf: AdmissionConfig = msgspec.convert(data, AdmissionConfig, str_keys=True)
    except msgspec.ValidationError:
        return None
    for group in conf.resource_groups:
        group.annotation_pairs = _annotation_pairs(group)
    return conf


def _annotation_pairs(group: ResGroup) -> dict[str, str]:
    """Merge the one-line YAML maps of an annotation group (entries that don't parse are skipped;
    an earlier entry wins over a later one, as mergo.Merge does without override)."""
    merged: dict[str, str] = {}
    for line in group.object.value:
        try:
            item = safeyaml.load(line, "annotation")
        except safeyaml.YamlError:
            continue
        if not isinstance(item, dict):
            continue
        for key, val in item.items():
            merged.setdefault(str(key), "" if val is None else str(val))
    return merged


def view_from_objects(objects: Iterable[dict[str, Any]]) -> InMemoryView:
    """An ``InMemoryView`` from plain Kubernetes objects (a conformance case's ``existing``)."""
    queues: list[Queue] = []
    namespaces: list[Namespace] = []
    podgroups: list[PodGroup] = []
    config: AdmissionConfig | None = None
    for i, raw in enumerate(objects):
        if not isinstance(raw, dict):
            raise ObjectError(f"existing[{i}]: expected an object")
        kind = raw.get("kind")
        where = f"existing[{i}] ({kind})"
        if kind == "Queue":
            queues.append(_convert(raw, Queue, where))
        elif kind == "Namespace":
            namespaces.append(_convert(raw, Namespace, where))
        elif kind == "PodGroup":
            podgroups.append(_convert(raw, PodGroup, where))
        elif kind == "ConfigMap":
            config = _config_from_configmap(raw) or config
    return InMemoryView(queues, namespaces, podgroups, config)


def _config_from_configmap(raw: dict[str, Any]) -> AdmissionConfig | None:
    meta = raw.get("metadata") or {}
    if meta.get("name") != CONFIGMAP_NAME or meta.get("namespace") != CONFIGMAP_NAMESPACE:
        return None
    text = (raw.get("data") or {}).get(CONFIGMAP_KEY)
    return parse_admission_config(text) if isinstance(text, str) else None
