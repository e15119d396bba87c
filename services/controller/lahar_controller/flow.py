"""JobFlow and JobTemplate (``flow.volcano.sh/v1alpha1``), as Volcano's jobflow and jobtemplate
controllers run them (pure: objects and ``now`` in, effects out).

A JobFlow lists steps (``spec.flows``), each naming a JobTemplate of the flow's namespace and the
steps it ``dependsOn``.  One :func:`sync_flow` of a flow, given the JobTemplates and the Volcano
Jobs of its namespace, returns a :class:`FlowPlan`:

- in ``Failed`` or ``Terminating``: nothing (Volcano leaves such a flow alone);
- in ``Succeed`` with ``jobRetainPolicy: delete``: a ``Delete`` of every Job the flow created,
  and nothing else (the status keeps what it said);
- otherwise: a ``Create`` (and a ``Created`` Event on the flow) of the Job of every step that has
  none yet and whose every ``dependsOn`` target's Job exists and is ``Completed`` (only that
  phase: Completing, Aborted and the rest wait; a Failed or Terminated target fails the flow, so
  its dependants never start); then the flow's recomputed ``status`` as an ``UpdateStatus`` (left
  out when nothing in it changed).

A step's Job is ``<flow>-<step>``: the template's ``spec`` unchanged, labels and annotations
``volcano.sh/createdByJobTemplate: <ns>.<template>`` and ``volcano.sh/createdByJobFlow:
<ns>.<flow>``, and the flow as controlling owner.  The flow's phase moves one step per sync, as
Volcano's state machine does: Pending → Running once a Job runs or completed (and none failed),
Running → Succeed once every step's Job is Completed; either → Failed once a Job is Failed or
Terminated.  A step whose JobTemplate is missing stops the sync there: the plan keeps the creates
before it and carries ``error`` (retry), and writes no status, as in Volcano.

:func:`sync_template` is the jobtemplate controller: ``status.jobDependsOnList`` lists the Jobs
made from the template.

Wiring (the shell): perform ``plan.effects`` in order (a ``Create`` of a Job that exists counts as
done); on ``plan.error`` retry with backoff.  Sync a flow when it is added or updated (its own
status writes included: a sync that changes nothing writes nothing, and the Succeed → delete step
needs that second sync), and when a Job it controls changes (:func:`flow_key_of_job`).  Sync a
template when it is added and when a Job made from it is added (:func:`template_key_of_job`).
``plan.phase`` against ``plan.previous`` says when a flow reached Succeed or Failed (Volcano counts
both in metrics).  The calls a plan asks for: create and delete ``jobs``, update
``jobflows/status`` and ``jobtemplates/status``, create ``events``; the objects it reads:
``jobflows``, ``jobtemplates`` and ``jobs``, from the mirror like every other kind.

A sketch of the worker, keyed by ``<ns>/<flow>``::

    flow = world.get("jobflows", key)
    if flow is not None:
        ns = key.partition("/")[0]
        plan = sync_flow(flow, world.in_namespace("jobtemplates", ns), world.in_namespace("jobs", ns), clock())
        done = await writer.run(plan.effects)
        if done.error or plan.error:
            raise Retry(done.error or plan.error)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lahar_controller.job.effects import Create, Delete, Effect, Event, UpdateStatus
from lahar_controller.kubetime import format_time, parse_go_duration, parse_time

Obj = dict[str, Any]

API_VERSION = "flow.volcano.sh/v1alpha1"
JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
CREATED_BY_TEMPLATE = "volcano.sh/createdByJobTemplate"
CREATED_BY_FLOW = "volcano.sh/createdByJobFlow"
RETAIN, DELETE = "retain", "delete"
PENDING, RUNNING, SUCCEED, TERMINATING, FAILED = "Pending", "Running", "Succeed", "Terminating", "Failed"
# The Job phase a dependsOn target must reach before its dependants start.
DEPENDENCY_DONE = "Completed"

# Job phases with a list of their own in the flow's status.  Completing and Terminating Jobs are
# in no list (Volcano counts them, then writes no field for them); any other phase (none yet,
# Restarting, Aborting, Aborted) is "unknown".
_LISTS = {
    "Pending": "pendingJobs",
    "Running": "runningJobs",
    "Failed": "failedJobs",
    "Completed": "completedJobs",
    "Terminated": "terminatedJobs",
}
_COUNTED_UNLISTED = frozenset({"Completing", "Terminating"})


@dataclass(frozen=True, slots=True)
class FlowPlan:
    """What one sync of a flow (or template) asks for, in order."""

    effects: list[Effect] = field(default_factory=list)
    previous: str = ""  # the flow's phase before the sync
    phase: str = ""  # the flow's phase after it
    error: str = ""  # perform the effects, then retry the sync later


# -- reading objects ---------------------------------------------------------------------------------


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("namespace") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("name") or "")


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def flow_phase(flow: Mapping[str, Any]) -> str:
    return str((_status(flow).get("state") or {}).get("phase") or "")


def job_phase(job: Mapping[str, Any]) -> str:
    return str((_status(job).get("state") or {}).get("phase") or "")


def job_name(flow_name: str, step: str) -> str:
    return f"{flow_name}-{step}"


def made_by(namespace: str, name: str) -> str:
    """The value of the createdBy labels: ``<namespace>.<name>``."""
    return f"{namespace}.{name}"


def _steps(flow: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((flow.get("spec") or {}).get("flows") or [])


def _targets(step: Mapping[str, Any]) -> list[str]:
    return [str(t) for t in (step.get("dependsOn") or {}).get("targets") or []]


def jobs_of_flow(flow: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The Jobs the flow created (by label, in its namespace), oldest first."""
    mine = _made_by(jobs, CREATED_BY_FLOW, flow)
    return sorted(mine, key=lambda j: (str(_meta(j).get("creationTimestamp") or ""), _name(j)))


