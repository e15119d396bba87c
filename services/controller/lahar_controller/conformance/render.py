"""Runner for the render areas of the controller corpus: job-podgroup, job-pod-render and the
plugin-* areas (steps syncPodGroup, recordPodGroupEvent, renderPod, pluginOnPodCreate,
pluginOnJobAdd, pluginOnJobDelete), against ``lahar_controller.job``.

The cluster is a dict of the case's objects; the step's writes are applied to it the way the
service shell applies them, then ``expect`` is compared (``expect.derived`` too, its differences
prefixed ``derived:``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lahar_controller.conformance.render_expect import (
    Key,
    find,
    match,
    match_counts,
    match_objects,
    parse_ref,
    pod_view,
)
from lahar_controller.job import plugins, render
from lahar_controller.job.plugins import Effects, PluginError

# case name -> why it does not pass yet
PENDING: dict[str, str] = {}

Store = dict[Key, dict[str, Any]]
Outcome = dict[str, Any]


def _key(obj: Mapping[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return str(obj.get("kind")), str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _store(case: Mapping[str, Any]) -> Store:
    objects = (case.get("given") or {}).get("objects") or []
    return {_key(o): o for o in objects}


def _job(store: Store, ref: str) -> dict[str, Any]:
    job = find(store, f"Job/{ref}")
    if job is None:
        raise LookupError(f"no Job {ref} in given.objects")
    return job


def _priority_classes(store: Store) -> dict[str, int]:
    return {name: int(o.get("value") or 0) for (kind, _ns, name), o in store.items() if kind == "PriorityClass"}


def _podgroups(store: Store, namespace: str) -> dict[str, dict[str, Any]]:
    return {name: o for (kind, ns, name), o in store.items() if kind == "PodGroup" and ns == namespace}


def _sync_podgroup(store: Store, step: Mapping[str, Any]) -> Outcome:
    job = _job(store, step["job"])
    existing = render.find_podgroup(job, _podgroups(store, render.job_namespace(job)))
    written = render.podgroup_for(job, existing, _priority_classes(store))
    if written is not None:
        store[_key(written)] = written
    return {}


def _record_event(store: Store, step: Mapping[str, Any]) -> Outcome:
    job = _job(store, step["job"])
    pg = render.find_podgroup(job, _podgroups(store, render.job_namespace(job)))
    event = render.podgroup_event(job, pg) if pg is not None else None
    return {"events": [" ".join(event)] if event else []}


def _render_pod(store: Store, step: Mapping[str, Any]) -> Outcome:
    job = _job(store, step["job"])
    task = render.task_named(job, str(step["task"]))
    if task is None:
        raise LookupError(f"no task {step['task']} in the job")
    pod = render.render_pod(job, task, int(step["index"]), forwarding=bool(step.get("jobForwarding")))
    spec = pod["spec"]
    volumes = spec.get("volumes") or []
    return {
        "pod": pod_view(pod),
        "volumeCount": len(volumes),
        "containerMountPaths": {
            c.get("name"): sorted({m.get("mountPath") for m in c.get("volumeMounts") or []})
            for c in spec.get("containers") or []
        },
        "volumeClaims": [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v],
    }


def _pod_create(store: Store, step: Mapping[str, Any]) -> Outcome:
    job = _job(store, step["job"])
    pod = render.copy_json(step["pod"])
    plugins.on_pod_create(job, pod, step.get("plugins"))
    return {"pod": pod_view(pod)}


def _apply(store: Store, job: dict[str, Any], effects: Effects) -> None:
    """What the service shell does with the hooks' effects."""
    for write in effects.writes:
        key = _key(write.object)
        if key not in store or write.replace:
            store[key] = write.object
    for ref in effects.deletes:
        store.pop((ref.kind, ref.namespace, ref.name), None)
    job.setdefault("status", {})["controlledResources"] = effects.controlled


def _job_add(store: Store, step: Mapping[str, Any]) -> Outcome:
    job = _job(store, step["job"])
    _apply(store, job, plugins.on_job_add(job, keygen=_test_key))
    return {}


def _job_delete(store: Store, step: Mapping[str, Any]) -> Outcome:
    job = _job(store, step["job"])
    _apply(store, job, plugins.on_job_delete(job))
    return {}


def _test_key() -> tuple[bytes, bytes]:
    # key material is never compared; a real 2048-bit key would cost time for nothing
    return b"-----BEGIN RSA PRIVATE KEY-----\ntest\n-----END RSA PRIVATE KEY-----\n", b"ssh-rsa dGVzdA== test\n"


STEPS: dict[str, Callable[[Store, Mapping[str, Any]], Outcome]] = {
    "syncPodGroup": _sync_podgroup,
    "recordPodGroupEvent": _record_event,
    "renderPod": _render_pod,
    "pluginOnPodCreate": _pod_create,
    "pluginOnJobAdd": _job_add,
    "pluginOnJobDelete": _job_delete,
}


def _run(case: Mapping[str, Any]) -> tuple[Store, Outcome]:
    store = _store(case)
    step = case["step"]
    runner = STEPS.get(step.get("kind"))
    if runner is None:
        raise LookupError(f"step kind {step.get('kind')!r} is not a render step")
    try:
        outcome = runner(store, step)
        outcome["error"] = None
    except PluginError as exc:
        outcome = {"error": str(exc)}
    return store, outcome


def _compare(expect: Mapping[str, Any], store: Store, outcome: Outcome, prefix: str) -> list[str]:
    out: list[str] = []
    for key, want in expect.items():
        if key == "derived":
            continue
        if key == "objects":
            out += match_objects(want, store, f"{prefix}objects")
        elif key == "counts":
            out += match_counts(want, store, f"{prefix}counts")
        elif key == "events":
            if sorted(want) != sorted(outcome.get("events", [])):
                out.append(f"{prefix}events: expected {want!r}, got {outcome.get('events')!r}")
        elif key == "containerMountPaths":
            want_sets = {c: sorted(paths) for c, paths in want.items()}
            out += match(want_sets, outcome.get(key), f"{prefix}{key}")
        else:
            out += match(want, outcome.get(key), f"{prefix}{key}")
    if not prefix and "error" not in expect and outcome.get("error"):
        out.append(f"{prefix}error: the step failed: {outcome['error']}")
    return out


def check(case: dict[str, Any]) -> list[str]:
    """Differences from the case's ``expect`` ([] = the case passes)."""
    store, outcome = _run(case)
    expect = case.get("expect") or {}
    out = _compare(expect, store, outcome, "")
    derived = expect.get("derived")
    if isinstance(derived, Mapping):
        out += _compare(derived, store, outcome, "derived: ")
    return out


__all__ = ["PENDING", "check", "parse_ref"]
