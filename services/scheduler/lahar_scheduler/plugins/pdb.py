"""pdb: PodDisruptionBudgets (policy/v1) bound which pods preempt, reclaim and shuffle may evict.

Each budget's ``status.disruptionsAllowed`` (what the disruption controller last wrote) is spent
across the candidates in the order they are shown: a candidate matching a budget takes one from
it, and is dropped once any budget it matches would go below zero.  A pod already listed in a
budget's ``status.disruptedPods`` is being evicted through the API and spends nothing.  As in
Volcano, a budget with a missing or empty selector matches no pod, and a pod without labels is
never offered as a victim (it cannot match a budget, and Volcano's filter skips it).
"""

from __future__ import annotations

from lahar.api.objects import PodDisruptionBudget
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import TaskInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.plugins.base import NoArgs, Plugin
from lahar_scheduler.plugins.k8s.selectors import label_selector_matches


def _selects(pdb: PodDisruptionBudget, labels: dict[str, str]) -> bool:
    sel = pdb.spec.selector
    # LabelSelectorAsSelector: nil → Nothing, empty → Everything; Volcano skips both.
    if sel is None or (not sel.match_labels and not sel.match_expressions):
        return False
    return label_selector_matches(sel, labels)


def within_budgets(pdbs: list[PodDisruptionBudget], tasks: list[TaskInfo]) -> list[TaskInfo]:
    """The tasks that may go, spending each budget's disruptionsAllowed in order."""
    allowed = [p.status.disruptions_allowed for p in pdbs]
    victims = []
    for task in tasks:
        meta = task.pod.metadata
        if not meta.labels:
            continue
        violated = False
        for i, pdb in enumerate(pdbs):
            if pdb.metadata.namespace != meta.namespace or not _selects(pdb, meta.labels):
                continue
            if meta.name in pdb.status.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                violated = True
        if not violated:
            victims.append(task)
    return victims


class PdbPlugin(Plugin):
    name = "pdb"
    Args = NoArgs

    def on_session_open(self, ssn: Session) -> None:
        self.pdbs = list(ssn.snapshot.pdbs.values())
        ssn.add(P.VICTIM_TASKS, self.victim_tasks)
        ssn.add(P.PREEMPTABLE, self.victims)
        ssn.add(P.RECLAIMABLE, self.victims)

    def victim_tasks(self, tasks: list[TaskInfo]) -> list[TaskInfo]:
        return within_budgets(self.pdbs, tasks)

    def victims(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> tuple[list[TaskInfo], Vote]:
        return within_budgets(self.pdbs, candidates), Vote.PERMIT
