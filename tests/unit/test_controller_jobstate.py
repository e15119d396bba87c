"""The Volcano Job lifecycle (lahar_controller.job) beyond what Volcano's own tests cover
(SKIPPED.md §2.12): minSuccess, task-level minAvailable, scale down, out-of-sync pods recreated,
dependsOn holding pods back, delayed policy actions firing and being cancelled, Commands, restarts up
to maxRetry, stale pod versions, PVCs, forwarding — each driven through the pure functions, their
effects applied to an in-memory cluster."""

from __future__ import annotations

import ast
import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import lahar_controller.job
from lahar_controller.conformance.jobstate import context_of, view_of
from lahar_controller.conformance.jobstate_expect import Cluster
from lahar_controller.job.delays import DelayedActions
from lahar_controller.job.effects import Create, Delete, Event
from lahar_controller.job.handlers import Handlers, command_step, is_job_command
from lahar_controller.job.policy import Decision, apply_policies, parse_duration
from lahar_controller.job.state import execute
from lahar_controller.job.status import go_duration
from lahar_controller.job.view import Action, Request
from lahar_controller.job.worker import give_up, process, run

Obj = dict[str, Any]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
QUEUE: Obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "default"}}


def task(name: str, replicas: int, **extra: Any) -> Obj:
    template = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    return {"name": name, "replicas": replicas, "template": template, **extra}


def job(*tasks: Obj, phase: str = "", **spec: Any) -> Obj:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": "u1", "resourceVersion": "1"},
        "spec": {"queue": "default", "schedulerName": "volcano", "maxRetry": 3, "tasks": list(tasks), **spec},
        "status": {"state": {"phase": phase}} if phase else {},
    }


class Sim:
    """A cluster, the controller's handlers and delayed actions, and a clock."""

    def __init__(self, *objects: Obj) -> None:
        self.cluster = Cluster([QUEUE, *objects])
        self.delays = DelayedActions()
        self.now = T0
        self.events: list[Event] = []

    @property
    def job(self) -> Obj:
        found = self.cluster.get("Job", "ns", "j")
        assert found is not None
        return found

    def phase(self) -> str:
        return str(((self.job.get("status") or {}).get("state") or {}).get("phase") or "")

    def pods(self) -> dict[str, Obj]:
        return {p["metadata"]["name"]: p for p in self.cluster.of_kind("Pod", "ns")}

    def _apply(self, outcome: Any) -> Any:
        assert not outcome.error, outcome.error
        self.cluster.apply(outcome.effects)
        self.events += [e for e in outcome.effects if isinstance(e, Event)]
        return outcome

    def act(self, action: str = "SyncJob") -> Any:
        j = self.job
        return self._apply(execute(view_of(self.cluster, j), Action(action), context_of(self.cluster, j, self.now)))

    def request(self, req: Request) -> Any:
        j = self.job
        return self._apply(process(req, view_of(self.cluster, j), context_of(self.cluster, j, self.now), self.delays))

    def fire_due(self) -> int:
        fired = self.delays.due(self.now)
        for decision in fired:
            j = self.job
            self._apply(run(decision, view_of(self.cluster, j), context_of(self.cluster, j, self.now), self.delays))
        return len(fired)

    def podgroup(self, phase: str) -> None:
        """The scheduler's part: the job's PodGroup reaches ``phase``."""
        (pg,) = self.cluster.of_kind("PodGroup", "ns")
        pg["status"] = {"phase": phase}

    def set_pods(self, phase: str, *names: str, ready: bool = True, exit_code: int | None = None) -> None:
        for name in names or tuple(self.pods()):
            pod = self.pods()[name]
            pod["status"] = {"phase": phase, "containerStatuses": [{"name": "c", "ready": ready}]}
            if exit_code is not None:
                pod["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": exit_code}}

    def started(self) -> None:
        """First sync, the scheduler admits the group, second sync creates the pods."""
        self.act()
        self.podgroup("Inqueue")
        self.act()


def pod_request(sim: Sim, name: str, event: str, *, exit_code: int = 0) -> Request:
    pod = sim.pods()[name]
    version = int(pod["metadata"]["annotations"]["volcano.sh/job-version"])
    task_name = pod["metadata"]["annotations"]["volcano.sh/task-spec"]
    uid = pod["metadata"]["uid"]
    return Request("ns", "j", "u1", task_name, name, uid, "", event, exit_code, "", version)


