"""The predicates plugin's simulate hooks: InterPodAffinity over a dry-run view of the pods.

As in Volcano, the topology-aware preemption dry run checks only inter-pod (anti-)affinity
through the predicates plugin (resources and pod counts are its own fit check).  The view is the
cluster's placed pods minus the victims the dry run removed plus those it reprieved; removals and
reprieves reach it only through SimulateRemoveTask/SimulateAddTask, which Volcano calls only for
a plugin that enables preemptable or allocatable.  With both off, a victim whose labels or
anti-affinity block the preemptor keeps blocking it however many pods are removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.cyclestate import CycleState
from lahar_scheduler.framework.simhooks import VIEW, SimPredicate, TaskMove
from lahar_scheduler.plugins.k8s.selectors import label_selector_matches

if TYPE_CHECKING:
    from lahar.api.objects import Pod, PodAffinityTerm
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import NodeInfo
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.plugins.predicates import PredicatesPlugin

STATE_KEY = "predicates"


class AffinityView:
    """One preemptor's pods view: removed task ids and reprieved (task, node index) pairs."""

    __slots__ = ("added", "plugin", "relevant", "removed", "task")

    def __init__(self, plugin: PredicatesPlugin, task: TaskInfo) -> None:
        self.plugin = plugin
        self.task = task
        self.removed: set[int] = set()
        self.added: dict[int, tuple[TaskInfo, int]] = {}
        # kube's PreFilter Skip: the pod has no affinity terms and no placed pod's anti-affinity
        # names it, so the filter never runs.  Decided lazily, on the unchanged cluster.
        self.relevant: bool | None = None

    def clone(self) -> AffinityView:
        out = AffinityView(self.plugin, self.task)
        out.removed = set(self.removed)
        out.added = dict(self.added)
        out.relevant = self.relevant
        return out

    def remove(self, task: TaskInfo) -> None:
        if self.added.pop(id(task), None) is None:
            self.removed.add(id(task))

    def add(self, task: TaskInfo, node: int) -> None:
        if id(task) in self.removed:
            self.removed.discard(id(task))
        else:
            self.added[id(task)] = (task, node)

    def placed(self) -> Iterator[tuple[TaskInfo, int]]:
        for t, n in self.plugin.topo.placed():
            if id(t) not in self.removed:
                yield t, n
        yield from self.added.values()


def register_simulation(ssn: Session, plugin: PredicatesPlugin) -> None:
    def cycle_state(task: TaskInfo, state: CycleState) -> None:
        state.write(STATE_KEY, AffinityView(plugin, task))

    def remove_task(state: CycleState, _: TaskInfo, task: TaskInfo, node: NodeInfo) -> str | None:
        view = _view(state)
        if view is not None and plugin.opts.pod_affinity:
            view.remove(task)
        return None

    def add_task(state: CycleState, _: TaskInfo, task: TaskInfo, node: NodeInfo) -> str | None:
        view = _view(state)
        if view is not None and plugin.opts.pod_affinity:
            view.add(task, node.index)
        return None

    def predicate(state: CycleState, task: TaskInfo, node: NodeInfo) -> str | None:
        if not plugin.opts.pod_affinity:
            return None
        view = _view(state)
        if view is None:
            return "InterPodAffinity: no pre-filter state for the pod"
        if view.relevant is None:
            view.relevant = _relevant(plugin, task)
        if not view.relevant:
            return None
        return affinity_failure(plugin, view, task.pod, node.index)

    def skips(state: CycleState, task: TaskInfo) -> bool:
        """The predicate passes everywhere: affinity off, or the pod is not one the filter runs
        for (decided on the unchanged cluster, as ``predicate`` decides it on its first call)."""
        if not plugin.opts.pod_affinity:
            return True
        view = _view(state)
        if view is None:
            return False
        relevant = view.relevant if view.relevant is not None else _relevant(plugin, task)
        return not relevant

    ssn.add(P.CYCLE_STATE, cycle_state)
    ssn.add(P.SIMULATE_REMOVE_TASK, TaskMove(VIEW, remove_task))
    ssn.add(P.SIMULATE_ADD_TASK, TaskMove(VIEW, add_task))
    ssn.add(P.SIMULATE_PREDICATE, SimPredicate(predicate, skips))


def _view(state: CycleState) -> AffinityView | None:
    got = state.read(STATE_KEY)
    return got if isinstance(got, AffinityView) else None


def _relevant(plugin: PredicatesPlugin, task: TaskInfo) -> bool:
    pod = task.pod
    if _terms(pod, anti=False) or _terms(pod, anti=True):
        return True
    return bool(plugin.anti) and plugin._existing_anti_applies(task)


def affinity_failure(plugin: PredicatesPlugin, view: AffinityView, pod: Pod, node: int) -> str | None:
    """kube's InterPodAffinity Filter on ``node`` against the view; the reason, or None."""
    affinity, anti = _terms(pod, anti=False), _terms(pod, anti=True)
    if affinity and not _affinity_satisfied(plugin, view, pod, affinity, node):
        return "node(s) didn't match pod affinity rules"
    if any(_matches_in_domain(plugin, view, pod, term, node) for term in anti):
        return "node(s) didn't match pod anti-affinity rules"
    if _existing_anti_violated(plugin, view, pod, node):
        return "node(s) didn't satisfy existing pods anti-affinity rules"
    return None


def _terms(pod: Pod, anti: bool) -> list[PodAffinityTerm]:
    aff = pod.spec.affinity
    if aff is None:
        return []
    group = aff.pod_anti_affinity if anti else aff.pod_affinity
    return list(group.required_during_scheduling_ignored_during_execution) if group is not None else []


def _term_matches(plugin: PredicatesPlugin, owner: Pod, term: PodAffinityTerm, target: Pod) -> bool:
    names = plugin.topo.namespaces_of(owner, term)
    meta = target.metadata
    return (names is None or meta.namespace in names) and label_selector_matches(term.label_selector, meta.labels)


def _same_domain(plugin: PredicatesPlugin, key: str, a: int, b: int) -> bool:
    code = plugin.topo.domains(key).code
    return bool(code[a] >= 0 and code[a] == code[b])


def _matches_in_domain(
    plugin: PredicatesPlugin, view: AffinityView, pod: Pod, term: PodAffinityTerm, node: int
) -> bool:
    return any(
        _same_domain(plugin, term.topology_key, node, n) and _term_matches(plugin, pod, term, t.pod)
        for t, n in view.placed()
    )


def _affinity_satisfied(
    plugin: PredicatesPlugin, view: AffinityView, pod: Pod, terms: list[PodAffinityTerm], node: int
) -> bool:
    """Every term's key on the node, and a pod matching all terms in each term's domain; or, when
    no pod anywhere matches all terms, the pod matching its own terms (the first of a group)."""
    if any(plugin.topo.domains(t.topology_key).code[node] < 0 for t in terms):
        return False
    matching = [(t, n) for t, n in view.placed() if all(_term_matches(plugin, pod, term, t.pod) for term in terms)]
    if all(any(_same_domain(plugin, term.topology_key, node, n) for _, n in matching) for term in terms):
        return True
    return not matching and all(_term_matches(plugin, pod, term, pod) for term in terms)


def _existing_anti_violated(plugin: PredicatesPlugin, view: AffinityView, pod: Pod, node: int) -> bool:
    for t, n in view.placed():
        for term in _terms(t.pod, anti=True):
            if _term_matches(plugin, t.pod, term, pod) and _same_domain(plugin, term.topology_key, node, n):
                return True
    return False
