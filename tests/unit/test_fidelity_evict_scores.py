"""A victim evicted in a Statement leaves the node view the kube scorers read, as Volcano's
predicates plugin removes it from its NodeInfo; Discard and the session's close put it back
(issue 11, divergence 3).  Volcano does not put a discarded victim back; Lahar does."""

from __future__ import annotations

from builders import make_conf, node, open_session, pod, podgroup, queue, scores, task
from lahar_scheduler.framework.session import Session

ARGS = {
    "leastrequested.weight": 1,
    "mostrequested.weight": 0,
    "balancedresource.weight": 0,
    "nodeaffinity.weight": 0,
    "podaffinity.weight": 0,
    "tainttoleration.weight": 0,
    "podtopologyspread.weight": 0,
}
CONF = make_conf("allocate", [{"name": "gang"}, {"name": "nodeorder", "arguments": ARGS}])


def _ssn() -> Session:
    ssn: Session = open_session(
        [
            queue("q"),
            node("n1", cpu="4", memory="8Gi"),
            podgroup("low", queue="q", min_member=1, phase="Running"),
            podgroup("pg", queue="q", min_member=1),
            pod("victim", group="low", cpu="2", memory="4Gi", node_name="n1", phase="Running"),
            pod("in", group="pg", cpu="1", memory="2Gi"),
        ],
        CONF,
    )
    return ssn


# With the victim: cpu (4 − 3)/4 = 25, memory (8 − 6)/8 = 25 → 25.
# Without it:      cpu (4 − 1)/4 = 75, memory (8 − 2)/8 = 75 → 75.
WITH, WITHOUT = {"n1": 25.0}, {"n1": 75.0}


def test_evicted_victim_is_not_scored_and_discard_restores_it() -> None:
    ssn = _ssn()
    assert scores(ssn, "default/in") == WITH
    stmt = ssn.statement()
    stmt.evict(task(ssn, "default/victim"), "preempt")
    assert scores(ssn, "default/in") == WITHOUT
    # The victim still holds its resources until it goes: only the scorers' view changed.
    assert ssn.nodes.releasing[ssn.nodes.by_name["n1"].index, 0] == 2000
    stmt.discard()
    assert scores(ssn, "default/in") == WITH


def test_committed_victim_is_scored_again_after_close() -> None:
    ssn = _ssn()
    stmt = ssn.statement()
    stmt.evict(task(ssn, "default/victim"), "preempt")
    stmt.commit()
    assert scores(ssn, "default/in") == WITHOUT
    ssn.close()
    # The next session sees the pod, still Releasing on n1, as kube's NodeInfo does.
    n1 = ssn.nodes.by_name["n1"].index
    assert ssn.nodes.requested[n1, 0] == 2000 and ssn.nodes.nonzero[n1, 0] == 2000
    assert not task(ssn, "default/victim").unscored