def test_a_job_runs_to_completed() -> None:
    sim = Sim(job(task("w", 2), minAvailable=2))
    sim.act()
    assert sim.phase() == "Pending" and not sim.pods()  # the PodGroup is not admitted yet
    assert [pg["spec"]["minMember"] for pg in sim.cluster.of_kind("PodGroup", "ns")] == [2]
    sim.podgroup("Inqueue")
    sim.act()
    assert sorted(sim.pods()) == ["j-w-0", "j-w-1"]
    assert sim.job["status"]["pending"] == 2
    sim.set_pods("Running")
    sim.act()
    assert sim.phase() == "Running"
    sim.set_pods("Succeeded")
    sim.act()
    assert sim.phase() == "Completed"
    assert [c["status"] for c in sim.job["status"]["conditions"]] == ["Pending", "Running", "Completed"]
    assert [e.reason for e in sim.events if e.type == "Normal"] == ["Pending", "Running", "Completed"]


def test_a_completed_job_keeps_counting_its_finished_pods() -> None:
    sim = Sim(job(task("w", 2), minAvailable=2))
    sim.started()
    sim.set_pods("Running")
    sim.act()
    sim.set_pods("Succeeded")
    sim.act()
    assert sim.phase() == "Completed"
    sim.act()  # a finished job is synced again (kill Soft): the retained pods stay counted
    assert (sim.job["status"]["succeeded"], sim.job["status"]["terminating"]) == (2, 0)


def test_min_success_completes_before_every_pod_finished() -> None:
    sim = Sim(job(task("w", 4), minAvailable=1, minSuccess=2))
    sim.started()
    sim.set_pods("Running")
    sim.act()
    sim.set_pods("Succeeded", "j-w-0")
    sim.act()
    assert sim.phase() == "Running"
    sim.set_pods("Succeeded", "j-w-1")
    sim.act()
    assert sim.phase() == "Completed"


def test_min_success_not_reached_fails_when_all_finished() -> None:
    sim = Sim(job(task("w", 4), minAvailable=1, minSuccess=3))
    sim.started()
    sim.set_pods("Running")
    sim.act()
    sim.set_pods("Succeeded", "j-w-0", "j-w-1")
    sim.set_pods("Failed", "j-w-2", "j-w-3")
    sim.act()
    assert sim.phase() == "Failed"


@pytest.mark.parametrize(("worker_phase", "expected"), [("Failed", "Failed"), ("Succeeded", "Completed")])
def test_task_min_available_decides_when_all_finished(worker_phase: str, expected: str) -> None:
    sim = Sim(job(task("m", 1, minAvailable=1), task("w", 1, minAvailable=1), minAvailable=1))
    sim.started()
    sim.set_pods("Running")
    sim.act()
    sim.set_pods("Succeeded", "j-m-0")
    sim.set_pods(worker_phase, "j-w-0")
    sim.act()
    # job minAvailable 1 < Σ task minimums 2: the task rule does not apply, one success is enough
    assert sim.phase() == "Completed"

    sim = Sim(job(task("m", 1, minAvailable=1), task("w", 1, minAvailable=1), minAvailable=2))
    sim.started()
    sim.set_pods("Running")
    sim.act()
    sim.set_pods("Succeeded", "j-m-0")
    sim.set_pods(worker_phase, "j-w-0")
    sim.act()
    assert sim.phase() == expected


def test_scale_down_deletes_pods_beyond_replicas() -> None:
    sim = Sim(job(task("w", 3), minAvailable=1))
    sim.started()
    sim.set_pods("Running")
    sim.act()
    sim.job["spec"]["tasks"][0]["replicas"] = 1
    outcome = sim.act()
    deleted = sorted(e.name for e in outcome.effects if isinstance(e, Delete) and e.kind == "Pod")
    assert deleted == ["j-w-1", "j-w-2"]
    assert sorted(sim.pods()) == ["j-w-0"]
    status = sim.job["status"]
    assert (status["running"], status["terminating"]) == (1, 2)
    # the PodGroup follows the new size
    (pg,) = sim.cluster.of_kind("PodGroup", "ns")
    assert pg["spec"]["minTaskMember"] == {"w": 1}


def test_scale_up_creates_the_new_replicas() -> None:
    sim = Sim(job(task("w", 1), minAvailable=1))
    sim.started()
    sim.job["spec"]["tasks"][0]["replicas"] = 3
    sim.act()
    assert sorted(sim.pods()) == ["j-w-0", "j-w-1", "j-w-2"]


