"""The scheduler's view of the cluster: jobs, tasks, nodes, queues and priority classes.

A snapshot is built from plain Kubernetes objects and then kept up to date with ``upsert_*`` /
``delete_*`` calls, so a long-running scheduler never rebuilds the world.  Sessions run over it
and undo their own uncommitted changes when they close.  Nothing here reads a clock: ``now``
arrives with the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import msgspec
import numpy as np

from lahar.api.codec import enc_hook
from lahar.api.objects import (
    AllocationResult,
    DeviceClass,
    HyperNode,
    Namespace,
    Node,
    Numatopology,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    PodSpec,
    PriorityClass,
    Queue,
    ResourceClaim,
    ResourceQuota,
    ResourceQuotaStatus,
    ResourceSlice,
)
from lahar.api.resource import Resource
from lahar_scheduler.framework.devices import DeviceRequest, card_use, device_request
from lahar_scheduler.framework.hypernodes import HyperNodeTree
from lahar_scheduler.framework.jobs import JobInfo, QueueInfo, TaskInfo, pod_requests
from lahar_scheduler.framework.nodes import FloatArray, IntArray, NodeInfo, NodeTable, ResourceSpace
from lahar_scheduler.framework.reservation import Reservation
from lahar_scheduler.framework.types import GROUP_NAME_ANNOTATION, TERMINAL_STATUSES, TaskStatus

DEFAULT_SCHEDULER_NAMES = frozenset({"volcano", "lahar"})

_key_encoder = msgspec.msgpack.Encoder()
_shape_encoder = msgspec.msgpack.Encoder(enc_hook=enc_hook)
MAX_SHAPES = 50_000


def parse_time(stamp: str | None) -> float:
    """RFC 3339 to epoch seconds; a missing stamp is the zero time."""
    if not stamp:
        return 0.0
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        # Without an offset, .timestamp() would read the machine's local time zone, so job order
        # and SLA waits would differ between machines; Kubernetes times are UTC.
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def template_key(pod: Pod, resreq: Resource, init: Resource) -> bytes:
    """Tasks with equal keys pass the same static predicates and get the same static scores."""
    spec = pod.spec
    parts = (
        pod.metadata.namespace,
        sorted(spec.node_selector.items()),
        msgspec.to_builtins(spec.affinity) if spec.affinity is not None else None,
        msgspec.to_builtins(spec.tolerations),
        msgspec.to_builtins(spec.topology_spread_constraints),
        [(p.host_port, p.protocol, p.host_ip) for c in spec.containers for p in c.ports if p.host_port],
        sorted(init.scalars.items()),
        (init.milli_cpu, init.memory, resreq.milli_cpu, resreq.memory),
        sorted(pod.metadata.labels.items()) if spec.affinity or spec.topology_spread_constraints else None,
        sorted((k, v) for k, v in pod.metadata.annotations.items() if k.startswith("volcano.sh/")),
        [
            (c.resources.requests.get("cpu") is None, c.resources.requests.get("memory") is None)
            for c in spec.containers
        ],
    )
    return _key_encoder.encode(parts)


@dataclass(frozen=True, slots=True)
class _Shape:
    """What every task of one pod shape derives alike (see ``shape_key``): a ``TaskShape``."""

    resreq: Resource
    init_resreq: Resource
    nonzero_vec: FloatArray
    res_vec: FloatArray
    init_vec: FloatArray
    fit_cols: IntArray
    template_key: bytes
    devreq: DeviceRequest | None
    best_effort: bool
    priority: int  # the volcano.sh/task-priority annotation, else the spec's
    preemption_policy: str
    sch_gated: bool
    pod_affinity: bool  # has_pod_affinity

    @classmethod
    def of(cls, task: TaskInfo) -> _Shape:
        """The derived values only, not the task: a cached shape must not keep a deleted pod alive."""
        return cls(
            task.resreq,
            task.init_resreq,
            task.nonzero_vec,
            task.res_vec,
            task.init_vec,
            task.fit_cols,
            task.template_key,
            task.devreq,
            task.best_effort,
            task.priority,
            task.preemption_policy,
            task.sch_gated,
            has_pod_affinity(task.pod),
        )


def spec_shape(spec: PodSpec) -> bytes:
    """The spec's part of a shape key: the spec without its node, encoded."""
    return _shape_encoder.encode(msgspec.structs.replace(spec, node_name="") if spec.node_name else spec)


