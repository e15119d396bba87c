"""The verbs of the REST API over the store: get, list, create, update, patch, delete,
deletecollection and the status subresource.  The pod subresources live in ``pods.py`` and
watch in ``watch.py``; HTTP framing is ``app.py``'s.

The order of steps follows the real API server: defaults and built-in admission, mutating
webhooks, the resource's own preparation and validation, validating webhooks, then the write,
whose preconditions (existence, resourceVersion) are checked at that moment.  Without webhooks
there is no ``await`` between the read and the write, so a request is atomic.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from lahar.sim import dra, kinds, strategies, workloads
from lahar.sim.admission import Admission, Attributes
from lahar.sim.claims import ClaimReleaser
from lahar.sim.clock import iso
from lahar.sim.crd_defaults import apply_defaults
from lahar.sim.crds import crd_status, crd_types, validate_crd
from lahar.sim.errors import (
    STALE,
    ApiError,
    already_exists,
    bad_request,
    conflict,
    invalid,
    not_found,
)
from lahar.sim.gc import POLICIES, GarbageCollector, deletion_finalizer
from lahar.sim.objects import decode_json, decode_object, generated_name, int_option, new_uid, spec_part
from lahar.sim.patch import apply_patch, check_patch_type
from lahar.sim.resources import Registry, ResourceType, builtin_types
from lahar.sim.rootca import RootCAPublisher
from lahar.sim.selectors import Predicate, field_matcher, label_matcher
from lahar.sim.store import DELETED, Entry, Event, Store, Table, object_key

Obj = dict[str, Any]
Query = dict[str, str]
Reply = tuple[int, bytes]

_encode = msgspec.json.Encoder().encode
_MAX_RETRIES = 5
_PODS = ("", "pods")
_NAMESPACES = ("", "namespaces")
_CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")
_SERVICES = ("", "services")


@dataclass(slots=True)
class Target:
    """What a URL names: a resource type, maybe a namespace, a name and a subresource."""

    rtype: ResourceType
    namespace: str | None
    name: str | None = None
    subresource: str = ""


class Api:
    def __init__(self, history_size: int = 10_000, webhook_services: dict[str, str] | None = None) -> None:
        self.store = Store(history_size)
        self.registry = Registry()
        for rtype in builtin_types():
            self.registry.add(rtype)
            self.store.table(rtype)  # every built-in history begins now, as the server's caches at start
        self.admission = Admission(self.store, webhook_services, self.namespace_labels)
        self.store.listeners.append(self._on_crd_event)
        self.gc = GarbageCollector(self)
        self.root_ca = RootCAPublisher(self)
        self.claims = ClaimReleaser(self)

    def rtype(self, group: str, plural: str) -> ResourceType:
        rtype = self.registry.by_resource.get((group, plural))
        if rtype is None:
            raise KeyError(f"{plural}.{group}")
        return rtype

    def table(self, rtype: ResourceType) -> Table:
        return self.store.table(rtype)

    def namespace_labels(self, namespace: str) -> dict[str, str]:
        entry = self.store.get(self.rtype(*_NAMESPACES), None, namespace)
        if entry is None:
            return {"kubernetes.io/metadata.name": namespace}
        labels: dict[str, str] = entry.obj["metadata"].get("labels") or {}
        return labels

    # --- reads ---------------------------------------------------------------------------------------

    def get(self, t: Target) -> Reply:
        entry = self._entry(t)
        return 200, entry.raw

    def list_objects(self, t: Target, query: Query) -> Reply:
        check_list_options(query)
        table = self.table(t.rtype)
        match = matcher(t.rtype, query)
        limit = int_option(query.get("limit"), "limit") or 0
        start = _continue_start(query.get("continue"))
        list_rv = self.store.rv
        objects = table.objects
        if query.get("resourceVersionMatch") == "Exact":
            list_rv, objects = self._snapshot(table, query["resourceVersion"])
            prefix = f"{t.namespace}/" if t.namespace is not None else ""
            keys = sorted(k for k in objects if k.startswith(prefix) and k >= start)
        elif t.namespace is not None:
            keys = namespace_slice(table, t.namespace, start)
        else:
            keys = table.keys_from(start) if start else table.sorted_keys()
        items: list[bytes] = []
        next_key = ""
        for key in keys:
            entry = objects[key]
            if match is None or match(entry.obj):
                if limit and len(items) == limit:
                    next_key = key
                    break
                items.append(entry.raw)
        meta: Obj = {"resourceVersion": str(list_rv)}
        if next_key:
            meta["continue"] = base64.urlsafe_b64encode(_encode({"rv": list_rv, "start": next_key})).decode()
        rtype = t.rtype
        head = (
            b'{"kind":"'
            + rtype.list_kind.encode()
            + b'","apiVersion":"'
            + rtype.api_version.encode()
            + b'","metadata":'
            + _encode(meta)
            + b',"items":['
        )
        return 200, head + b",".join(items) + b"]}"

    def _snapshot(self, table: Table, resource_version: str) -> tuple[int, dict[str, Entry]]:
        """A list at an exact resourceVersion, rebuilt from the watch history."""
        try:
            rv = int(resource_version)
        except ValueError:
            raise ApiError(
                500,
                "",
                f'resourceVersion: Invalid value: "{resource_version}": strconv.ParseUint: parsing '
                f'"{resource_version}": invalid syntax',
            ) from None
        objects = table.snapshot(min(rv, self.store.rv))
        if objects is None:
            raise ApiError(410, "Expired", "The resourceVersion for the provided list is too old.")
        return rv, objects

    def _entry(self, t: Target) -> Entry:
        assert t.name is not None
        entry = self.store.get(t.rtype, t.namespace, t.name)
        if entry is None:
            raise not_found(t.rtype.plural, t.rtype.group, t.name)
        return entry

    # --- create --------------------------------------------------------------------------------------

    async def create(self, t: Target, body: bytes, query: Query) -> Reply:
        rtype = t.rtype
        obj = decode_object(body, rtype)
        drop_empty(rtype, obj)  # as decoding into the Go types does, before any webhook sees it
        meta = obj["metadata"]
        self._place(t, meta)
        if meta.get("resourceVersion"):
            # A 500 without a reason, as the API server answers it.
            raise ApiError(500, "", "resourceVersion should not be set on objects to be created")
        if not meta.get("name") and not meta.get("generateName"):
            raise invalid(
                rtype.kind,
                rtype.group,
                "",
                [("metadata.name", "Required value: name or generateName is required")],
            )
        self._defaults(rtype, obj)
        dry_run = is_dry_run(query)
        if self.admission.active(rtype):
            attrs = Attributes(
                rtype,
                "",
                "CREATE",
                t.namespace,
                meta.get("name", ""),
                obj,
                None,
                dry_run,
                request_options("CreateOptions", dry_run),
            )
            obj = await self.admission.mutate(attrs) or obj
            self._before_create(rtype, obj)
            attrs.obj = obj
            attrs.name = obj["metadata"]["name"]
            await self.admission.validate(attrs)
        else:
            self._before_create(rtype, obj)
        table = self.table(rtype)
        meta = obj["metadata"]
        if object_key(meta.get("namespace"), meta["name"]) in table.objects:
            raise already_exists(rtype.plural, rtype.group, meta["name"])
        if dry_run:
            return 201, _encode(obj)
        raw = self.store.put(table, obj, None).raw
        if rtype.key == _NAMESPACES:
            self.root_ca.publish(meta["name"])
        return 201, raw

    def seed_object(self, rtype: ResourceType, obj: Obj) -> Obj:
        """Create at once, without webhooks: what the emulator's own controllers write."""
        drop_empty(rtype, obj)
        self._defaults(rtype, obj)
        self._before_create(rtype, obj)
        return self.store.put(self.table(rtype), obj, None).obj

    def _place(self, t: Target, meta: Obj) -> None:
        """Put the URL's namespace in the object (or refuse a different one)."""
        if t.rtype.namespaced:
            ns = meta.get("namespace")
            if ns and ns != t.namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = t.namespace
        else:
            meta.pop("namespace", None)
        if t.name is not None and meta.get("name") and meta["name"] != t.name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({t.name})")
        if t.name is not None and not meta.get("name"):
            meta["name"] = t.name

    def _defaults(self, rtype: ResourceType, obj: Obj) -> None:
        """Scheme defaults and built-in admission, before webhooks see the object."""
        if rtype.key == _PODS:
            spec = obj.get("spec")
            if isinstance(spec, dict):
                strategies.default_pod_spec(spec)
                strategies.admit_service_account(spec)
                self._admit_priority(obj, spec)
                strategies.admit_default_tolerations(spec)

    def _admit_priority(self, obj: Obj, spec: Obj) -> None:
        """The Priority admission plugin: resolve spec.priorityClassName into spec.priority."""
        table = self.store.tables.get(("scheduling.k8s.io", "priorityclasses"))
        objects = table.objects if table is not None else {}
        name = spec.get("priorityClassName")
        pc: Obj | None
        if name:
            entry = objects.get(name)
            if entry is None:
                raise forbidden_pod(obj, f"no PriorityClass with name {name} was found")
            pc = entry.obj
        else:
            pc = next((e.obj for e in objects.values() if e.obj.get("globalDefault")), None)
            if pc is not None:
                spec["priorityClassName"] = pc["metadata"]["name"]
        value = pc.get("value", 0) if pc is not None else 0
        if "priority" in spec and spec["priority"] != value:
            raise forbidden_pod(
                obj,
                f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name",
            )
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", (pc or {}).get("preemptionPolicy", "PreemptLowerPriority"))

    def _before_create(self, rtype: ResourceType, obj: Obj) -> None:
        meta = obj["metadata"]
        if not meta.get("name"):
            meta["name"] = generated_name(meta["generateName"])
        for field in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            meta.pop(field, None)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = iso()
        meta.pop("generation", None)
        if tracks_generation(rtype):
            meta["generation"] = 1
        prepare = _PREPARE_CREATE.get(rtype.key)
        if prepare is not None:
            prepare(obj)
        elif rtype.custom and rtype.status:
            obj.pop("status", None)  # custom resources with a status subresource drop it on create
        if rtype.custom:
            apply_defaults(obj, rtype.schema)
        if rtype.key == _SERVICES:
            kinds.allocate_cluster_ip(obj, (e.obj for e in self.table(rtype).objects.values()))
        self._validate(rtype, obj)

    def _validate(self, rtype: ResourceType, obj: Obj) -> None:
        drop_empty(rtype, obj)
        meta = obj["metadata"]
        causes = strategies.validate_name(rtype, meta["name"]) + strategies.validate_metadata(meta)
        check = _VALIDATE.get(rtype.key)
        if check is not None:
            causes += check(obj)
        if causes:
            raise invalid(rtype.kind, rtype.group, meta["name"], causes)

    # --- update and patch ----------------------------------------------------------------------------

    async def update(self, t: Target, body: bytes, query: Query) -> Reply:
        def candidate(entry: Entry) -> tuple[Obj, str]:
            obj = decode_object(body, t.rtype)
            self._place(t, obj["metadata"])
            return obj, str(obj["metadata"].get("resourceVersion") or "")

        return await self._update(t, candidate, query)

    async def patch(self, t: Target, body: bytes, content_type: str, query: Query) -> Reply:
        check_patch_type(content_type, strategic_allowed=not t.rtype.custom)
        patch = decode_json(body, "the patch")

        def candidate(entry: Entry) -> tuple[Obj, str]:
            obj = apply_patch(content_type, entry.obj, patch, strategic_allowed=not t.rtype.custom)
            meta = obj.get("metadata")
            if not isinstance(meta, dict):
                raise bad_request("metadata: must be an object")
            # A patch that names a resourceVersion makes it a precondition, as on the server.
            rv = str(meta.get("resourceVersion") or "")
            if rv == entry.obj["metadata"]["resourceVersion"]:
                rv = ""
            meta["resourceVersion"] = entry.obj["metadata"]["resourceVersion"]
            if meta.get("name") != t.name or (t.rtype.namespaced and meta.get("namespace") != t.namespace):
                raise bad_request("a patch may not change metadata.name or metadata.namespace")
            obj["apiVersion"], obj["kind"] = t.rtype.api_version, t.rtype.kind
            return obj, rv

        return await self._update(t, candidate, query)

    async def _update(self, t: Target, candidate: Callable[[Entry], tuple[Obj, str]], query: Query) -> Reply:
        rtype, table = t.rtype, self.table(t.rtype)
        dry_run = is_dry_run(query)
        for _ in range(_MAX_RETRIES):
            entry = self._entry(t)
            obj, precondition = candidate(entry)
            if precondition and precondition != str(entry.rv):
                raise conflict(rtype.plural, rtype.group, entry.obj["metadata"]["name"], STALE)
            new = self._merge_update(t, obj, entry.obj)
            if self.admission.active(rtype):
                attrs = Attributes(
                    rtype,
                    t.subresource,
                    "UPDATE",
                    t.namespace,
                    t.name or "",
                    new,
                    entry.obj,
                    dry_run,
                    request_options("UpdateOptions", dry_run),
                )
                new = await self.admission.mutate(attrs) or new
                new = self._merge_update(t, new, entry.obj)
                attrs.obj = new
                await self.admission.validate(attrs)
                current = self.store.get(rtype, t.namespace, t.name or "")
                if current is not entry:  # changed while the webhooks ran
                    if precondition or current is None:
                        raise conflict(rtype.plural, rtype.group, t.name or "", STALE)
                    continue
            if dry_run:
                return 200, _encode(new)
            return 200, self.commit(table, new, entry.obj)
        raise conflict(rtype.plural, rtype.group, t.name or "", STALE)

    def _merge_update(self, t: Target, new: Obj, old: Obj) -> Obj:
        """Carry what a client cannot change from ``old``; split status from the rest."""
        rtype = t.rtype
        if t.subresource == "status":
            merged = dict(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            if rtype.custom:
                apply_defaults(merged, rtype.schema)
            check = dra.PREPARE_STATUS.get(rtype.key)
            causes = check(merged, old) if check is not None else []
            if causes:
                raise invalid(rtype.kind, rtype.group, old["metadata"]["name"], causes)
            return merged
        meta, old_meta = dict(new["metadata"]), old["metadata"]
        for field in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        meta["name"], meta["namespace"] = old_meta["name"], old_meta.get("namespace")
        if meta["namespace"] is None:
            del meta["namespace"]
        new = {**new, "metadata": meta}
        if rtype.status:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if rtype.custom:
            apply_defaults(new, rtype.schema)
        causes = self._prepare_update(rtype, new, old)
        if causes:
            raise invalid(rtype.kind, rtype.group, meta["name"], causes)
        if tracks_generation(rtype) and spec_part(new) != spec_part(old):
            meta["generation"] = int(old_meta.get("generation") or 1) + 1
        self._validate(rtype, new)
        return new

    def _prepare_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[tuple[str, str]]:
        if rtype.key == _PODS:
            return strategies.prepare_pod_update(new, old)
        if rtype.key == _CRDS:
            causes = validate_crd(new)
            if not causes:
                new["status"] = crd_status(new)
            return causes
        prepare = _PREPARE_UPDATE.get(rtype.key)
        return prepare(new, old) if prepare is not None else []

    def commit(self, table: Table, new: Obj, old: Obj | None) -> bytes:
        """Write ``new``; an object being deleted whose last finalizer went is removed instead."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not meta.get("deletionGracePeriodSeconds"):
            return _encode(self.store.remove(table, new))
        return self.store.put(table, new, old).raw

    # --- delete --------------------------------------------------------------------------------------

    async def delete(self, t: Target, body: bytes, query: Query) -> Reply:
        entry = self._entry(t)
        options = delete_options(body, query)
        check_preconditions(t.rtype, entry, options)
        if self.admission.active(t.rtype):
            attrs = Attributes(
                t.rtype,
                "",
                "DELETE",
                t.namespace,
                t.name or "",
                None,
                entry.obj,
                is_dry_run(query),
                request_options("DeleteOptions", is_dry_run(query), options),
            )
            await self.admission.validate(attrs)
            entry = self._entry(t)
        if is_dry_run(query):
            return 200, entry.raw
        deleted = self.delete_object(self.table(t.rtype), entry, options.get("gracePeriodSeconds"), options["policy"])
        if t.rtype.key in _RETURN_DELETED or self.store.get(t.rtype, t.namespace, t.name or "") is not None:
            return 200, _encode(deleted)
        # Gone at once: most resources answer with a Status naming what went.
        meta = deleted["metadata"]
        details = {"name": meta["name"], **({"group": t.rtype.group} if t.rtype.group else {})}
        details |= {"kind": t.rtype.plural, "uid": meta["uid"]}
        return 200, _encode(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
        )

    async def delete_collection(self, t: Target, body: bytes, query: Query) -> Reply:
        table = self.table(t.rtype)
        match = matcher(t.rtype, query)
        options = delete_options(body, query)
        keys = namespace_slice(table, t.namespace, "") if t.namespace is not None else list(table.sorted_keys())
        items = []
        for key in keys:
            entry = table.objects.get(key)
            if entry is None or (match is not None and not match(entry.obj)):
                continue
            if self.admission.active(t.rtype):
                name = entry.obj["metadata"]["name"]
                attrs = Attributes(t.rtype, "", "DELETE", t.namespace, name, None, entry.obj, is_dry_run(query), None)
                await self.admission.validate(attrs)
            if not is_dry_run(query):
                deleted = self.delete_object(table, entry, options.get("gracePeriodSeconds"), options["policy"])
                # The server lists them as its internal objects, without apiVersion and kind.
                items.append({k: v for k, v in deleted.items() if k not in ("apiVersion", "kind")})
        rtype = t.rtype
        return 200, _encode(
            {
                "kind": rtype.list_kind,
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )

    def delete_object(self, table: Table, entry: Entry, grace: int | None, policy: str = "Background") -> Obj:
        """Delete now, or mark the object as being deleted (graceful pods, finalizers, the
        garbage collector's ``orphan`` and ``foregroundDeletion``)."""
        obj, meta = entry.obj, entry.obj["metadata"]
        finalizer = deletion_finalizer(policy)
        if finalizer and not meta.get("deletionTimestamp") and finalizer not in (meta.get("finalizers") or ()):
            meta = {**meta, "finalizers": [*(meta.get("finalizers") or ()), finalizer]}
            obj = {**obj, "metadata": meta}
        grace = pod_grace(obj, grace) if table.rtype.key == _PODS else 0
        if grace > 0:
            deadline = time.time() + grace
            if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds", 0) <= grace:
                return obj  # already terminating with a shorter grace period
            new_meta = {**meta, "deletionTimestamp": iso(deadline), "deletionGracePeriodSeconds": grace}
            return self.store.put(table, {**obj, "metadata": new_meta}, entry.obj).obj
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds", 0) == 0:
                return obj
            new_meta = {
                **meta,
                "deletionTimestamp": meta.get("deletionTimestamp") or iso(),
                "deletionGracePeriodSeconds": 0,
            }
            return self.store.put(table, {**obj, "metadata": new_meta}, entry.obj).obj
        if table.rtype.key == _NAMESPACES:
            return self._terminate_namespace(table, entry)
        if table.rtype.key == _PODS:
            # A pod always passes through graceful deletion, with a period of 0 here.
            obj = {**obj, "metadata": {**meta, "deletionTimestamp": iso(), "deletionGracePeriodSeconds": 0}}
        return self.store.remove(table, obj)

    def _terminate_namespace(self, table: Table, entry: Entry) -> Obj:
        """Terminating now; its objects and then itself go right after (the namespace controller's
        work, done at once: no grace periods, no finalizers)."""
        obj, meta = entry.obj, entry.obj["metadata"]
        if not meta.get("deletionTimestamp"):
            new_meta = {**meta, "deletionTimestamp": iso()}
            obj = self.store.put(table, {**obj, "metadata": new_meta, "status": {"phase": "Terminating"}}, obj).obj
        name = meta["name"]

        def finish() -> None:
            current = self.store.get(table.rtype, None, name)
            if current is not None and current.obj["metadata"].get("uid") == meta.get("uid"):
                self._empty_namespace(name)
                self.store.remove(table, current.obj)

        try:
            asyncio.get_running_loop().call_soon(finish)
        except RuntimeError:  # no loop (Api driven directly): at once
            finish()
        return obj

    def _empty_namespace(self, namespace: str) -> None:
        # The namespace controller's job, done at once: its objects go without grace or finalizers.
        for table in list(self.store.tables.values()):
            if not table.rtype.namespaced:
                continue
            for key in namespace_slice(table, namespace, ""):
                self.store.remove(table, table.objects[key].obj)

    # --- custom resource definitions -----------------------------------------------------------------

    def _on_crd_event(self, table: Table, event: Event) -> None:
        if table.rtype.key != _CRDS:
            return
        spec = event.obj["spec"]
        group, plural = spec["group"], spec["names"]["plural"]
        old = self.store.tables.get((group, plural))
        if event.type == DELETED:
            if old is not None:
                for entry in list(old.objects.values()):
                    self.store.remove(old, entry.obj)
            self.store.drop_table((group, plural))
            self.registry.remove(group, plural)
            return
        self.registry.remove(group, plural)
        types = crd_types(event.obj)
        for rtype in types:
            self.registry.add(rtype)
        if old is not None and types:
            old.rtype = types[0]
        elif types:
            self.store.table(types[0])


# --- module helpers ------------------------------------------------------------------------------------


def _prepare_crd(obj: Obj) -> None:
    causes = validate_crd(obj)
    if causes:
        raise invalid("CustomResourceDefinition", "apiextensions.k8s.io", obj["metadata"]["name"], causes)
    obj["status"] = crd_status(obj)


_PREPARE_CREATE: dict[tuple[str, str], Callable[[Obj], None]] = {
    _PODS: strategies.prepare_pod_create,
    ("", "nodes"): strategies.prepare_node_create,
    _NAMESPACES: strategies.prepare_namespace_create,
    _CRDS: _prepare_crd,
    **kinds.PREPARE_CREATE,
    **workloads.PREPARE_CREATE,
    **dra.PREPARE_CREATE,
}
_PREPARE_UPDATE: dict[tuple[str, str], Callable[[Obj, Obj], list[tuple[str, str]]]] = {
    **kinds.PREPARE_UPDATE,
    **workloads.PREPARE_UPDATE,
    **dra.PREPARE_UPDATE,
}
_VALIDATE: dict[tuple[str, str], Callable[[Obj], list[tuple[str, str]]]] = {
    _PODS: strategies.validate_pod,
    (
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    ): strategies.validate_webhook_configuration,
    (
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
    ): strategies.validate_webhook_configuration,
    ("scheduling.k8s.io", "priorityclasses"): strategies.validate_priority_class,
    **kinds.VALIDATE,
    **workloads.VALIDATE,
    **dra.VALIDATE,
}


# Resources whose deletion answers with the deleted object rather than a Status.
_RETURN_DELETED = frozenset({_PODS, _SERVICES, *dra.RETURN_DELETED})
# Built-in resources whose strategies keep metadata.generation (the others never set it).
_GENERATION = frozenset(
    {
        ("", "pods"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
        ("networking.k8s.io", "networkpolicies"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        _CRDS,
        *dra.GENERATION,
    }
)


# Fields the Go types leave out when empty (omitempty): stored without them, as etcd holds them.
_OMIT_EMPTY_META = ("labels", "annotations", "finalizers", "ownerReferences")
_OMIT_EMPTY: dict[tuple[str, str], tuple[str, ...]] = {("", "configmaps"): ("data", "binaryData")}


def drop_empty(rtype: ResourceType, obj: Obj) -> None:
    meta = obj["metadata"]
    for field in _OMIT_EMPTY_META:
        if field in meta and meta[field] in ({}, [], None):
            del meta[field]
    for field in _OMIT_EMPTY.get(rtype.key, ()):
        if field in obj and obj[field] in ({}, None):
            del obj[field]


def tracks_generation(rtype: ResourceType) -> bool:
    return rtype.custom or rtype.key in _GENERATION


def matcher(rtype: ResourceType, query: Query) -> Predicate | None:
    label = label_matcher(query.get("labelSelector"))
    field = field_matcher(query.get("fieldSelector"), rtype.qualified)
    if label is None:
        return field
    if field is None:
        return label
    return lambda obj: label(obj) and field(obj)


def pod_grace(pod: Obj, requested: int | None) -> int:
    """Grace period of a pod deletion: unscheduled and finished pods go at once."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return requested
    grace = spec.get("terminationGracePeriodSeconds")
    return int(grace) if isinstance(grace, int) and grace >= 0 else 30


def delete_options(body: bytes, query: Query) -> Obj:
    options: Obj = {}
    if body and body.strip():
        decoded = decode_json(body, "the DeleteOptions body")
        if not isinstance(decoded, dict):
            raise bad_request("DeleteOptions: the body must be a JSON object")
        options = decoded
    grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
    options["gracePeriodSeconds"] = int_option(grace, "gracePeriodSeconds")
    options["policy"] = propagation_policy(options, query)
    return options


def propagation_policy(options: Obj, query: Query) -> str:
    """``propagationPolicy`` (or the older ``orphanDependents``) of a deletion; Background by default."""
    policy = options.get("propagationPolicy", query.get("propagationPolicy"))
    orphan = options.get("orphanDependents", query.get("orphanDependents"))
    orphan = orphan in (True, "true", "1") if orphan is not None else None
    causes = []
    if policy is not None and policy not in POLICIES:
        supported = ", ".join(f'"{p}"' for p in (*POLICIES, "nil"))
        causes.append(("propagationPolicy", f'Unsupported value: "{policy}": supported values: {supported}'))
    if policy is not None and orphan is not None:
        causes.append(
            ("propagationPolicy", "Invalid value: orphanDependents and deletionPropagation cannot both be set")
        )
    if causes:
        raise invalid("DeleteOptions", "meta.k8s.io", "", causes)
    if orphan is not None:
        return "Orphan" if orphan else "Background"
    return str(policy or "Background")


def check_preconditions(rtype: ResourceType, entry: Entry, options: Obj) -> None:
    """DeleteOptions.preconditions, checked (and worded) as the server's BeforeDelete does."""
    pre = options.get("preconditions") or {}
    meta = entry.obj["metadata"]
    if pre.get("uid") and pre["uid"] != meta["uid"]:
        raise conflict(
            rtype.kind,
            rtype.group,
            meta["name"],
            f"the UID in the precondition ({pre['uid']}) does not match the UID in record ({meta['uid']}). "
            "The object might have been deleted and then recreated",
        )
    if pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
        raise conflict(
            rtype.kind,
            rtype.group,
            meta["name"],
            f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not match the "
            f"ResourceVersion in record ({meta['resourceVersion']}). The object might have been modified",
        )


def forbidden_pod(pod: Obj, why: str) -> ApiError:
    """403 from a built-in admission plugin, worded as the server's NewForbidden."""
    name = pod["metadata"].get("name") or pod["metadata"].get("generateName", "")
    return ApiError(403, "Forbidden", f'pods "{name}" is forbidden: {why}', {"name": name, "kind": "pods"})


def check_list_options(query: Query) -> None:
    match = query.get("resourceVersionMatch")
    if not match:
        return
    causes = []
    if match not in ("Exact", "NotOlderThan"):
        causes.append(
            ("resourceVersionMatch", f'Unsupported value: "{match}": supported values: "Exact", "NotOlderThan"')
        )
    elif not query.get("resourceVersion"):
        causes.append(
            ("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided")
        )
    elif match == "Exact" and query.get("resourceVersion") == "0":
        causes.append(
            ("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        )
    if causes:
        raise invalid("ListOptions", "meta.k8s.io", "", causes)


def request_options(kind: str, dry_run: bool, given: Obj | None = None) -> Obj:
    """The options an AdmissionReview carries: what the client set (our own keys left out)."""
    options: Obj = {"kind": kind, "apiVersion": "meta.k8s.io/v1"}
    for key, value in (given or {}).items():
        if key not in ("policy", "kind", "apiVersion") and value is not None:
            options[key] = value
    if dry_run:
        options["dryRun"] = ["All"]
    return options


def is_dry_run(query: Query) -> bool:
    value = query.get("dryRun")
    if value and value != "All":
        raise bad_request(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return value == "All"


def _continue_start(token: str | None) -> str:
    if not token:
        return ""
    try:
        decoded = msgspec.json.decode(base64.urlsafe_b64decode(token.encode()))
        return str(decoded["start"])
    except (ValueError, KeyError, TypeError, msgspec.DecodeError):
        raise bad_request(f"continue: invalid value {token!r}") from None


def namespace_slice(table: Table, namespace: str, start: str) -> list[str]:
    """The sorted keys of one namespace (from ``start`` on): the range [``ns/``, ``ns0``)."""
    keys = table.sorted_keys()
    lo = bisect.bisect_left(keys, max(namespace + "/", start))
    hi = bisect.bisect_left(keys, namespace + "0")  # "0" sorts right after "/"
    return keys[lo:hi]