def test_out_of_sync_pod_is_deleted_then_created_again() -> None:
    sim = Sim(job(task("w", 2), minAvailable=2))
    sim.started()
    sim.pods()["j-w-1"]["metadata"]["annotations"]["volcano.sh/controller-out-of-sync"] = "true"
    sim.act()
    assert sorted(sim.pods()) == ["j-w-0"]
    outcome = sim.act()
    assert [e.obj["metadata"]["name"] for e in outcome.effects if isinstance(e, Create)] == ["j-w-1"]
    assert "volcano.sh/controller-out-of-sync" not in sim.pods()["j-w-1"]["metadata"]["annotations"]


def test_depends_on_holds_the_dependent_task_back() -> None:
    sim = Sim(job(task("a", 1, minAvailable=1), task("b", 2, dependsOn={"name": ["a"]}), minAvailable=1))
    sim.started()
    assert sorted(sim.pods()) == ["j-a-0"]
    sim.set_pods("Running", "j-a-0", ready=False)
    sim.act()
    assert sorted(sim.pods()) == ["j-a-0"]  # running but not ready
    sim.set_pods("Running", "j-a-0", ready=True)
    sim.act()
    assert sorted(sim.pods()) == ["j-a-0", "j-b-0", "j-b-1"]


def test_depends_on_any_needs_one_ready_task() -> None:
    sim = Sim(
        job(
            task("a", 1, minAvailable=1),
            task("b", 1, minAvailable=1),
            task("c", 1, dependsOn={"name": ["a", "b"], "iteration": "any"}),
            minAvailable=1,
        )
    )
    sim.started()
    assert "j-c-0" not in sim.pods()
    sim.set_pods("Succeeded", "j-b-0")
    sim.act()
    assert "j-c-0" in sim.pods()


def pending_policy_job() -> Obj:
    return job(
        task("w", 2), minAvailable=1, policies=[{"event": "PodPending", "action": "RestartPod", "timeout": "10s"}]
    )


def test_delayed_action_fires_after_its_timeout() -> None:
    sim = Sim(pending_policy_job())
    sim.started()
    outcome = sim.request(pod_request(sim, "j-w-1", "PodPending"))
    assert [e.message for e in outcome.effects] == ["Execute action RestartPod after 10s"]
    assert sim.pods()["j-w-1"] and sim.phase() == "Pending"
    sim.now = T0 + timedelta(seconds=9)
    assert sim.fire_due() == 0
    sim.now = T0 + timedelta(seconds=10)
    assert sim.fire_due() == 1
    assert sorted(sim.pods()) == ["j-w-0"]  # only the pending pod was restarted
    assert sim.phase() == "Restarting"
    assert sim.job["status"]["retryCount"] == 1
    assert sim.delays.next_due() is None


def test_the_same_delayed_action_is_not_restarted_by_a_repeated_event() -> None:
    sim = Sim(pending_policy_job())
    sim.started()
    sim.request(pod_request(sim, "j-w-1", "PodPending"))
    sim.now = T0 + timedelta(seconds=6)
    again = sim.request(pod_request(sim, "j-w-1", "PodPending"))
    assert again.effects == []
    assert sim.delays.next_due() == T0 + timedelta(seconds=10)


def test_delayed_pending_action_is_cancelled_when_the_pod_runs() -> None:
    sim = Sim(pending_policy_job())
    sim.started()
    sim.request(pod_request(sim, "j-w-1", "PodPending"))
    sim.set_pods("Running", "j-w-1")
    sim.request(pod_request(sim, "j-w-1", "PodRunning"))
    sim.now = T0 + timedelta(minutes=1)
    assert sim.fire_due() == 0
    assert sorted(sim.pods()) == ["j-w-0", "j-w-1"]


def test_a_recreated_pod_does_not_cancel_the_old_pods_pending_action() -> None:
    sim = Sim(pending_policy_job())
    sim.started()
    sim.request(pod_request(sim, "j-w-1", "PodPending"))
    newer = pod_request(sim, "j-w-1", "PodRunning")
    sim.request(Request(**{**_fields(newer), "pod_uid": "another-uid"}))
    assert len(sim.delays.waiting("ns/j")) == 1


def _fields(req: Request) -> dict[str, Any]:
    return {name: getattr(req, name) for name in Request.__slots__}