def shape_key(pod: Pod, spec_part: bytes | None = None) -> bytes:
    """Everything a task derives from its pod besides identity and state: the spec without the
    node, the namespace, and the labels and annotations that ``template_key`` reads.
    ``spec_part`` is ``spec_shape(pod.spec)`` when already known (pods of one template share
    it: encoding every pod's spec again was a third of a snapshot build); the key is the same
    bytes either way, as msgpack embeds the encoded part as it is."""
    meta, spec = pod.metadata, pod.spec
    labels = meta.labels if spec.affinity or spec.topology_spread_constraints else None
    volcano = [(k, v) for k, v in meta.annotations.items() if k.startswith("volcano.sh/")]
    part = msgspec.Raw(spec_part if spec_part is not None else spec_shape(spec))
    return _shape_encoder.encode((meta.namespace, part, labels, volcano))


def shape_keys(pods: Sequence[Pod], spec_parts: Sequence[bytes | None]) -> list[bytes]:
    """``shape_key(pod, part)`` of each pod, with ``spec_shape`` of its spec where known.  The
    pods of one spec, namespace and volcano annotations share one key, made once (one object:
    its hash is computed once too); a pod whose labels count as well is keyed alone."""
    made: dict[tuple[str, bytes, tuple[tuple[str, str], ...]], bytes] = {}
    out = []
    for pod, part in zip(pods, spec_parts, strict=True):
        spec, meta = pod.spec, pod.metadata
        if part is None or spec.affinity or spec.topology_spread_constraints:
            out.append(shape_key(pod, part))
            continue
        # What shape_key reads of such a pod, as a hashable key.
        volcano = tuple([(k, v) for k, v in meta.annotations.items() if k.startswith("volcano.sh/")])
        memo = (meta.namespace, part, volcano)
        key = made.get(memo)
        if key is None:
            key = made[memo] = shape_key(pod, part)
        out.append(key)
    return out


def has_pod_affinity(pod: Pod) -> bool:
    """The pod carries pod affinity or anti-affinity (terms of either kind)."""
    aff = pod.spec.affinity
    return aff is not None and (aff.pod_affinity is not None or aff.pod_anti_affinity is not None)


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


@dataclass
class DraObjects:
    """Dynamic resource allocation's objects: claims by ``namespace/name``, slices, classes by name.

    ``assumed`` holds allocations a running scheduler decided and sent to the binder but has
    not yet seen on the claim (claim key → (pod key, allocation)), so the next sessions count
    those devices as taken; an entry goes when the claim shows an allocation or the bind is
    rolled back."""

    claims: dict[str, ResourceClaim] = field(default_factory=dict)
    slices: list[ResourceSlice] = field(default_factory=list)
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    assumed: dict[str, tuple[str, AllocationResult]] = field(default_factory=dict)

    def allocation(self, key: str) -> AllocationResult | None:
        """The claim's allocation: on the claim, else assumed from our own decision."""
        claim = self.claims.get(key)
        if claim is not None and claim.status.allocation is not None:
            return claim.status.allocation
        held = self.assumed.get(key)
        return held[1] if held is not None else None

    def upsert_claim(self, claim: ResourceClaim) -> None:
        key = f"{claim.metadata.namespace}/{claim.metadata.name}"
        self.claims[key] = claim
        if claim.status.allocation is not None:
            self.assumed.pop(key, None)  # the binder's write arrived: the claim says it now

    def delete_claim(self, key: str) -> None:
        self.claims.pop(key, None)
        self.assumed.pop(key, None)

    def forget_assumed(self, pod: str) -> None:
        """A bind rolled back: its claims' assumed allocations no longer hold devices."""
        for key in [k for k, (p, _) in self.assumed.items() if p == pod]:
            del self.assumed[key]

    def upsert_slice(self, rs: ResourceSlice) -> None:
        # Slices keep the order they arrived in: the allocator picks devices in slice order.
        for i, held in enumerate(self.slices):
            if held.metadata.name == rs.metadata.name:
                self.slices[i] = rs
                return
        self.slices.append(rs)

    def delete_slice(self, name: str) -> None:
        self.slices = [s for s in self.slices if s.metadata.name != name]


