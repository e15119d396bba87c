"""Dynamic resource allocation in the predicates plugin (``predicate.DynamicResourceAllocationEnable``).

What kube-scheduler's DynamicResources plugin does inside Volcano's predicates: a pod's
``resourceClaims`` must exist (pre-predicate, else no node can help); on each node, a claim
already allocated must be usable there (its allocation's node selector), and an unallocated
claim must be satisfiable from the devices the node's ResourceSlices publish: per request,
``count`` devices (or all, with ``allocationMode: All``) that match the DeviceClass's and the
request's CEL selectors and that no other claim holds.  When a task is allocated in the session
its claims are allocated on its node (devices first in slice order, as kube's allocator picks),
so later tasks see those devices taken; a discard gives them back.

Not modelled: ``firstAvailable`` sub-requests, admin access, device taints, partitionable
devices and consumable capacity, and writing the allocation to the claim at bind (the session
reports it in ``result.claim_allocations``; ``lahar simulate`` applies it between cycles).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar.api.objects import (
    AllocationResult,
    Device,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
    ResourceSlice,
)
from lahar.api.quantity import parse_quantity
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.types import Code
from lahar_scheduler.plugins.dra_cel import CelError, Qty, matches
from lahar_scheduler.plugins.k8s.selectors import node_selector_matches

if TYPE_CHECKING:
    from lahar.api.objects import Pod
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import IntArray, NodeInfo
    from lahar_scheduler.framework.session import Session

DeviceKey = tuple[str, str, str]  # driver, pool, device
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"


def has_claims(pod: Pod) -> bool:
    return bool(pod.spec.resource_claims)


def claim_keys(pod: Pod) -> tuple[list[str], str | None]:
    """The pod's claims as ``namespace/name`` keys, or the first that cannot be named yet."""
    ns = pod.metadata.namespace
    generated = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
    keys: list[str] = []
    for entry in pod.spec.resource_claims:
        name = entry.resource_claim_name
        if name is None and entry.resource_claim_template_name is not None:
            name = generated.get(entry.name)
            if name is None:
                return keys, f'waiting for resource claim of "{entry.name}" to be created from its template'
        if name is None:
            continue
        keys.append(f"{ns}/{name}")
    return keys, None


def device_env(driver: str, device: Device) -> dict[str, Any]:
    """``device`` as a CEL selector sees it: attributes and capacity by domain (the driver's for
    unqualified names)."""
    attributes: dict[str, dict[str, Any]] = defaultdict(dict)
    for name, attr in device.attributes.items():
        domain, _, short = name.rpartition("/")
        value: Any = next(v for v in (attr.int_, attr.bool_, attr.string, attr.version) if v is not None)
        attributes[domain or driver][short] = value
    capacity: dict[str, dict[str, Any]] = defaultdict(dict)
    for name, cap in device.capacity.items():
        domain, _, short = name.rpartition("/")
        capacity[domain or driver][short] = Qty(float(parse_quantity(str(cap.value))))
    return {"driver": driver, "attributes": dict(attributes), "capacity": dict(capacity)}


def _node_only(name: str) -> NodeSelector:
    field = NodeSelectorRequirement(key="metadata.name", operator="In", values=[name])
    return NodeSelector(node_selector_terms=[NodeSelectorTerm(match_fields=[field])])