def test_delayed_failure_action_is_cancelled_when_the_pod_runs_again() -> None:
    sim = Sim(
        job(task("w", 1), minAvailable=1, policies=[{"event": "PodFailed", "action": "AbortJob", "timeout": "1m"}])
    )
    sim.started()
    sim.request(pod_request(sim, "j-w-0", "PodFailed"))
    assert len(sim.delays.waiting("ns/j")) == 1
    sim.request(pod_request(sim, "j-w-0", "PodRunning"))
    assert sim.delays.waiting("ns/j") == []


def test_an_executed_job_action_drops_waiting_job_level_actions_only() -> None:
    delays = DelayedActions()
    job_level = Decision(Request("ns", "j", pod_name="p1", event="PodFailed"), "AbortJob", 30)
    pod_level = Decision(Request("ns", "j", pod_name="p2", event="PodPending"), "RestartPod", 30)
    other_job = Decision(Request("ns", "k", pod_name="p1", event="PodFailed"), "AbortJob", 30)
    for d in (job_level, pod_level, other_job):
        assert delays.add(d, T0)
    dropped = delays.after_executed(Decision(Request("ns", "j", event="CommandIssued"), "RestartJob"))
    assert dropped == [job_level]
    assert delays.waiting("ns/j") == [pod_level]
    assert delays.waiting("ns/k") == [other_job]


def test_a_pod_failure_restarts_the_job_until_max_retry_then_fails() -> None:
    sim = Sim(job(task("w", 1), minAvailable=1, maxRetry=2, policies=[{"event": "PodFailed", "action": "RestartJob"}]))
    sim.started()
    for attempt in (1, 2):
        sim.set_pods("Running")
        sim.act()
        assert sim.phase() == "Running"
        sim.set_pods("Failed", "j-w-0", exit_code=3)
        sim.request(pod_request(sim, "j-w-0", "PodFailed", exit_code=3))
        assert sim.job["status"]["retryCount"] == attempt
        assert sim.phase() == "Restarting"
        if attempt == 1:
            assert sim.pods() == {}
            assert sim.cluster.of_kind("PodGroup", "ns") == []  # a whole-job restart re-admits the gang
        sim.act()
        if attempt == 2:
            break
        # restarting holds until the scheduler admits the new PodGroup; then the pods come back
        assert sim.phase() == "Restarting"
        sim.podgroup("Inqueue")
        sim.act()
        assert sim.phase() == "Pending"
        assert sim.pods()["j-w-0"]["metadata"]["annotations"]["volcano.sh/job-version"] == "1"
    assert sim.phase() == "Failed"
    assert sim.job["status"]["retryCount"] == 2


def test_last_retry_keeps_finished_pods() -> None:
    sim = Sim(job(task("w", 2), minAvailable=1, maxRetry=1))
    sim.started()
    sim.set_pods("Succeeded", "j-w-0")
    sim.set_pods("Running", "j-w-1")
    sim.act("RestartJob")
    assert sorted(sim.pods()) == ["j-w-0"]  # retryCount 0 >= maxRetry - 1: kill keeps finished pods


def test_events_of_pods_from_before_a_restart_trigger_no_policy() -> None:
    spec_job = job(task("w", 1), minAvailable=1, policies=[{"event": "PodFailed", "action": "AbortJob"}])
    spec_job["status"] = {"state": {"phase": "Running"}, "version": 2}
    old = Request("ns", "j", "u1", "w", "j-w-0", "p", "", "PodFailed", 1, "", 1)
    assert apply_policies(spec_job, old).action == "SyncJob"
    assert apply_policies(spec_job, Request(**{**_fields(old), "job_version": 2})).action == "AbortJob"


def test_exit_code_policy_on_the_task_wins_over_the_job() -> None:
    spec_job = job(
        task("w", 1, policies=[{"exitCode": 137, "action": "RestartTask"}]),
        policies=[{"event": "*", "action": "AbortJob"}],
    )
    req = Request("ns", "j", "u1", "w", "j-w-0", "p", "", "PodFailed", 137)
    decision = apply_policies(spec_job, req)
    assert decision.action == "RestartTask"
    target = decision.state_action().target
    assert target is not None and (target.type, target.task) == ("task", "w")
    assert apply_policies(spec_job, Request(**{**_fields(req), "exit_code": 1})).action == "AbortJob"


