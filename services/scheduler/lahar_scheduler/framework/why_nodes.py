"""Why a task found no node: a pre-filter refused it before any node was tried, or every node
failed a predicate.  The reasons keep kube-scheduler's and Volcano's wording (the condition
counts them per node); this adds what would let the task run, per reason.  Pure.
"""

from __future__ import annotations

from lahar_scheduler.framework.fiterrors import FitErrors
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.why import Why

# kube's NodeAffinity PreFilter: every required term names nodes by metadata.name and no name
# is left (Volcano wraps it as "plugin NodeAffinity pre-predicates failed …").
NODE_AFFINITY_CONFLICT = "pod affinity terms conflict"

_REMEDIES = {
    NODE_AFFINITY_CONFLICT: "each required node affinity term names nodes by metadata.name and together they "
    "name none: fix spec.affinity.nodeAffinity",
    "node(s) didn't match Pod's node affinity/selector": "label nodes to match its nodeSelector or required "
    "node affinity, or relax them",
    "node(s) didn't match pod affinity rules": "start a pod its required pod affinity selects (in the topology "
    "domain it names), or relax the affinity",
    "node(s) didn't match pod anti-affinity rules": "move the pods its required anti-affinity selects, add nodes "
    "in other domains, or relax the anti-affinity",
    "node(s) didn't satisfy existing pods anti-affinity rules": "running pods' required anti-affinity selects "
    "this pod: add nodes in other domains, or change those pods or this pod's labels",
    "node(s) didn't match pod topology spread constraints": "add nodes in the less-used domains, raise maxSkew, "
    "or set whenUnsatisfiable: ScheduleAnyway",
    "node(s) didn't match pod topology spread constraints (missing required label)": "label nodes with the "
    "constraint's topologyKey",
    "node(s) were unschedulable": "uncordon nodes (kubectl uncordon) or add nodes",
}


def _host_ports(task: TaskInfo) -> list[str]:
    spec = task.pod.spec
    return sorted({f"{p.host_port}/{p.protocol or 'TCP'}" for c in spec.containers for p in c.ports if p.host_port})


def remedy_for(task: TaskInfo, reason: str) -> str:
    if reason.startswith("Insufficient "):
        name = reason.removeprefix("Insufficient ")
        return f"free {name} on a node or add nodes (the task asks {task.resreq})"
    if reason == "node(s) didn't have free ports for the requested pod ports":
        return f"free host port(s) {', '.join(_host_ports(task))} on a node, or drop hostPort"
    if reason.startswith("node(s) had untolerated taint"):
        return f"add a toleration for the taint ({reason.removeprefix('node(s) had untolerated taint ')}) or untaint"
    return _REMEDIES.get(reason, "")


def pre_predicate_why(action: str, task: TaskInfo, err: str) -> Why:
    """A pre-filter refused the task on every node at once."""
    reason = next((r for r in _REMEDIES if err.endswith(r)), "")
    remedy = _REMEDIES.get(reason, "fix the pod spec the pre-filter refuses")
    return Why(action, "predicates", f"task {task.name} refused before any node was tried: {err}", remedy)


def nodes_why(action: str, task: TaskInfo, errors: FitErrors, total: int) -> Why:
    """Every node failed a predicate: the counts per reason, and per reason what would help."""
    reasons = sorted(errors.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
    counts = ", ".join(f"{n} {r}" for r, n in reasons)
    remedies = [r for r in dict.fromkeys(remedy_for(task, reason) for reason, _ in reasons) if r]
    details = [f"{n} of {total} node(s): {r}" for r, n in reasons]
    return Why(
        action,
        "predicates",
        f"task {task.name} fits none of {total} node(s): {counts}",
        "; or ".join(remedies),
        details,
    )
