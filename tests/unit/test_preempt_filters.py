"""Preempt's victim filters: what each lets a preemptor take, and the topology fast path's
recognition of the other-jobs filter (its keyed victim views are filled through it)."""

from __future__ import annotations

from builders import make_conf, node, open_session, pod, podgroup, priority_class, queue
from lahar_scheduler.actions.preempt import other_jobs_filter, same_job_filter
from lahar_scheduler.actions.preempt_topology_fast import _other_jobs_queue
from lahar_scheduler.framework.session import Session

CONF = make_conf("enqueue, allocate, preempt", [{"name": "priority"}, {"name": "gang"}, {"name": "predicates"}])


def _session() -> Session:
    objs = [
        queue("a"),
        queue("b"),
        priority_class("low", 10),
        node("n0", cpu="8"),
        podgroup("mine", queue="a", min_member=1, phase="Running", priority_class="low"),
        pod("mine-0", group="mine", cpu="1", node_name="n0", phase="Running", priority_class="low"),
        pod("mine-1", group="mine", cpu="1", priority_class="low"),
        podgroup("other", queue="a", min_member=1, phase="Running", priority_class="low"),
        pod("other-0", group="other", cpu="1", node_name="n0", phase="Running", priority_class="low"),
        podgroup("elsewhere", queue="b", min_member=1, phase="Running", priority_class="low"),
        pod("elsewhere-0", group="elsewhere", cpu="1", node_name="n0", phase="Running", priority_class="low"),
    ]
    return open_session(objs, CONF)


def test_each_filter_takes_what_its_path_may_evict() -> None:
    ssn = _session()
    tasks = {t.name: t for job in ssn.jobs.values() for t in job.tasks.values()}
    preemptor = tasks["mine-1"]
    running = [tasks[n] for n in ("mine-0", "other-0", "elsewhere-0")]
    assert [t.name for t in running if other_jobs_filter(ssn, preemptor, "a")(t)] == ["other-0"]
    assert [t.name for t in running if same_job_filter(preemptor)(t)] == ["mine-0"]
    assert not other_jobs_filter(ssn, preemptor, "a")(preemptor)  # Pending: never a victim


def test_the_fast_path_knows_the_other_jobs_filter_of_this_preemptor_only() -> None:
    ssn = _session()
    tasks = {t.name: t for job in ssn.jobs.values() for t in job.tasks.values()}
    preemptor, stranger = tasks["mine-1"], tasks["mine-0"]
    keep = other_jobs_filter(ssn, preemptor, "a")
    assert _other_jobs_queue(ssn, preemptor, keep) == "a"
    assert _other_jobs_queue(ssn, stranger, keep) is None
    assert _other_jobs_queue(ssn, preemptor, same_job_filter(preemptor)) is None
    assert _other_jobs_queue(ssn, preemptor, lambda t: True) is None