def test_restart_task_kills_only_that_task() -> None:
    sim = Sim(job(task("m", 1), task("w", 2), minAvailable=3))
    sim.started()
    sim.set_pods("Running")
    decision = Decision(Request("ns", "j", "u1", "w", "j-w-0", event="PodFailed"), "RestartTask")
    j = sim.job
    outcome = run(decision, view_of(sim.cluster, j), context_of(sim.cluster, j, sim.now), sim.delays)
    sim.cluster.apply(outcome.effects)
    assert sorted(sim.pods()) == ["j-m-0"]
    assert sim.phase() == "Restarting"
    assert len(sim.cluster.of_kind("PodGroup", "ns")) == 1  # a targeted kill keeps the gang admitted


def test_commands_are_deleted_then_become_requests() -> None:
    cmd = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": "j-abort", "namespace": "ns"},
        "action": "AbortJob",
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j"},
    }
    assert is_job_command(cmd)  # the JSON field is `target` (Go's TargetObject)
    assert not is_job_command({**cmd, "target": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}})
    sim = Sim(job(task("w", 2), minAvailable=2), cmd)
    sim.started()
    sim.set_pods("Running")
    sim.act()
    effects, req = command_step(cmd, sim.job)
    assert isinstance(effects[0], Delete) and effects[0].kind == "Command"
    assert (req.key, req.event, req.action) == ("ns/j", "CommandIssued", "AbortJob")
    sim.cluster.apply(effects)
    assert sim.cluster.of_kind("Command") == []
    sim.request(req)
    assert sim.phase() == "Aborting" and sim.pods() == {}
    sim.act()
    assert sim.phase() == "Aborted"
    # vcctl job resume
    _, resume = command_step({**cmd, "action": "ResumeJob"}, sim.job)
    sim.request(resume)
    assert sim.phase() == "Restarting" and sim.job["status"]["retryCount"] == 1
    sim.act()
    assert sim.phase() == "Pending"
    sim.started()
    assert sorted(sim.pods()) == ["j-w-0", "j-w-1"]


def test_handlers_turn_pod_updates_into_events() -> None:
    sim = Sim(job(task("w", 2, maxRetry=2), minAvailable=2))
    sim.started()
    handlers = Handlers()
    handlers.add_job(sim.job)
    pods = sim.pods()
    for pod in pods.values():
        handlers.add_pod(pod)
    assert [r.event for r in handlers.take()] == ["OutOfSync", "PodPending", "PodPending"]

    def update(name: str, status: Obj) -> Request:
        old = handlers.cache.view("ns/j")
        assert old is not None
        before = old.pods["w"][name]
        new = copy.deepcopy(before)
        new["metadata"]["resourceVersion"] = str(int(before["metadata"].get("resourceVersion") or 0) + 1)
        new["status"] = status
        handlers.update_pod(before, new)
        (req,) = handlers.take()
        return req

    assert update("j-w-0", {"phase": "Running"}).event == "PodRunning"
    restarted = {"phase": "Running", "containerStatuses": [{"restartCount": 2}]}
    assert update("j-w-0", restarted).event == "TaskFailed"  # the task's maxRetry (2) restarts
    assert update("j-w-0", {"phase": "Succeeded"}).event == "OutOfSync"  # j-w-1 still pending
    assert update("j-w-1", {"phase": "Succeeded"}).event == "TaskCompleted"
    failed = {"phase": "Failed", "containerStatuses": [{"state": {"terminated": {"exitCode": 7}}}]}
    req = update("j-w-1", failed)
    assert (req.event, req.exit_code) == ("PodFailed", 7)
    handlers.delete_pod(pods["j-w-0"])
    assert [r.event for r in handlers.take()] == ["PodEvicted"]
    handlers.delete_pod(pods["j-w-0"])
    assert [r.event for r in handlers.take()] == ["OutOfSync"]  # no longer known


