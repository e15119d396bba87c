"""apps/v1 and batch/v1 workloads: the defaults, validation and immutable fields of the API
server's strategies for Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs and CronJobs.

The emulator runs none of their controllers (no pods are made from them); it stores them the
way the API server would, so that what a controller reads back (a defaulted ``replicas``, a
Job's generated selector, a refused selector change) is what it would read from Kubernetes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lahar.sim.errors import ApiError
from lahar.sim.selectors import selector_from_object
from lahar.sim.strategies import default_pod_spec, validate_pod

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

APPS = ("deployments", "replicasets", "statefulsets", "daemonsets")
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def _dict(parent: Obj, key: str) -> Obj:
    value = parent.get(key)
    if not isinstance(value, dict):
        value = parent[key] = {}
    return value


def _default_template(spec: Obj) -> None:
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"])


# --- defaults (applied on create and on update, as decoding does on the server) -----------------------


def _default_deployment(spec: Obj) -> None:
    spec.setdefault("replicas", 1)
    strategy = _dict(spec, "strategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)


def _default_replicaset(spec: Obj) -> None:
    spec.setdefault("replicas", 1)


def _default_statefulset(spec: Obj) -> None:
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _dict(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        _dict(strategy, "rollingUpdate").setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    retention = _dict(spec, "persistentVolumeClaimRetentionPolicy")
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")


def _default_daemonset(spec: Obj) -> None:
    strategy = _dict(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _dict(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)


def _default_job_spec(spec: Obj) -> None:
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 2147483647 if spec.get("backoffLimitPerIndex") is not None else 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    if spec.get("podFailurePolicy") is None:
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")


def _default_cronjob(spec: Obj) -> None:
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.get("jobTemplate")
    if isinstance(job_template, dict) and isinstance(job_template.get("spec"), dict):
        _default_template(job_template["spec"])


_DEFAULTS: dict[str, Callable[[Obj], None]] = {
    "deployments": _default_deployment,
    "replicasets": _default_replicaset,
    "statefulsets": _default_statefulset,
    "daemonsets": _default_daemonset,
    "jobs": _default_job_spec,
    "cronjobs": _default_cronjob,
}


def _apply_defaults(plural: str, obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    _DEFAULTS[plural](spec)
    _default_template(spec)


_EMPTY_STATUS: dict[str, Obj] = {
    "replicasets": {"replicas": 0},
    "statefulsets": {"replicas": 0, "availableReplicas": 0},
    "daemonsets": {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0},
}

# --- create ------------------------------------------------------------------------------------------


def _prepare_create(plural: str) -> Callable[[Obj], None]:
    def prepare(obj: Obj) -> None:
        _apply_defaults(plural, obj)
        if plural == "jobs":
            _generate_job_selector(obj)
        # The status subresource's owner writes it; a client's is dropped.  The counters
        # without ``omitempty`` in the Go types are always there (clients require them).
        obj["status"] = dict(_EMPTY_STATUS.get(plural, {}))

    return prepare


def _generate_job_selector(obj: Obj) -> None:
    """The Job strategy's selector, unless ``manualSelector``: the Job's uid as a label."""
    spec, meta = obj.get("spec"), obj["metadata"]
    if not isinstance(spec, dict) or spec.get("manualSelector"):
        return
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    tmeta = _dict(template, "metadata")
    uid, name = meta["uid"], meta["name"]
    generated = {JOB_UID_LABEL: uid, JOB_NAME_LABEL: name, "controller-uid": uid, "job-name": name}
    tmeta["labels"] = {**(tmeta.get("labels") or {}), **generated}
    selector = spec["selector"] = dict(spec.get("selector") or {})
    # A user's controller-uid label is kept: validation then refuses it if it does not match.
    selector["matchLabels"] = {JOB_UID_LABEL: uid, **(selector.get("matchLabels") or {})}
    if not meta.get("labels"):  # as SetDefaults_Job: the Job takes its pods' labels
        meta["labels"] = dict(tmeta["labels"])


# --- validation --------------------------------------------------------------------------------------


def _template_causes(template: Any, where: str, restart_policies: tuple[str, ...] = ()) -> Causes:
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        return [(f"{where}.spec", "Required value")]
    causes = [(f"{where}.{path}", why) for path, why in validate_pod({"spec": template["spec"]})]
    policy = template["spec"].get("restartPolicy")
    if restart_policies and policy not in restart_policies:
        allowed = ", ".join(f'"{p}"' for p in restart_policies)
        causes.append((f"{where}.spec.restartPolicy", f'Unsupported value: "{policy}": supported values: {allowed}'))
    return causes


def _selector_causes(spec: Obj, kind: str) -> Causes:
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return [("spec.selector", f"Invalid value: {selector!r}: empty selector is invalid for {kind.lower()}")]
    template = spec.get("template")
    labels = ((template or {}).get("metadata") or {}).get("labels") or {} if isinstance(template, dict) else {}
    try:
        matches = selector_from_object(selector, "spec.selector")(labels)
    except ApiError as exc:
        return [("spec.selector", exc.message)]
    if not matches:
        return [
            ("spec.template.metadata.labels", f"Invalid value: {labels!r}: `selector` does not match template `labels`")
        ]
    return []


def _replicas_causes(spec: Obj) -> Causes:
    replicas = spec.get("replicas")
    if replicas is not None and (not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0):
        return [("spec.replicas", f"Invalid value: {replicas!r}: must be greater than or equal to 0")]
    return []


def _validate(plural: str, kind: str) -> Callable[[Obj], Causes]:
    def validate(obj: Obj) -> Causes:
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return [("spec", "Required value")]
        if plural == "cronjobs":
            return _cronjob_causes(spec)
        causes = _replicas_causes(spec) + _selector_causes(spec, kind)
        if plural == "jobs":
            return causes + _template_causes(spec.get("template"), "spec.template", ("OnFailure", "Never"))
        always = ("Always",) if plural in ("deployments", "replicasets", "statefulsets", "daemonsets") else ()
        return causes + _template_causes(spec.get("template"), "spec.template", always)

    return validate


def _cronjob_causes(spec: Obj) -> Causes:
    causes: Causes = []
    schedule = spec.get("schedule")
    if not isinstance(schedule, str) or not schedule.strip():
        causes.append(("spec.schedule", "Required value"))
    policy = spec.get("concurrencyPolicy")
    if policy not in ("Allow", "Forbid", "Replace"):
        causes.append(
            ("spec.concurrencyPolicy", f'Unsupported value: "{policy}": supported values: "Allow", "Forbid", "Replace"')
        )
    job_spec = (spec.get("jobTemplate") or {}).get("spec") if isinstance(spec.get("jobTemplate"), dict) else None
    if not isinstance(job_spec, dict):
        return [*causes, ("spec.jobTemplate.spec", "Required value")]
    return causes + _template_causes(job_spec.get("template"), "spec.jobTemplate.spec.template", ("OnFailure", "Never"))


# --- update ------------------------------------------------------------------------------------------


def _prepare_update(plural: str) -> Callable[[Obj, Obj], Causes]:
    def prepare(new: Obj, old: Obj) -> Causes:
        _apply_defaults(plural, new)
        if plural == "cronjobs":
            return []
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if isinstance(new_spec, dict) and new_spec.get("selector") != old_spec.get("selector"):
            return [("spec.selector", f"Invalid value: {new_spec.get('selector')!r}: field is immutable")]
        return []

    return prepare


def _keys(group: str, plurals: tuple[str, ...]) -> list[tuple[tuple[str, str], str]]:
    return [((group, p), p) for p in plurals]


_ALL = _keys("apps", APPS) + _keys("batch", ("jobs", "cronjobs"))
_KINDS = {
    "deployments": "Deployment",
    "replicasets": "ReplicaSet",
    "statefulsets": "StatefulSet",
    "daemonsets": "DaemonSet",
    "jobs": "Job",
    "cronjobs": "CronJob",
}
PREPARE_CREATE: dict[tuple[str, str], Callable[[Obj], None]] = {key: _prepare_create(p) for key, p in _ALL}
VALIDATE: dict[tuple[str, str], Callable[[Obj], Causes]] = {key: _validate(p, _KINDS[p]) for key, p in _ALL}
PREPARE_UPDATE: dict[tuple[str, str], Callable[[Obj, Obj], Causes]] = {key: _prepare_update(p) for key, p in _ALL}
