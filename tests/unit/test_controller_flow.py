"""JobFlow and JobTemplate (flow.volcano.sh) as Volcano's jobflow and jobtemplate controllers run
them: the example's DAG (tests/admission/examples/example/jobflow, Volcano's example/jobflow)
starts each Job only once its dependencies completed, a failed dependency fails the flow, and
``jobRetainPolicy: delete`` removes the Jobs once the flow succeeded."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from lahar_controller import flow as fl
from lahar_controller.job.effects import Create, Delete, Event, UpdateStatus
from lahar_controller.kubetime import format_time, parse_time

Obj = dict[str, Any]
EXAMPLE = Path(__file__).parents[1] / "admission" / "examples" / "example" / "jobflow"
T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _example() -> tuple[Obj, list[Obj]]:
    flow = yaml.safe_load((EXAMPLE / "JobFlow.yaml").read_text())
    flow["metadata"]["uid"] = "flow-uid"
    templates = list(yaml.safe_load_all((EXAMPLE / "JobTemplate.yaml").read_text()))
    for t in templates:  # the example applies them in the default namespace
        t["metadata"].setdefault("namespace", "default")
    return flow, templates


@dataclass
class Cluster:
    """The objects the sync reads, changed as the shell would change them by the plan's effects."""

    flow: Obj
    templates: list[Obj]
    jobs: dict[str, Obj] = field(default_factory=dict)
    now: datetime = T0
    created: list[str] = field(default_factory=list)

    def sync(self) -> fl.FlowPlan:
        self.now += timedelta(seconds=10)
        plan = fl.sync_flow(self.flow, self.templates, list(self.jobs.values()), self.now)
        for effect in plan.effects:
            if isinstance(effect, Create):
                job = copy.deepcopy(effect.obj)
                job["metadata"]["creationTimestamp"] = self.now.strftime("%Y-%m-%dT%H:%M:%SZ")
                self.jobs[job["metadata"]["name"]] = job
                self.created.append(job["metadata"]["name"])
            elif isinstance(effect, UpdateStatus):
                self.flow = copy.deepcopy(effect.obj)
            elif isinstance(effect, Delete):
                del self.jobs[effect.name]
        return plan

    def set_phase(self, step: str, phase: str) -> None:
        self.jobs[f"test-{step}"]["status"] = {"state": {"phase": phase}}

    @property
    def phase(self) -> str:
        return fl.flow_phase(self.flow)


def _created(plan: fl.FlowPlan) -> list[str]:
    return [e.obj["metadata"]["name"] for e in plan.effects if isinstance(e, Create)]


def test_the_example_dag_runs_in_dependency_order() -> None:
    c = Cluster(*_example())
    assert _created(c.sync()) == ["test-a"]  # b..e wait for their targets
    assert c.phase == fl.PENDING
    c.set_phase("a", "Running")
    assert _created(c.sync()) == [] and c.phase == fl.RUNNING
    c.set_phase("a", "Completing")  # not yet Completed: b still waits
    assert _created(c.sync()) == []
    c.set_phase("a", "Completed")
    assert _created(c.sync()) == ["test-b"]
    c.set_phase("b", "Completed")
    assert _created(c.sync()) == ["test-c", "test-d"]  # both depend on b only
    c.set_phase("c", "Completed")
    c.set_phase("d", "Running")
    assert _created(c.sync()) == []  # e needs c and d
    assert c.flow["status"]["completedJobs"] == ["test-a", "test-b", "test-c"]
    assert c.flow["status"]["runningJobs"] == ["test-d"]
    c.set_phase("d", "Completed")
    assert _created(c.sync()) == ["test-e"]
    assert c.phase == fl.RUNNING
    c.set_phase("e", "Completed")
    plan = c.sync()
    assert (plan.previous, plan.phase, c.phase) == (fl.RUNNING, fl.SUCCEED, fl.SUCCEED)
    assert c.created == ["test-a", "test-b", "test-c", "test-d", "test-e"]


def test_a_generic_driver_never_starts_a_job_before_its_targets_completed() -> None:
    c = Cluster(*_example())
    deps = {s["name"]: fl._targets(s) for s in c.flow["spec"]["flows"]}
    completed_at: dict[str, int] = {}
    for round_ in range(10):
        before = len(c.created)
        c.sync()
        for name in c.created[before:]:
            step = name.removeprefix("test-")
            assert all(t in completed_at and completed_at[t] < round_ for t in deps[step]), (name, completed_at)
        for name, job in c.jobs.items():  # every Job runs to completion within one round
            if fl.job_phase(job) != "Completed":
                c.set_phase(name.removeprefix("test-"), "Completed")
                completed_at[name.removeprefix("test-")] = round_
    assert sorted(c.created) == [f"test-{s}" for s in "abcde"]
    assert c.phase == fl.SUCCEED


