"""Reading and editing the pod dicts plugins work on, and the host names of a job's pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar_controller.job import names
from lahar_controller.job.render import job_name, replicas, template_spec

Obj = dict[str, Any]


def containers(pod: Obj, *, init: bool = False) -> list[Obj]:
    """The pod's (init) containers, as the list stored in the pod (edits stick)."""
    spec = pod.setdefault("spec", {})
    key = "initContainers" if init else "containers"
    raw = spec.get(key)
    return [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []


def all_containers(pod: Obj) -> list[Obj]:
    return containers(pod) + containers(pod, init=True)


def task_key(pod: Mapping[str, Any]) -> str:
    """The pod's task (its ``volcano.sh/task-spec`` annotation; ``default`` when missing)."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    value = annotations.get(names.TASK_SPEC) if isinstance(annotations, Mapping) else None
    return str(value) if value else names.DEFAULT_TASK_SPEC


def pod_index(pod: Mapping[str, Any]) -> str:
    """The index part of ``<job>-<task>-<index>`` ("" when the name has fewer than 3 parts)."""
    meta = pod.get("metadata")
    parts = str(meta.get("name") or "").split("-") if isinstance(meta, Mapping) else []
    return parts[-1] if len(parts) >= 3 else ""


def add_env(container: Obj, *env: Obj) -> None:
    container.setdefault("env", []).extend(dict(e) for e in env)


def has_port(container: Mapping[str, Any], port: int) -> bool:
    ports = container.get("ports")
    return any(isinstance(p, Mapping) and p.get("containerPort") == port for p in ports or [])


def add_port(container: Obj, name: str, port: int) -> None:
    if not has_port(container, port):
        container.setdefault("ports", []).append({"name": name, "containerPort": port})


def add_volume(pod: Obj, volume: Obj) -> None:
    pod.setdefault("spec", {}).setdefault("volumes", []).append(volume)


def mount(container: Obj, mount_: Obj) -> None:
    container.setdefault("volumeMounts", []).append(dict(mount_))


def host_of(task: Mapping[str, Any], job: Mapping[str, Any], index: int) -> str:
    """``<hostname>.<subdomain>`` of pod ``index`` of the task: the template's hostname and
    subdomain when set, else the pod name and the job name (the svc plugin's headless Service)."""
    spec = template_spec(task)
    host = spec.get("hostname") or names.pod_name(job_name(job), str(task.get("name") or ""), index)
    return f"{host}.{spec.get('subdomain') or job_name(job)}"


def task_hosts(task: Mapping[str, Any], job: Mapping[str, Any]) -> list[str]:
    """The hosts of the task's pods; a template with a fixed hostname names one host only."""
    if template_spec(task).get("hostname"):
        return [host_of(task, job, 0)] if replicas(task) > 0 else []
    return [host_of(task, job, i) for i in range(replicas(task))]
