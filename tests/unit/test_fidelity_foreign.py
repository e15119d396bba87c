"""A running pod of another scheduler that carries a PodGroup's group-name annotation is a task of
that job, as in Volcano: it counts toward minMember for validity, readiness and the phase (issue 11,
divergence 2)."""

from __future__ import annotations

from typing import Any

from builders import node, pod, podgroup, queue, schedule, snapshot


def _gang(foreign_group: str | None, foreign_node: str = "n1") -> list[Any]:
    return [
        queue("q"),
        node("n1", cpu="8", memory="16Gi"),
        podgroup("pg", queue="q", min_member=4, phase="Pending"),
        *(pod(f"pg-t{i}", group="pg", cpu="1", memory="1Gi") for i in range(3)),
        pod(
            "foreign",
            group=foreign_group,
            cpu="1",
            memory="1Gi",
            node_name=foreign_node,
            phase="Running",
            scheduler="default-scheduler",
        ),
    ]


def test_foreign_running_pod_completes_the_gang() -> None:
    out = schedule(_gang("pg"), cycles=2)
    # 3 pending + 1 running foreign = 4 = minMember: valid and ready, so all three bind.
    assert out.binds == {"default/pg-t0": "n1", "default/pg-t1": "n1", "default/pg-t2": "n1"}
    assert out.phases["default/pg"] == "Running"


def test_without_the_annotation_the_foreign_pod_is_only_node_load() -> None:
    out = schedule(_gang(None))
    assert out.binds == {}  # 3 tasks < minMember 4
    snap = snapshot(_gang(None))
    assert "default/foreign" in snap.others and "default/foreign" not in snap.tasks


def test_foreign_pod_is_a_task_of_the_job_and_still_holds_its_node() -> None:
    snap = snapshot(_gang("pg"))
    assert "default/foreign" in snap.tasks and "default/foreign" not in snap.others
    assert {t.key for t in snap.jobs["default/pg"].tasks.values()} >= {"default/foreign"}
    n1 = snap.nodes.by_name["n1"]
    assert snap.nodes.requested[n1.index, 0] == 1000  # the foreign pod's 1 cpu, in millicores


def test_a_pending_foreign_pod_is_ignored() -> None:
    objs = [o for o in _gang("pg") if getattr(o.metadata, "name", "") != "foreign"]
    objs.append(pod("foreign", group="pg", cpu="1", memory="1Gi", scheduler="default-scheduler"))
    snap = snapshot(objs)
    assert "default/foreign" not in snap.tasks and "default/foreign" not in snap.others
    assert schedule(objs).binds == {}
