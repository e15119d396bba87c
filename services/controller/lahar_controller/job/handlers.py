"""Informer events → the controller's job cache and queued requests (Volcano's job handlers).

Pods count only when a Job (batch.volcano.sh/v1alpha1) controls them and they carry the job-name,
job-version and task-spec annotations.  Pod updates become events (SKIPPED.md §2.3): PodFailed
(with the first container's exit code), TaskCompleted, PodRunning / PodPending on a phase change,
TaskFailed when the task's containers restarted ``maxRetry`` times, else OutOfSync.  Equal requests
queued twice collapse, as in a workqueue.  Commands are queued, then each is executed once: deleted
first, then turned into a request carrying its action.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lahar_controller.job.effects import Delete, Effect, event_about
from lahar_controller.job.names import JOB_API_VERSION as JOB_API
from lahar_controller.job.names import JOB_NAME, JOB_VERSION, PARTITION_ID, TASK_SPEC
from lahar_controller.job.view import (
    COMMAND_ISSUED,
    JOB_UNKNOWN,
    OUT_OF_SYNC_EVENT,
    POD_EVICTED,
    POD_FAILED,
    POD_PENDING,
    POD_RUNNING,
    TASK_COMPLETED,
    TASK_FAILED,
    JobView,
    Obj,
    Request,
    annotations_of,
    controller_ref,
    labels_of,
    meta,
    name_of,
    namespace_of,
    out_of_sync,
    phase_of,
    spec,
    task_of,
    tasks,
    uid_of,
)


@dataclass
class Entry:
    job: Obj | None = None  # None: pods seen before their job
    pods: dict[str, dict[str, Obj]] = field(default_factory=dict)


class JobCache:
    """Jobs and their pods by task, as the informers delivered them."""

    def __init__(self) -> None:
        self.jobs: dict[str, Entry] = {}

    def view(self, key: str) -> JobView | None:
        entry = self.jobs.get(key)
        if entry is None or entry.job is None:
            return None
        return JobView(entry.job, {t: dict(p) for t, p in entry.pods.items()})

    def put_job(self, job: Obj) -> None:
        self.jobs.setdefault(_key(job), Entry()).job = job

    def newer(self, job: Obj) -> bool:
        """Whether ``job`` is not older than the cached copy (resourceVersions compare as numbers)."""
        entry = self.jobs.get(_key(job))
        if entry is None or entry.job is None:
            return True
        try:
            return int(meta(job).get("resourceVersion") or 0) >= int(meta(entry.job).get("resourceVersion") or 0)
        except ValueError:
            return True

    def drop_job(self, job: Obj) -> None:
        self.jobs.pop(_key(job), None)

    def put_pod(self, key: str, pod: Obj) -> None:
        self.jobs.setdefault(key, Entry()).pods.setdefault(task_of(pod), {})[name_of(pod)] = pod

    def has_pod(self, key: str, pod: Obj) -> bool:
        entry = self.jobs.get(key)
        return entry is not None and name_of(pod) in entry.pods.get(task_of(pod), {})

    def drop_pod(self, key: str, pod: Obj) -> None:
        entry = self.jobs.get(key)
        if entry is not None:
            entry.pods.get(task_of(pod), {}).pop(name_of(pod), None)

    def _task(self, key: str, task: str) -> tuple[Obj, list[Obj]] | None:
        entry = self.jobs.get(key)
        if entry is None or entry.job is None or task not in entry.pods:
            return None
        spec_ = next((t for t in tasks(entry.job) if t.get("name") == task), {})
        return spec_, list(entry.pods[task].values())

    def task_completed(self, key: str, task: str) -> bool:
        found = self._task(key, task)
        if found is None:
            return False
        spec_, pods = found
        replicas = int(spec_.get("replicas") or 0)
        return replicas > 0 and sum(phase_of(p) == "Succeeded" for p in pods) >= replicas

    def task_failed(self, key: str, task: str) -> bool:
        """The live pods' containers restarted ``maxRetry`` times in all (-1: never; 0 means 3)."""
        found = self._task(key, task)
        if found is None:
            return False
        spec_, pods = found
        max_retry = int(spec_.get("maxRetry") or 0) or 3
        if not spec_.get("replicas") or spec_.get("maxRetry") == -1:
            return False
        restarts = sum(
            int(c.get("restartCount") or 0)
            for p in pods
            if phase_of(p) in ("Running", "Pending")
            for c in [*((p.get("status") or {}).get("initContainerStatuses") or []), *_containers(p)]
        )
        return restarts >= max_retry