class Snapshot:
    """Everything a session reads.  ``space`` fixes the resource dimensions of the node arrays."""

    def __init__(
        self,
        nodes: list[Node],
        pods: list[Pod],
        podgroups: list[PodGroup],
        queues: list[Queue],
        priority_classes: Iterable[PriorityClass] = (),
        namespaces: Iterable[Namespace] = (),
        *,
        now: float = 0.0,
        scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES,
        default_queue: str = "default",
        resource_quotas: Iterable[ResourceQuota] = (),
        numatopologies: Iterable[Numatopology] = (),
        pdbs: Iterable[PodDisruptionBudget] = (),
        hypernodes: Iterable[HyperNode] = (),
        dra: DraObjects | None = None,
        spec_shapes: Sequence[bytes | None] | None = None,
    ) -> None:
        """``spec_shapes``, when given, holds ``spec_shape`` of each pod's spec (or None where
        not known), in the order of ``pods``."""
        self.now = now
        self.dra = dra if dra is not None else DraObjects()
        # Per node, its Numatopology (numa-aware), and the cpus a session gave pods the exporter
        # does not list yet (Volcano's UnassignedNumaPods): node -> pod key -> cpus.
        self.numatopologies: dict[str, Numatopology] = {t.metadata.name: t for t in numatopologies}
        self.numa_unassigned: dict[str, dict[str, frozenset[int]]] = {}
        # What a plugin keeps from one session to the next (tdm's last eviction time), by plugin
        # name: the snapshot lives as long as the scheduler, sessions and plugins do not.
        self.plugin_memory: dict[str, dict[str, object]] = {}
        self.reservation = Reservation()  # elect/reserve's target job and locked nodes
        # Where Volcano's predicate helper resumes its walk over the nodes (framework/nodewindow.py).
        self.last_processed_node = 0
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        names: set[str] = set()
        for node in nodes:
            names.update(node.status.allocatable)
        seen: set[bytes] = set()
        shapes = shape_keys(pods, [None] * len(pods) if spec_shapes is None else spec_shapes)
        for pod, shape in zip(pods, shapes, strict=True):  # the resource dimensions pods request
            if shape not in seen:
                seen.add(shape)
                names.update(pod_requests(pod)[1].scalars)
        self.space = ResourceSpace({n for n in names if n not in ("cpu", "memory")})
        self.node_objects: dict[str, Node] = {n.metadata.name: n for n in nodes}
        self._table = NodeTable(self.space, list(self.node_objects.values()))
        self._nodes_dirty = False
        self.hypernode_objects: dict[str, HyperNode] = {h.metadata.name: h for h in hypernodes}
        self._tree: HyperNodeTree | None = None
        self._shapes: dict[bytes, _Shape] = {}  # what tasks of one pod shape share: see upsert_pod
        self.queues: dict[str, QueueInfo] = {}
        for q in queues:
            self.upsert_queue(q)
        self.priority_classes: dict[str, PriorityClass] = {}
        for pc in priority_classes:
            self.priority_classes[pc.metadata.name] = pc
        self.namespace_labels: dict[str, dict[str, str]] = {
            ns.metadata.name: dict(ns.metadata.labels) for ns in namespaces
        }
        # Per namespace, each ResourceQuota's status (hard and used), as Volcano's NamespaceInfo.
        self.quotas: dict[str, dict[str, ResourceQuotaStatus]] = {}
        for rq in resource_quotas:
            self.upsert_quota(rq)
        # PodDisruptionBudgets by namespace/name, in the order they arrived (the pdb plugin
        # spends each one's disruptionsAllowed across the victims it is shown).
        self.pdbs: dict[str, PodDisruptionBudget] = {}
        for pdb in pdbs:
            self.upsert_pdb(pdb)
        self.jobs: dict[str, JobInfo] = {}
        for pg in podgroups:
            self.upsert_podgroup(pg)
        self.tasks: dict[str, TaskInfo] = {}
        # Pods outside any job still hold node resources (no group annotation).
        self.others: dict[str, TaskInfo] = {}
        # Tasks whose pods carry pod (anti-)affinity: while there are none, the plugins that
        # look for them among every placed pod at each session's open need not look.
        self.pod_affinity_tasks = 0
        placed: list[tuple[NodeInfo, TaskInfo]] = []
        joining: dict[str, list[TaskInfo]] = {}
        made = 0
        for pod, shape in zip(pods, shapes, strict=True):
            made += self._upsert_pod(pod, shape, placed, joining) is not None
        self._join(joining)
        if len(self.tasks) + len(self.others) < made:  # a pod listed twice: its last task counts
            placed = [(n, t) for n, t in placed if (self.tasks.get(t.key) or self.others.get(t.key)) is t]
        self._table.add_tasks(placed)  # the node sums of every placed task at once

    # -- resource quotas -------------------------------------------------------------------
    def upsert_quota(self, rq: ResourceQuota) -> None:
        self.quotas.setdefault(rq.metadata.namespace, {})[rq.metadata.name] = rq.status

    def delete_quota(self, namespace: str, name: str) -> None:
        held = self.quotas.get(namespace)
        if held is not None:
            held.pop(name, None)
            if not held:
                del self.quotas[namespace]

    # -- NUMA topologies (one per node, named after it) ----------------------------------
    def upsert_numatopology(self, topo: Numatopology) -> None:
        self.numatopologies[topo.metadata.name] = topo

    def delete_numatopology(self, name: str) -> None:
        self.numatopologies.pop(name, None)

    # -- pod disruption budgets --------------------------------------------------------------
    def upsert_pdb(self, pdb: PodDisruptionBudget) -> None:
        self.pdbs[f"{pdb.metadata.namespace}/{pdb.metadata.name}"] = pdb

    def delete_pdb(self, namespace: str, name: str) -> None:
        self.pdbs.pop(f"{namespace}/{name}", None)

    # -- hypernodes --------------------------------------------------------------------------
    @property
    def hypernodes(self) -> HyperNodeTree:
        """The HyperNode tree, rebuilt first if HyperNodes or the node set changed."""
        if self._tree is None:
            self._tree = HyperNodeTree(self.hypernode_objects.values(), self.node_objects)
        return self._tree

    def upsert_hypernode(self, hn: HyperNode) -> None:
        self.hypernode_objects[hn.metadata.name] = hn
        self._tree = None

    def delete_hypernode(self, name: str) -> None:
        if self.hypernode_objects.pop(name, None) is not None:
            self._tree = None

    # -- nodes -----------------------------------------------------------------------------
    @property
    def nodes(self) -> NodeTable:
        """The node arrays, rebuilt first if nodes changed since they were last built."""
        if self._nodes_dirty:
            self._rebuild_nodes()
        return self._table

    def upsert_node(self, node: Node) -> bool:
        """Add or change a node; returns True when its schedulable shape changed.

        A changed shape only marks the arrays stale: they are rebuilt once, when next read, so a
        thousand nodes arriving one delta at a time cost one rebuild, not a thousand."""
        name = node.metadata.name
        old = self.node_objects.get(name)
        self.node_objects[name] = node
        if old is not None and _same_shape(old, node) and not self._nodes_dirty:
            self._table.by_name[name].node = node
            return False
        self._nodes_dirty = True
        self._tree = None  # label and regex members depend on the node set and labels
        return True

    def delete_node(self, name: str) -> bool:
        if self.node_objects.pop(name, None) is None:
            return False
        self._nodes_dirty = True
        self._tree = None
        return True

    def _rebuild_nodes(self) -> None:
        """Node arrays are rebuilt whole after node changes (rare next to pod changes)."""
        self._nodes_dirty = False
        for obj in self.node_objects.values():
            for name in obj.status.allocatable:
                if name not in ("cpu", "memory"):
                    self.space.ensure(name)
        width = len(self.space)
        table = self._table = NodeTable(self.space, list(self.node_objects.values()))
        for t in (*self.tasks.values(), *self.others.values()):
            if len(t.res_vec) != width:
                t.res_vec = np.pad(t.res_vec, (0, width - len(t.res_vec)))
                t.init_vec = np.pad(t.init_vec, (0, width - len(t.init_vec)))
            node = table.by_name.get(t.node_name) if t.node_name else None
            if node is not None and t.status not in _OFF_NODE:
                table.add_task(node, t)

    # -- queues and priority classes ---------------------------------------------------
    def upsert_queue(self, queue: Queue) -> None:
        info = QueueInfo(queue)
        self.queues[info.name] = info
        self._link_queues()

    def delete_queue(self, name: str) -> None:
        self.queues.pop(name, None)
        self._link_queues()

    def _link_queues(self) -> None:
        for q in self.queues.values():
            q.children = []
        for q in self.queues.values():
            if q.parent and q.parent in self.queues and q.parent != q.name:
                self.queues[q.parent].children.append(q.name)

    def upsert_priority_class(self, pc: PriorityClass) -> None:
        self.priority_classes[pc.metadata.name] = pc

    def delete_priority_class(self, name: str) -> None:
        self.priority_classes.pop(name, None)

    def job_priority(self, job: JobInfo) -> int:
        """The PodGroup's PriorityClass value, else the global default's, else 0."""
        name = job.podgroup.spec.priority_class_name if job.podgroup is not None else ""
        pc = self.priority_classes.get(name) if name else None
        if pc is not None:
            return pc.value
        for candidate in self.priority_classes.values():
            if candidate.global_default:
                return candidate.value
        return 0

    # -- jobs ----------------------------------------------------------------------------
    def upsert_podgroup(self, pg: PodGroup) -> None:
        uid = f"{pg.metadata.namespace}/{pg.metadata.name}"
        job = self.jobs.get(uid)
        if job is None:
            self.jobs[uid] = JobInfo(uid, pg, self.default_queue)
        else:
            job.set_podgroup(pg, self.default_queue)

    def delete_podgroup(self, namespace: str, name: str) -> None:
        job = self.jobs.get(f"{namespace}/{name}")
        if job is None:
            return
        job.podgroup = None
        if not job.tasks:
            del self.jobs[job.uid]

    # -- pods ----------------------------------------------------------------------------
    def _is_ours(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self.scheduler_names

    def upsert_pod(self, pod: Pod) -> TaskInfo | None:
        """Add or replace a pod's task.  What a task derives from the pod's spec (requests, their
        vectors, its template key) is shared by every pod of the same shape: the pods of one job,
        and one pod across its bind and phase changes."""
        return self._upsert_pod(pod, shape_key(pod), None)

    def _upsert_pod(
        self,
        pod: Pod,
        shape: bytes,
        placed: list[tuple[NodeInfo, TaskInfo]] | None,
        joining: dict[str, list[TaskInfo]] | None = None,
    ) -> TaskInfo | None:
        """``upsert_pod`` with the pod's shape key known; with ``placed``, a task on a node is
        listed there for one ``NodeTable.add_tasks`` instead of being added alone; with
        ``joining``, a task of a job is listed there, by job, for one ``JobInfo.add_tasks``."""
        meta = pod.metadata
        key = f"{meta.namespace}/{meta.name}"
        if key in self.tasks or key in self.others:
            if joining:
                self._join(joining)  # the job must hold the task it is to lose
            self.delete_pod(meta.namespace, meta.name)
        group = meta.annotations.get(GROUP_NAME_ANNOTATION, "")
        if not pod.spec.node_name and pod.spec.scheduler_name not in self.scheduler_names:
            return None
        # A pod of another scheduler is kept only once it is on a node; if it carries a group's
        # annotation it is a task of that job (Volcano takes the job from the annotation whatever
        # the scheduler name), so it counts toward minMember, readiness and the PodGroup phase.
        job_id = f"{meta.namespace}/{group}" if group else ""
        known = self._shapes.get(shape)
        if known is not None and len(known.res_vec) == len(self.space.dims):
            task = TaskInfo.like(pod, job_id, known)
        else:
            resreq, init = pod_requests(pod)
            task = TaskInfo(pod, job_id, resreq, init)
            task.devreq = device_request(pod)
            self._vectorise(task)
            if len(self._shapes) >= MAX_SHAPES:
                self._shapes.clear()  # many distinct shapes: start over rather than track age
            known = self._shapes[shape] = _Shape.of(task)
        if task.devreq is not None:
            task.cards = card_use(pod.metadata.annotations, task.devreq)
        if job_id:
            job = self.jobs.get(job_id)
            if job is None:
                job = self.jobs[job_id] = JobInfo(job_id, None, self.default_queue)
            if joining is None:
                job.add_task(task)
            else:
                held = joining.get(job_id)
                if held is None:
                    held = joining[job_id] = []
                held.append(task)
            self.tasks[key] = task
        else:
            self.others[key] = task
        if known.pod_affinity:
            self.pod_affinity_tasks += 1
        node = self._table.by_name.get(task.node_name) if task.node_name else None
        if node is not None and task.status not in TERMINAL_STATUSES:
            if placed is None:
                self._table.add_task(node, task)
            else:
                placed.append((node, task))
        return task

    def _join(self, joining: dict[str, list[TaskInfo]]) -> None:
        """The tasks listed by ``_upsert_pod`` join their jobs; the list is emptied."""
        for job_id, tasks in joining.items():
            self.jobs[job_id].add_tasks(tasks)
        joining.clear()

    def delete_pod(self, namespace: str, name: str) -> TaskInfo | None:
        key = f"{namespace}/{name}"
        task = self.tasks.pop(key, None) or self.others.pop(key, None)
        if task is None:
            return None
        if has_pod_affinity(task.pod):
            self.pod_affinity_tasks -= 1
        node = self._table.by_name.get(task.node_name) if task.node_name else None
        if node is not None and task.uid in node.tasks:
            self._table.remove_task(node, task)
        if task.job:
            job = self.jobs.get(task.job)
            if job is not None:
                job.remove_task(task)
                if not job.tasks and job.podgroup is None:
                    del self.jobs[job.uid]
        return task

    def _vectorise(self, task: TaskInfo) -> None:
        width = len(self.space)
        task.res_vec = self.space.vector(task.resreq)
        task.init_vec = self.space.vector(task.init_resreq)
        if len(self.space) != width:
            self._table.widen(len(self.space))
            for t in (*self.tasks.values(), *self.others.values()):
                t.res_vec = np.pad(t.res_vec, (0, len(self.space) - len(t.res_vec)))
                t.init_vec = np.pad(t.init_vec, (0, len(self.space) - len(t.init_vec)))
            task.res_vec = self.space.vector(task.resreq)
            task.init_vec = self.space.vector(task.init_resreq)
        task.fit_cols = self.space.checked_columns(task.init_resreq)
        task.template_key = template_key(task.pod, task.resreq, task.init_resreq)

    def move(self, task: TaskInfo, status: TaskStatus, node_name: str) -> None:
        """Change a task's status and node, keeping job and node accounting consistent."""
        job = self.jobs.get(task.job)
        if node_name == task.node_name and task.status in _PLAIN and status in _PLAIN:
            # e.g. Allocated → Binding: the node's sums do not change, so leave the node alone
            # (and its cached per-node results valid).  _same_accounting, inline: asked per move.
            if job is not None:
                job.update_status(task, status)
            else:
                task.status = status
            return
        old_node = self.nodes.by_name.get(task.node_name) if task.node_name else None
        if old_node is not None and task.uid in old_node.tasks:
            if status == _RELEASING and node_name == task.node_name and task.status in _PLAIN and task.cards is None:
                # An eviction: off the node and back on it as Releasing, in one pass.
                self.nodes.release(old_node, task)
                if job is not None:
                    job.update_status(task, status)
                else:
                    task.status = status
                return
            self.nodes.remove_task(old_node, task)
        if job is not None:
            job.update_status(task, status)
        else:
            task.status = status
        if not node_name and task.card_annotations is not None:
            # Off its node, a task keeps no cards a session chose for it (Volcano's Release
            # deletes their annotations); only what its pod itself says stays.
            task.card_annotations = None
            task.cards = card_use(task.pod.metadata.annotations, task.devreq)
        task.node_name = node_name
        new_node = self.nodes.by_name.get(node_name) if node_name else None
        if new_node is not None and status not in _OFF_NODE:
            self.nodes.add_task(new_node, task)

    def release(self, task: TaskInfo) -> None:
        """An eviction: ``move(task, Releasing, task.node_name)``, then the task out of the
        scorers' view (``NodeTable.set_scored(task, False)``), in one pass over the node's rows
        when the task holds its node."""
        node = self.nodes.by_name.get(task.node_name) if task.node_name else None
        if node is not None and task.uid in node.tasks and task.status in _PLAIN and task.cards is None:
            self.nodes.release(node, task, unscore=True)
            job = self.jobs.get(task.job)
            if job is not None:
                job.update_status(task, _RELEASING)
            else:
                task.status = _RELEASING
            return
        self.move(task, _RELEASING, task.node_name)
        self.nodes.set_scored(task, False)

    def move_off(self, moves: list[tuple[TaskInfo, TaskStatus]]) -> None:
        """``move(task, status, "")`` for each in order (a session's close sending its
        uncommitted placements back to Pending), with the node rows changed in one batch.

        Taking a task off its node only subtracts from node rows and only reads the task's own
        fields, and no task comes twice, so removing them all first and then updating the jobs
        and tasks leaves what the loop leaves (``NodeTable.remove_tasks``: the same row sums)."""
        table = self.nodes
        by_name = table.by_name
        leaving: list[tuple[NodeInfo, TaskInfo]] = []
        # Per move, whether ``move`` takes its shortcut (no node then, and none after).
        stays = [not task.node_name and _same_accounting(task.status, status) for task, status in moves]
        for (task, _), stay in zip(moves, stays, strict=True):
            old_node = by_name.get(task.node_name) if task.node_name and not stay else None
            if old_node is not None and task.uid in old_node.tasks:
                leaving.append((old_node, task))
        table.remove_tasks(leaving)
        jobs = self.jobs
        for (task, status), stay in zip(moves, stays, strict=True):
            job = jobs.get(task.job)
            if job is not None:
                job.update_status(task, status)
            else:
                task.status = status
            if not stay and task.card_annotations is not None:
                task.card_annotations = None
                task.cards = card_use(task.pod.metadata.annotations, task.devreq)
            task.node_name = ""

    def total_resource(self) -> Resource:
        """Σ node allocatable, with every resource any node offers."""
        alloc = self.nodes.alloc
        row = alloc.sum(axis=0) if len(alloc) else np.zeros(len(self.space))
        present = np.asarray(self.nodes.present.any(axis=0)) if len(alloc) else None
        return self.space.resource(row, present)


_PLAIN = frozenset({TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})
_OFF_NODE = frozenset({TaskStatus.PENDING, TaskStatus.SUCCEEDED, TaskStatus.FAILED})
_RELEASING = TaskStatus.RELEASING


def _same_accounting(old: TaskStatus, new: TaskStatus) -> bool:
    """Statuses a node accounts the same way (used, neither pipelined nor releasing)."""
    return old in _PLAIN and new in _PLAIN


def _same_shape(a: Node, b: Node) -> bool:
    """Equal in everything the scheduler reads from a node."""
    return (
        a.status.allocatable == b.status.allocatable
        and a.metadata.labels == b.metadata.labels
        and a.spec.taints == b.spec.taints
        and a.spec.unschedulable == b.spec.unschedulable
    )


def _pod_key(pod: Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