def test_generated_claims_are_named_created_and_recorded() -> None:
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    sim = Sim(job(task("w", 1), minAvailable=1, volumes=[{"mountPath": "/data", "volumeClaim": claim}]))
    sim.act()
    (pvc,) = sim.cluster.of_kind("PersistentVolumeClaim", "ns")
    name = pvc["metadata"]["name"]
    assert name.startswith("j-pvc-") and len(name) == len("j-pvc-") + 12
    assert pvc["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert sim.job["spec"]["volumes"][0]["volumeClaimName"] == name
    assert sim.job["status"]["controlledResources"] == {f"volume-pvc-{name}": name}


def test_a_missing_named_claim_keeps_the_job_pending_with_a_warning() -> None:
    sim = Sim(job(task("w", 1), minAvailable=1, volumes=[{"mountPath": "/d", "volumeClaimName": "data"}]))
    j = sim.job
    outcome = execute(view_of(sim.cluster, j), Action("SyncJob"), context_of(sim.cluster, j, sim.now))
    assert outcome.error == "pvc data is not found, the job will be in the Pending state until the PVC is created"
    assert [(e.type, e.reason) for e in outcome.effects if isinstance(e, Event)] == [
        ("Warning", "PVCError"),
        ("Normal", "Pending"),
    ]
    sim.cluster.apply(outcome.effects)
    assert sim.phase() == "Pending"  # the first status is written even though the sync stopped


def test_a_missing_queue_is_an_error() -> None:
    sim = Sim(job(task("w", 1), queue="nope"))
    j = sim.job
    outcome = execute(view_of(sim.cluster, j), Action("SyncJob"), context_of(sim.cluster, j, sim.now))
    assert outcome.error == 'queue.scheduling.volcano.sh "nope" not found' and outcome.effects == []


def test_a_forwarding_queue_marks_the_job_and_its_pods() -> None:
    queue = {**QUEUE, "metadata": {"name": "fwd"}, "spec": {"extendClusters": [{"name": "c2"}]}}
    sim = Sim(queue, job(task("w", 1), minAvailable=1, queue="fwd"))
    sim.started()
    assert sim.job["metadata"]["annotations"]["volcano.sh/job-forwarding"] == "true"
    assert sim.pods()["j-w-0"]["metadata"]["labels"]["volcano.sh/job-forwarding"] == "true"


def test_an_unknown_plugin_fails_the_sync() -> None:
    sim = Sim(job(task("w", 1), minAvailable=1, plugins={"nope": []}))
    j = sim.job
    outcome = execute(view_of(sim.cluster, j), Action("SyncJob"), context_of(sim.cluster, j, sim.now))
    assert outcome.error == "failed to get plugin nope"


def test_status_is_not_rewritten_when_nothing_changed() -> None:
    sim = Sim(job(task("w", 1), minAvailable=1))
    sim.started()
    sim.set_pods("Running")
    sim.act()
    again = sim.act()
    assert [type(e).__name__ for e in again.effects] == []


def test_durations() -> None:
    assert parse_duration("10s") == 10 and parse_duration("1m30s") == 90 and parse_duration("500ms") == 0.5
    with pytest.raises(ValueError):
        parse_duration("10 parsecs")
    assert [go_duration(s) for s in (0, 10, 90, 3725, 0.5)] == ["0s", "10s", "1m30s", "1h2m5s", "500ms"]


def test_give_up_after_the_limit_unless_unlimited() -> None:
    assert not give_up(2, 3) and give_up(3, 3) and not give_up(1000, -1)


FORBIDDEN = {"asyncio", "socket", "nats", "redis", "kubernetes", "httpx", "time"}


def test_the_job_package_does_no_io_and_reads_no_clock() -> None:
    root = Path(lahar_controller.job.__file__).parent
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                assert not {m.split(".")[0] for m in mods} & FORBIDDEN, f"{path.name} imports {mods}"
            if isinstance(node, ast.Attribute) and node.attr in ("now", "utcnow", "today"):
                assert not (isinstance(node.value, ast.Name) and node.value.id in ("datetime", "date")), path.name


def test_restart_partition_kills_the_pods_of_that_partition() -> None:
    sim = Sim(job(task("w", 4, partitionPolicy={"totalPartitions": 2, "partitionSize": 2}), minAvailable=4))
    sim.started()
    assert {n: p["metadata"]["labels"]["volcano.sh/partition-id"] for n, p in sim.pods().items()} == {
        "j-w-0": "0",
        "j-w-1": "0",
        "j-w-2": "1",
        "j-w-3": "1",
    }
    req = Request("ns", "j", "u1", "w", "j-w-3", partition_id="1", event="PodFailed")
    j = sim.job
    outcome = run(
        Decision(req, "RestartPartition"), view_of(sim.cluster, j), context_of(sim.cluster, j, sim.now), sim.delays
    )
    sim.cluster.apply(outcome.effects)
    assert sorted(sim.pods()) == ["j-w-0", "j-w-1"]


def test_a_restart_without_target_kills_nothing_but_restarts() -> None:
    sim = Sim(job(task("w", 2), minAvailable=2))
    sim.started()
    sim.act("RestartTask")
    assert sorted(sim.pods()) == ["j-w-0", "j-w-1"]
    assert (sim.phase(), sim.job["status"]["retryCount"]) == ("Restarting", 1)