def test_the_job_is_the_template_with_volcanos_marks_and_owner() -> None:
    flow, templates = _example()
    plan = fl.sync_flow(flow, templates, [], T0)
    create, event = plan.effects[0], plan.effects[1]
    assert isinstance(create, Create) and isinstance(event, Event)
    job = create.obj
    assert (job["apiVersion"], job["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    marks = {"volcano.sh/createdByJobTemplate": "default.a", "volcano.sh/createdByJobFlow": "default.test"}
    assert job["metadata"]["labels"] == marks and job["metadata"]["annotations"] == marks
    assert job["metadata"]["namespace"] == "default"
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "flow.volcano.sh/v1alpha1",
            "kind": "JobFlow",
            "name": "test",
            "uid": "flow-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert job["spec"] == templates[0]["spec"] and job["spec"] is not templates[0]["spec"]
    assert (event.reason, event.message, event.about["kind"]) == ("Created", "create a job named test-a!", "JobFlow")
    assert fl.flow_key_of_job(job) == "default/test"
    assert fl.template_key_of_job(job) == "default/a"


def test_a_failed_dependency_fails_the_flow_and_its_dependants_never_start() -> None:
    c = Cluster(*_example())
    c.sync()
    c.set_phase("a", "Running")
    c.sync()
    c.set_phase("a", "Failed")
    plan = c.sync()
    assert _created(plan) == [] and (plan.previous, plan.phase) == (fl.RUNNING, fl.FAILED)
    assert c.flow["status"]["failedJobs"] == ["test-a"]
    c.set_phase("a", "Completed")  # a Failed flow is left alone, even if the Job recovers
    assert c.sync().effects == []
    assert sorted(c.jobs) == ["test-a"]


@pytest.mark.parametrize("phase", ["Terminated", "Aborted"])
def test_only_completed_releases_dependants(phase: str) -> None:
    c = Cluster(*_example())
    c.sync()
    c.set_phase("a", phase)
    assert _created(c.sync()) == []
    # Terminated fails a Pending flow; Aborted is "unknown" and the flow waits
    assert c.phase == (fl.FAILED if phase == "Terminated" else fl.PENDING)


def _run_to_success(c: Cluster) -> None:
    """Sync, then complete every Job, until the flow says Succeed."""
    for _ in range(20):
        c.sync()
        if c.phase == fl.SUCCEED:
            return
        for name in c.jobs:
            c.set_phase(name.removeprefix("test-"), "Completed")
    raise AssertionError(f"the flow never succeeded: {c.flow.get('status')}")


def test_retain_policy_delete_removes_the_jobs_once_succeeded() -> None:
    c = Cluster(*_example())
    assert c.flow["spec"]["jobRetainPolicy"] == "delete"
    _run_to_success(c)
    assert sorted(c.jobs) == [f"test-{s}" for s in "abcde"]  # the sync that saw success deletes nothing
    plan = c.sync()  # the sync after the flow was seen Succeed
    assert all(isinstance(e, Delete) for e in plan.effects)
    deleted = sorted((e.api_version, e.kind, e.namespace, e.name) for e in plan.effects if isinstance(e, Delete))
    assert deleted == [("batch.volcano.sh/v1alpha1", "Job", "default", f"test-{s}") for s in "abcde"]
    assert c.jobs == {} and c.phase == fl.SUCCEED
    assert c.sync().effects == []  # nothing left, and nothing re-created


def test_retain_policy_retain_keeps_the_jobs() -> None:
    flow, templates = _example()
    flow["spec"]["jobRetainPolicy"] = "retain"
    c = Cluster(flow, templates)
    _run_to_success(c)
    assert c.sync().effects == [] and len(c.jobs) == 5


def test_status_lists_conditions_and_histories() -> None:
    c = Cluster(*_example())
    c.sync()
    job = c.jobs["test-a"]
    counts = {"t": {"phase": {"Running": 1}}}
    job["status"] = {"state": {"phase": "Running"}, "retryCount": 2, "taskStatusCount": counts}
    c.sync()
    first = c.now
    job["status"]["state"]["phase"] = "Completed"
    job["status"]["runningDuration"] = "1m30s"
    c.sync()
    status = c.flow["status"]
    assert status["completedJobs"] == ["test-a"] and "runningJobs" not in status
    entry = status["jobStatusList"][0]
    created = job["metadata"]["creationTimestamp"]
    assert entry["name"] == "test-a" and entry["state"] == "Completed" and entry["restartCount"] == 2
    assert entry["startTimestamp"] == created
    assert entry["endTimestamp"] == format_time(parse_time(created) + timedelta(seconds=90))
    assert entry["runningHistories"] == [
        {"startTimestamp": format_time(first), "endTimestamp": format_time(c.now), "state": "Running"},
        {"startTimestamp": format_time(c.now), "state": "Completed"},
    ]
    assert status["conditions"]["test-a"] == {
        "phase": "Completed",
        "createTime": created,
        "runningDuration": "1m30s",
        "taskStatusCount": {"t": {"phase": {"Running": 1}}},
    }
    assert c.created == ["test-a", "test-b"]  # b started in the sync that saw a Completed
    before = copy.deepcopy(entry)
    c.sync()
    assert c.flow["status"]["jobStatusList"][0] == before  # a's phase did not change: no new history
    assert c.flow["status"]["unKnowJobs"] == ["test-b"]  # no phase yet


def test_a_sync_that_changes_nothing_writes_nothing() -> None:
    c = Cluster(*_example())
    c.sync()
    c.set_phase("a", "Running")
    c.sync()
    plan = c.sync()
    assert plan.effects == [] and (plan.previous, plan.phase) == (fl.RUNNING, fl.RUNNING)


def test_jobs_of_other_flows_and_namespaces_are_not_counted() -> None:
    flow, templates = _example()
    other = {
        "metadata": {
            "name": "test-a",
            "namespace": "elsewhere",
            "labels": {fl.CREATED_BY_FLOW: "elsewhere.test"},
        },
        "status": {"state": {"phase": "Completed"}},
    }
    sibling = {
        "metadata": {"name": "other-a", "namespace": "default", "labels": {fl.CREATED_BY_FLOW: "default.other"}},
        "status": {"state": {"phase": "Running"}},
    }
    plan = fl.sync_flow(flow, templates, [other, sibling], T0)
    assert _created(plan) == ["test-a"]  # the Completed test-a of another namespace releases nothing
    update = [e for e in plan.effects if isinstance(e, UpdateStatus)]
    assert update[0].obj["status"] == {"state": {"phase": "Pending"}}


def test_a_missing_template_stops_the_sync_with_an_error() -> None:
    flow, templates = _example()
    flow["spec"]["flows"].insert(0, {"name": "solo"})  # no dependencies, no template
    flow["spec"]["flows"].insert(0, {"name": "a0"})
    templates.append({"metadata": {"name": "a0", "namespace": "default"}, "spec": {"minAvailable": 1}})
    plan = fl.sync_flow(flow, templates, [], T0)
    assert _created(plan) == ["test-a0"]  # the creates before the missing template stay
    assert "solo" in plan.error
    assert not [e for e in plan.effects if isinstance(e, UpdateStatus)]


@pytest.mark.parametrize("phase", [fl.FAILED, fl.TERMINATING])
def test_failed_and_terminating_flows_are_left_alone(phase: str) -> None:
    flow, templates = _example()
    flow["status"] = {"state": {"phase": phase}}
    assert fl.sync_flow(flow, templates, [], T0) == fl.FlowPlan([], phase, phase)


def test_an_invalid_phase_is_an_error() -> None:
    flow, templates = _example()
    flow["status"] = {"state": {"phase": "Bogus"}}
    plan = fl.sync_flow(flow, templates, [], T0)
    assert plan.effects == [] and "state Bogus is invalid" in plan.error


@pytest.mark.parametrize(
    ("phase", "lists", "steps", "expected"),
    [
        ("", {}, 2, fl.PENDING),
        (fl.PENDING, {"runningJobs": ["x"]}, 2, fl.RUNNING),
        (fl.PENDING, {"completedJobs": ["x"], "terminatedJobs": ["y"]}, 2, fl.RUNNING),
        (fl.PENDING, {"runningJobs": ["x"], "failedJobs": ["y"]}, 2, fl.FAILED),
        (fl.PENDING, {"completedJobs": ["x", "y"]}, 2, fl.RUNNING),  # one step per sync
        (fl.RUNNING, {"completedJobs": ["x", "y"]}, 2, fl.SUCCEED),
        (fl.RUNNING, {"completedJobs": ["x"], "terminatedJobs": ["y"]}, 2, fl.FAILED),
        (fl.RUNNING, {"completedJobs": ["x"]}, 2, fl.RUNNING),
        (fl.SUCCEED, {"failedJobs": ["x"]}, 2, fl.SUCCEED),
    ],
)
def test_next_phase_follows_volcanos_state_rules(phase: str, lists: Obj, steps: int, expected: str) -> None:
    assert fl.next_phase(phase, lists, steps) == expected


def test_template_status_lists_the_jobs_made_from_it() -> None:
    flow, templates = _example()
    c = Cluster(flow, templates)
    c.sync()
    template_a = templates[0]
    plan = fl.sync_template(template_a, list(c.jobs.values()))
    (update,) = plan.effects
    assert isinstance(update, UpdateStatus)
    assert update.obj["status"] == {"jobDependsOnList": ["test-a"]}
    assert (update.obj["apiVersion"], update.obj["kind"]) == ("flow.volcano.sh/v1alpha1", "JobTemplate")
    assert fl.sync_template(update.obj, list(c.jobs.values())).effects == []  # already says so
    assert fl.sync_template(templates[1], list(c.jobs.values())).effects == []  # no Job made from b