def _containers(pod: Obj) -> list[Obj]:
    c: list[Obj] = (pod.get("status") or {}).get("containerStatuses") or []
    return c


def _key(obj: Obj) -> str:
    return f"{namespace_of(obj)}/{name_of(obj)}"


@dataclass(frozen=True, slots=True)
class PodIdent:
    job_uid: str
    job_name: str
    version: int
    task: str


def pod_ident(pod: Obj) -> PodIdent | None:
    """Who a pod belongs to, or None when it is not a job pod the controller follows."""
    ref = controller_ref(pod)
    if ref is None or ref.get("apiVersion") != JOB_API or ref.get("kind") != "Job":
        return None
    notes = annotations_of(pod)
    if JOB_NAME not in notes or JOB_VERSION not in notes or TASK_SPEC not in notes:
        return None
    try:
        version = int(notes[JOB_VERSION])
    except ValueError:
        return None
    return PodIdent(str(ref.get("uid") or ""), notes[JOB_NAME], version, notes[TASK_SPEC])


def exit_code(pod: Obj) -> int:
    statuses = _containers(pod)
    terminated = ((statuses[0].get("state") or {}).get("terminated") if statuses else None) or {}
    return int(terminated.get("exitCode") or 0)


def command_target(cmd: Obj) -> Obj:
    """The object a Command acts on: its ``target`` (Go's ``TargetObject``, an owner reference)."""
    target = cmd.get("target") or cmd.get("targetObject") or {}
    return target if isinstance(target, dict) else {}


def is_job_command(cmd: Obj) -> bool:
    """The Commands this controller executes (others are the queue controller's)."""
    target = command_target(cmd)
    return bool(target.get("apiVersion") == JOB_API and target.get("kind") == "Job")


def command_step(cmd: Obj, job: Obj | None) -> tuple[list[Effect], Request]:
    """Execute a Command once: delete it, note it on the job, queue a request with its action."""
    ns = namespace_of(cmd)
    target = str(command_target(cmd).get("name") or "")
    action = str(cmd.get("action") or "")
    effects: list[Effect] = [
        Delete(str(cmd.get("apiVersion") or "bus.volcano.sh/v1alpha1"), "Command", ns, name_of(cmd))
    ]
    if job is not None:
        message = f"Start to execute command {action}, and clean it up to make sure executed not more than once."
        effects.append(event_about(job, "Normal", "CommandIssued", message))
    return effects, Request(ns, target, event=COMMAND_ISSUED, action=action)