def _made_by(jobs: Iterable[Mapping[str, Any]], label: str, maker: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The Jobs of ``maker``'s namespace whose ``label`` names it (Volcano's label selector)."""
    ns, mark = _namespace(maker), made_by(_namespace(maker), _name(maker))
    return [j for j in jobs if _namespace(j) == ns and (_meta(j).get("labels") or {}).get(label) == mark]


# -- informer events to keys ---------------------------------------------------------------------------


def flow_key_of_job(job: Mapping[str, Any]) -> str | None:
    """``<ns>/<flow>`` of the JobFlow controlling this Job, or None (Volcano's updateJob filter)."""
    for ref in _meta(job).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("apiVersion") == API_VERSION and ref.get("kind") == "JobFlow":
            return f"{_namespace(job)}/{ref.get('name') or ''}"
    return None


def template_key_of_job(job: Mapping[str, Any]) -> str | None:
    """``<ns>/<template>`` of the JobTemplate the Job was made from, or None."""
    value = str((_meta(job).get("labels") or {}).get(CREATED_BY_TEMPLATE) or "")
    parts = value.split(".")
    return f"{parts[0]}/{parts[1]}" if len(parts) == 2 else None


# -- the flow -------------------------------------------------------------------------------------------


def sync_flow(
    flow: Mapping[str, Any],
    templates: Iterable[Mapping[str, Any]],
    jobs: Iterable[Mapping[str, Any]],
    now: datetime,
) -> FlowPlan:
    """One sync of ``flow`` given the JobTemplates and Volcano Jobs that exist (any namespace: the
    flow's own are picked out).  See the module's docstring."""
    phase = flow_phase(flow)
    if phase in (FAILED, TERMINATING):
        return FlowPlan([], phase, phase)
    if phase not in ("", PENDING, RUNNING, SUCCEED):
        return FlowPlan([], phase, phase, f"jobflow {_name(flow)} state {phase} is invalid")
    jobs = [j for j in jobs if _namespace(j) == _namespace(flow)]
    owned = jobs_of_flow(flow, jobs)
    if phase == SUCCEED and (flow.get("spec") or {}).get("jobRetainPolicy") == DELETE:
        return FlowPlan([Delete(JOB_API_VERSION, "Job", _namespace(j), _name(j)) for j in owned], phase, phase)
    effects, error = _deploy(flow, templates, {_name(j): j for j in jobs})
    if error:
        return FlowPlan(effects, phase, phase, error)
    status = flow_status(flow, owned, now)
    status["state"] = {**(_status(flow).get("state") or {}), "phase": next_phase(phase, status, len(_steps(flow)))}
    if status != dict(_status(flow)):
        effects.append(UpdateStatus(_with_status(flow, "JobFlow", status)))
    return FlowPlan(effects, phase, status["state"]["phase"])


def _deploy(
    flow: Mapping[str, Any], templates: Iterable[Mapping[str, Any]], jobs: Mapping[str, Mapping[str, Any]]
) -> tuple[list[Effect], str]:
    """Create the Job of every step whose dependencies are done, in the order of ``spec.flows``."""
    by_name = {_name(t): t for t in templates if _namespace(t) == _namespace(flow)}
    effects: list[Effect] = []
    for step in _steps(flow):
        name = job_name(_name(flow), str(step.get("name") or ""))
        if name in jobs or not ready(flow, step, jobs):
            continue
        template = by_name.get(str(step.get("name") or ""))
        if template is None:
            return effects, f'jobtemplate.flow.volcano.sh "{step.get("name")}" not found'
        effects.append(Create(job_from_template(flow, template)))
        effects.append(_event(flow, "Normal", "Created", f"create a job named {name}!"))
    return effects, ""


def ready(flow: Mapping[str, Any], step: Mapping[str, Any], jobs: Mapping[str, Mapping[str, Any]]) -> bool:
    """Every target's Job exists and is Completed."""
    for target in _targets(step):
        job = jobs.get(job_name(_name(flow), target))
        if job is None or job_phase(job) != DEPENDENCY_DONE:
            return False
    return True


def job_from_template(flow: Mapping[str, Any], template: Mapping[str, Any]) -> Obj:
    """The Volcano Job of the step named as ``template``."""
    ns = _namespace(flow)
    marks = {CREATED_BY_TEMPLATE: made_by(ns, _name(template)), CREATED_BY_FLOW: made_by(ns, _name(flow))}
    return {
        "apiVersion": JOB_API_VERSION,
        "kind": "Job",
        "metadata": {
            "name": job_name(_name(flow), _name(template)),
            "namespace": ns,
            "labels": dict(marks),
            "annotations": dict(marks),
            "ownerReferences": [controller_ref(flow)],
        },
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def controller_ref(flow: Mapping[str, Any]) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "JobFlow",
        "name": _name(flow),
        "uid": str(_meta(flow).get("uid") or ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _event(flow: Mapping[str, Any], type_: str, reason: str, message: str) -> Event:
    about = {
        "apiVersion": API_VERSION,
        "kind": "JobFlow",
        "namespace": _namespace(flow),
        "name": _name(flow),
        "uid": str(_meta(flow).get("uid") or ""),
    }
    return Event(about, type_, reason, message)


# -- the flow's status ------------------------------------------------------------------------------------


def flow_status(flow: Mapping[str, Any], owned: list[Mapping[str, Any]], now: datetime) -> Obj:
    """The status from the flow's Jobs; ``state`` is the flow's current one.  Empty lists and
    unset times are left out, as Go writes the struct (``omitempty``)."""
    lists: dict[str, list[str]] = {field_: [] for field_ in _LISTS.values()}
    unknown: list[str] = []
    conditions: Obj = {}
    for job in owned:
        phase = job_phase(job)
        if phase in _LISTS:
            lists[_LISTS[phase]].append(_name(job))
        elif phase not in _COUNTED_UNLISTED:
            unknown.append(_name(job))
        conditions[_name(job)] = _condition(job)
    status: Obj = {k: v for k, v in lists.items() if v}
    if unknown:
        status["unKnowJobs"] = unknown
    entries = _job_status_list(list(_status(flow).get("jobStatusList") or []), owned, now)
    if entries:
        status["jobStatusList"] = entries
    if conditions:
        status["conditions"] = conditions
    status["state"] = dict(_status(flow).get("state") or {})
    return status


def _condition(job: Mapping[str, Any]) -> Obj:
    status = _status(job)
    found = {
        "phase": job_phase(job),
        "createTime": _meta(job).get("creationTimestamp"),
        "runningDuration": status.get("runningDuration"),
        "taskStatusCount": status.get("taskStatusCount"),
    }
    return {k: copy.deepcopy(v) for k, v in found.items() if v}


def _job_status_list(previous: list[Obj], owned: list[Mapping[str, Any]], now: datetime) -> list[Obj]:
    """One entry per Job, updated in place; entries of Jobs that are gone stay (as in Volcano)."""
    entries = [copy.deepcopy(e) for e in previous]
    for job in owned:
        old = next((e for e in entries if e.get("name") == _name(job)), None)
        entry = _job_entry(job, _histories(old, job, now))
        if old is None:
            entries.append(entry)
        else:
            entries[entries.index(old)] = entry
    return entries


def _job_entry(job: Mapping[str, Any], histories: list[Obj]) -> Obj:
    created = str(_meta(job).get("creationTimestamp") or "")
    duration = _status(job).get("runningDuration")
    end = format_time(parse_time(created) + parse_go_duration(str(duration))) if created and duration else ""
    found: Obj = {
        "name": _name(job),
        "state": job_phase(job),
        "startTimestamp": created,
        "endTimestamp": end,
        "restartCount": int(_status(job).get("retryCount") or 0),
        "runningHistories": histories,
    }
    return {k: v for k, v in found.items() if v}


def _histories(entry: Mapping[str, Any] | None, job: Mapping[str, Any], now: datetime) -> list[Obj]:
    """The phases the Job went through, as this controller saw them: a new phase closes the last
    one and opens another, both at ``now``."""
    phase, stamp = job_phase(job), format_time(now)
    if entry is None or entry.get("runningHistories") is None:
        return [{"startTimestamp": stamp, "state": phase}] if phase else []
    histories = [dict(h) for h in entry["runningHistories"]]
    if histories and histories[-1].get("state") != phase:
        histories[-1]["endTimestamp"] = stamp
        histories.append({"startTimestamp": stamp, "state": phase})
    return histories


def next_phase(phase: str, status: Mapping[str, Any], steps: int) -> str:
    """Volcano's per-phase rule, one step per sync."""
    running, completed = len(status.get("runningJobs") or []), len(status.get("completedJobs") or [])
    broken = bool(status.get("failedJobs") or status.get("terminatedJobs"))
    if phase in ("", PENDING):
        if (running or completed) and not status.get("failedJobs"):
            return RUNNING
        return FAILED if broken else PENDING
    if phase == RUNNING:
        if completed == steps:
            return SUCCEED
        return FAILED if broken else RUNNING
    return phase


# -- the template ---------------------------------------------------------------------------------------------


def sync_template(template: Mapping[str, Any], jobs: Iterable[Mapping[str, Any]]) -> FlowPlan:
    """``status.jobDependsOnList``: the Jobs made from the template (by label), by name.  With no
    such Job the status is left as it is, as in Volcano."""
    names = sorted(_name(j) for j in _made_by(jobs, CREATED_BY_TEMPLATE, template))
    if not names or list(_status(template).get("jobDependsOnList") or []) == names:
        return FlowPlan()
    status = {**_status(template), "jobDependsOnList": names}
    return FlowPlan([UpdateStatus(_with_status(template, "JobTemplate", status))])


def _with_status(obj: Mapping[str, Any], kind: str, status: Obj) -> Obj:
    """The object to write back (with its resourceVersion); apiVersion and kind spelled out, as a
    mirrored object may lack them."""
    return {**copy.deepcopy(dict(obj)), "apiVersion": API_VERSION, "kind": kind, "status": status}