class DraAllocator:
    """Devices per node, who holds them, and claim allocation for one session."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.objects = ssn.snapshot.dra
        self.taken: dict[DeviceKey, str] = {}  # device → claim key holding it
        for key, claim in self.objects.claims.items():
            if claim.status.allocation is not None:
                for r in claim.status.allocation.devices.results:
                    self.taken[(r.driver, r.pool, r.device)] = key
        self.session: dict[str, AllocationResult] = {}  # claims allocated this session
        self.owner: dict[int, list[str]] = {}  # task id → claims it allocated
        self._devices: dict[str, list[tuple[DeviceKey, dict[str, Any], bool]]] = {}

    # -- what a node offers -------------------------------------------------------------------------
    def devices_on(self, node: NodeInfo) -> list[tuple[DeviceKey, dict[str, Any], bool]]:
        """(key, CEL view, node-local?) of every device the node can reach, in slice order."""
        got = self._devices.get(node.name)
        if got is None:
            got = self._devices[node.name] = [
                ((s.spec.driver, s.spec.pool.name, d.name), device_env(s.spec.driver, d), local)
                for s in self.objects.slices
                for local in [self._reaches(s, node)]
                if local is not None
                for d in s.spec.devices
            ]
        return got

    @staticmethod
    def _reaches(s: ResourceSlice, node: NodeInfo) -> bool | None:
        """True for a node-local slice on this node, False for one shared with it, None if not."""
        if s.spec.node_name is not None:
            return True if s.spec.node_name == node.name else None
        if s.spec.all_nodes:
            return False
        if s.spec.node_selector is not None and node_selector_matches(s.spec.node_selector, node.name, node.labels):
            return False
        return None

    # -- the predicate ----------------------------------------------------------------------------
    def pre_predicate(self, task: TaskInfo) -> str | None:
        keys, waiting = claim_keys(task.pod)
        if waiting is not None:
            return waiting
        for key in keys:
            if key not in self.objects.claims:
                return f'resourceclaim "{key.split("/", 1)[1]}" not found'
        return None

    def failures(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        by_reason: dict[tuple[str, Code], list[int]] = defaultdict(list)
        for j, i in enumerate(idx.tolist()):
            why = self.node_reason(task, self.ssn.node_list[i])
            if why is not None:
                by_reason[why].append(j)
        out = []
        for (reason, code), rows in by_reason.items():
            mask = np.zeros(len(idx), dtype=bool)
            mask[rows] = True
            out.append(Failure(mask, reason, code))
        return out

    def node_reason(self, task: TaskInfo, node: NodeInfo) -> tuple[str, Code] | None:
        keys, _ = claim_keys(task.pod)
        held: set[DeviceKey] = set()
        for key in keys:
            claim = self.objects.claims.get(key)
            if claim is None:
                return f'resourceclaim "{key}" not found', Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            done = self.session.get(key) or claim.status.allocation
            if done is not None:
                sel = done.node_selector
                if sel is not None and not node_selector_matches(sel, node.name, node.labels):
                    return NOT_ON_NODE, Code.UNSCHEDULABLE
                continue
            got = self.allocate(key, claim, node, held)
            if isinstance(got, tuple):
                return got
        return None

    def allocate(
        self, key: str, claim: ResourceClaim, node: NodeInfo, held: set[DeviceKey]
    ) -> AllocationResult | tuple[str, Code]:
        """Devices for every request of an unallocated claim on this node (adding them to
        ``held``), or why not: too few matching free devices, or a selector error."""
        results = []
        local = False
        for request in claim.spec.devices.requests:
            exact = request.exactly
            if exact is None:
                return f"claim {key}: request {request.name}: only exact requests are supported", Code.ERROR
            cls = self.objects.classes.get(exact.device_class_name)
            if cls is None:
                why = f'claim {key}: device class "{exact.device_class_name}" does not exist'
                return why, Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            selectors = [s.cel.expression for s in (*cls.spec.selectors, *exact.selectors) if s.cel is not None]
            want = None if exact.allocation_mode == "All" else max(exact.count, 1)
            chosen = []
            for dkey, env, node_local in self.devices_on(node):
                if dkey in self.taken or dkey in held:
                    continue
                try:
                    ok = all(matches(expr, env) for expr in selectors)
                except CelError as exc:
                    return f"claim {key}: selector: CEL runtime error: {exc}", Code.ERROR
                if ok:
                    chosen.append(dkey)
                    local = local or node_local
                    if want is not None and len(chosen) == want:
                        break
            if not chosen or (want is not None and len(chosen) < want):
                return CANNOT_ALLOCATE, Code.UNSCHEDULABLE
            held.update(chosen)
            results += [DeviceRequestAllocationResult(request.name, d, p, n) for d, p, n in chosen]
        devices = DeviceAllocationResult(results=results)
        return AllocationResult(devices=devices, node_selector=_node_only(node.name) if local else None)

    # -- session accounting -----------------------------------------------------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        node = self.ssn.nodes.by_name.get(task.node_name)
        if node is None:
            return
        keys, _ = claim_keys(task.pod)
        mine = []
        for key in keys:
            claim = self.objects.claims.get(key)
            if claim is None or claim.status.allocation is not None or key in self.session:
                continue
            got = self.allocate(key, claim, node, set())
            if isinstance(got, AllocationResult):
                self.session[key] = got
                for r in got.devices.results:
                    self.taken[(r.driver, r.pool, r.device)] = key
                mine.append(key)
        if mine:
            self.owner[id(task)] = mine

    def on_deallocate(self, task: TaskInfo) -> None:
        for key in self.owner.pop(id(task), []):
            got = self.session.pop(key, None)
            if got is not None:
                for r in got.devices.results:
                    self.taken.pop((r.driver, r.pool, r.device), None)

    def report(self, ssn: Session) -> None:
        """Claims of the pods this session binds, for the binder (and simulate) to write."""
        bound = {id(t) for t, _ in ssn.result.binds}
        for task_id, keys in self.owner.items():
            if task_id in bound:
                for key in keys:
                    ssn.result.claim_allocations[key] = self.session[key]