class Handlers:
    """The job controller's event handlers: they update ``cache`` and queue requests and commands."""

    def __init__(self, cache: JobCache | None = None) -> None:
        self.cache = cache if cache is not None else JobCache()
        self.requests: list[Request] = []
        self._queued: set[Request] = set()
        self.commands: list[Obj] = []

    def _queue(self, req: Request) -> None:
        if req not in self._queued:
            self._queued.add(req)
            self.requests.append(req)

    def take(self) -> list[Request]:
        """Hand the queued requests to workers (a request queued again later runs again)."""
        out, self.requests, self._queued = self.requests, [], set()
        return out

    def add_command(self, cmd: Obj) -> None:
        self.commands.append(cmd)

    def add_job(self, job: Obj) -> None:
        self.cache.put_job(job)
        self._queue(Request(namespace_of(job), name_of(job), event=OUT_OF_SYNC_EVENT))

    def update_job(self, old: Obj, new: Obj) -> None:
        if meta(new).get("resourceVersion") == meta(old).get("resourceVersion"):
            return
        if self.cache.newer(new):
            self.cache.put_job(new)
        same_phase = ((new.get("status") or {}).get("state") or {}).get("phase") == (
            (old.get("status") or {}).get("state") or {}
        ).get("phase")
        if spec(new) == spec(old) and same_phase:
            return  # status is ours: only spec and phase changes need a sync
        self._queue(Request(namespace_of(new), name_of(new), event=OUT_OF_SYNC_EVENT))

    def delete_job(self, job: Obj) -> None:
        self.cache.drop_job(job)

    def _request(self, pod: Obj, ident: PodIdent, event: str, code: int = 0) -> Request:
        return Request(
            namespace_of(pod),
            ident.job_name,
            job_uid=ident.job_uid,
            task_name=ident.task,
            pod_name=name_of(pod),
            pod_uid=uid_of(pod),
            partition_id=labels_of(pod).get(PARTITION_ID, ""),
            event=event,
            exit_code=code,
            job_version=ident.version,
        )

    def add_pod(self, pod: Obj) -> None:
        ident = pod_ident(pod)
        if ident is None:
            return
        event = OUT_OF_SYNC_EVENT if out_of_sync(pod) else POD_PENDING
        self.cache.put_pod(f"{namespace_of(pod)}/{ident.job_name}", pod)
        self._queue(self._request(pod, ident, event))

    def update_pod(self, old: Obj, new: Obj) -> None:
        ident = pod_ident(new)
        if ident is None or meta(new).get("resourceVersion") == meta(old).get("resourceVersion"):
            return
        key = f"{namespace_of(new)}/{ident.job_name}"
        self.cache.put_pod(key, new)
        event, code = self._update_event(key, ident.task, old, new)
        if out_of_sync(new):
            event = OUT_OF_SYNC_EVENT
        self._queue(self._request(new, ident, event, code))

    def _update_event(self, key: str, task: str, old: Obj, new: Obj) -> tuple[str, int]:
        was, now = phase_of(old), phase_of(new)
        if now == "Failed":
            return (POD_FAILED, exit_code(new)) if was != "Failed" else (OUT_OF_SYNC_EVENT, 0)
        if now == "Succeeded":
            done = was != "Succeeded" and self.cache.task_completed(key, task)
            return (TASK_COMPLETED if done else OUT_OF_SYNC_EVENT), 0
        if now in ("Running", "Pending"):
            if was != now:
                return (POD_RUNNING if now == "Running" else POD_PENDING), 0
            return (TASK_FAILED if self.cache.task_failed(key, task) else OUT_OF_SYNC_EVENT), 0
        return OUT_OF_SYNC_EVENT, 0

    def delete_pod(self, pod: Obj) -> None:
        ident = pod_ident(pod)
        if ident is None:
            return
        key = f"{namespace_of(pod)}/{ident.job_name}"
        event = POD_EVICTED
        if out_of_sync(pod) or not self.cache.has_pod(key, pod):
            event = OUT_OF_SYNC_EVENT
        self.cache.drop_pod(key, pod)
        self._queue(self._request(pod, ident, event))

    def update_podgroup(self, old: Obj, new: Obj) -> None:
        """A PodGroup phase change syncs its job (the owner Job's name, else the PodGroup's)."""
        new_phase = (new.get("status") or {}).get("phase")
        if new_phase == (old.get("status") or {}).get("phase"):
            return
        job_name = name_of(new)
        for ref in meta(new).get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                job_name = str(ref.get("name", ""))
        event = JOB_UNKNOWN if new_phase == "Unknown" else ""
        self._queue(Request(namespace_of(new), job_name, event=event))
