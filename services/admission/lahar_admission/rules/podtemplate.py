"""Kubernetes' PodTemplate validation, the part Volcano runs on every task template.

Volcano defaults each task template as a v1 PodTemplate and validates it with the API server's
own ``ValidatePodTemplate``.  This module checks the same things that matter for a batch pod:
object metadata, labels, volumes, containers (names, images, ports, env, mounts, resources),
restart and DNS policy, node selector, tolerations, names of referenced objects, and pod-level
resources.  Field paths and wording follow Kubernetes (``template.spec.containers[0].image:
Required value``).  The template is plain data, so every access checks the type first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lahar_admission import fielderr as fe
from lahar_admission.fielderr import FieldError
from lahar_admission.names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_env_var_name,
    is_label_value,
    is_port_name,
    is_qualified_name,
)
from lahar_admission.rules.resources import pod_consistency_errors, requirements_errors

RESTART_POLICIES = ["Always", "OnFailure", "Never"]
DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]
TERMINATION_MESSAGE_POLICIES = ["File", "FallbackToLogsOnError"]
TOLERATION_OPERATORS = ["Equal", "Exists"]
TAINT_EFFECTS = ["NoExecute", "NoSchedule", "PreferNoSchedule"]


@dataclass(frozen=True)
class PodOptions:
    pod_level_resources: bool = True


def _as_dict(value: Any, path: str, errs: list[FieldError]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        errs.append(fe.invalid(path, value, "must be an object"))
        return {}
    return value


def _as_list(value: Any, path: str, errs: list[FieldError]) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        errs.append(fe.invalid(path, value, "must be a list"))
        return []
    return value


def _as_str(value: Any, path: str, errs: list[FieldError]) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        errs.append(fe.invalid(path, value, "must be a string"))
        return ""
    return value


def _name_errors(value: str, path: str, check: Any) -> list[FieldError]:
    return [fe.invalid(path, value, m) for m in check(value)]


def validate_pod_template(template: Any, name: str, namespace: str, opts: PodOptions) -> list[FieldError]:
    """Errors of a PodTemplate named ``name`` in ``namespace`` holding ``template``."""
    errs: list[FieldError] = []
    if not name:
        errs.append(fe.required("metadata.name", "name or generateName is required"))
    else:
        errs += _name_errors(name, "metadata.name", is_dns1123_subdomain)
    if not namespace:
        errs.append(fe.required("metadata.namespace"))
    else:
        errs += _name_errors(namespace, "metadata.namespace", is_dns1123_label)
    tpl = _as_dict(template, "template", errs)
    meta = _as_dict(tpl.get("metadata"), "template.metadata", errs)
    errs += _labels(meta.get("labels"), "template.metadata.labels")
    errs += _annotations(meta.get("annotations"), "template.metadata.annotations")
    spec = _as_dict(tpl.get("spec"), "template.spec", errs)
    errs += validate_pod_spec(spec, "template.spec", opts)
    return errs


def _labels(raw: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key, val in _as_dict(raw, path, errs).items():
        errs += _name_errors(str(key), path, is_qualified_name)
        if not isinstance(val, str):
            errs.append(fe.invalid(f"{path}[{key}]", val, "must be a string"))
        else:
            errs += _name_errors(val, f"{path}[{key}]", is_label_value)
    return errs


def _annotations(raw: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key, val in _as_dict(raw, path, errs).items():
        errs += _name_errors(str(key).lower(), path, is_qualified_name)
        if not isinstance(val, str):
            errs.append(fe.invalid(f"{path}[{key}]", val, "must be a string"))
    return errs


def validate_pod_spec(spec: dict[str, Any], path: str, opts: PodOptions) -> list[FieldError]:
    errs: list[FieldError] = []
    volumes = _volumes(spec.get("volumes"), f"{path}.volumes", errs)
    host_network = spec.get("hostNetwork") is True
    seen: set[str] = set()
    containers = _as_list(spec.get("containers"), f"{path}.containers", errs)
    if not containers:
        errs.append(fe.required(f"{path}.containers"))
    for key, items in (
        ("initContainers", _as_list(spec.get("initContainers"), f"{path}.initContainers", errs)),
        ("containers", containers),
    ):
        for i, c in enumerate(items):
            cpath = f"{path}.{key}[{i}]"
            if not isinstance(c, dict):
                errs.append(fe.invalid(cpath, c, "must be an object"))
                continue
            errs += _container(c, cpath, key == "initContainers", volumes, seen, host_network)
    errs += _enum(spec.get("restartPolicy"), f"{path}.restartPolicy", RESTART_POLICIES)
    errs += _dns(spec, path)
    errs += _labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    errs += _tolerations(spec.get("tolerations"), f"{path}.tolerations")
    errs += _referenced_names(spec, path)
    errs += _deadline(spec.get("activeDeadlineSeconds"), f"{path}.activeDeadlineSeconds")
    if opts.pod_level_resources and spec.get("resources") is not None:
        errs += requirements_errors(spec.get("resources"), f"{path}.resources", pod_level=True)
        errs += pod_consistency_errors(spec, f"{path}.resources")
    return errs


def _enum(value: Any, path: str, allowed: list[str]) -> list[FieldError]:
    """An enum that API defaulting fills in when empty, so only a wrong non-empty value fails."""
    if value is None or value == "":
        return []
    if value not in allowed:
        return [fe.not_supported(path, value, allowed)]
    return []


def _dns(spec: dict[str, Any], path: str) -> list[FieldError]:
    errs = _enum(spec.get("dnsPolicy"), f"{path}.dnsPolicy", DNS_POLICIES)
    if spec.get("dnsPolicy") == "None" and not spec.get("dnsConfig"):
        errs.append(fe.required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"))
    return errs


def _referenced_names(spec: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for key, check in (
        ("serviceAccountName", is_dns1123_subdomain),
        ("nodeName", is_dns1123_subdomain),
        ("schedulerName", is_dns1123_subdomain),
        ("priorityClassName", is_dns1123_subdomain),
        ("hostname", is_dns1123_label),
        ("subdomain", is_dns1123_label),
    ):
        value = _as_str(spec.get(key), f"{path}.{key}", errs)
        if value:
            errs += _name_errors(value, f"{path}.{key}", check)
    return errs


def _deadline(value: Any, path: str) -> list[FieldError]:
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**31 - 1:
        return [fe.invalid(path, value, "must be between 1 and 2147483647, inclusive")]
    return []


def _volumes(raw: Any, path: str, errs: list[FieldError]) -> set[str]:
    names: set[str] = set()
    for i, vol in enumerate(_as_list(raw, path, errs)):
        vpath = f"{path}[{i}]"
        if not isinstance(vol, dict):
            errs.append(fe.invalid(vpath, vol, "must be an object"))
            continue
        name = _as_str(vol.get("name"), f"{vpath}.name", errs)
        if not name:
            errs.append(fe.required(f"{vpath}.name"))
        else:
            errs += _name_errors(name, f"{vpath}.name", is_dns1123_label)
            if name in names:
                errs.append(fe.duplicate(f"{vpath}.name", name))
            names.add(name)
        sources = [k for k in vol if k != "name" and vol[k] is not None]
        if not sources:
            errs.append(fe.required(vpath, "must specify a volume type"))
        for extra in sources[1:]:
            errs.append(fe.forbidden(f"{vpath}.{extra}", "may not specify more than 1 volume type"))
    return names


def _container(
    c: dict[str, Any], path: str, init: bool, volumes: set[str], seen: set[str], host_network: bool
) -> list[FieldError]:
    errs: list[FieldError] = []
    name = _as_str(c.get("name"), f"{path}.name", errs)
    if not name:
        errs.append(fe.required(f"{path}.name"))
    else:
        errs += _name_errors(name, f"{path}.name", is_dns1123_label)
        if name in seen:
            errs.append(fe.duplicate(f"{path}.name", name))
        seen.add(name)
    image = _as_str(c.get("image"), f"{path}.image", errs)
    if not image:
        errs.append(fe.required(f"{path}.image"))
    elif image.strip() != image:
        errs.append(fe.invalid(f"{path}.image", image, "must not have leading or trailing whitespace"))
    errs += _enum(c.get("imagePullPolicy"), f"{path}.imagePullPolicy", PULL_POLICIES)
    errs += _enum(c.get("terminationMessagePolicy"), f"{path}.terminationMessagePolicy", TERMINATION_MESSAGE_POLICIES)
    errs += _restart_policy(c, path, init)
    errs += _ports(c.get("ports"), f"{path}.ports", host_network)
    errs += _env(c.get("env"), f"{path}.env")
    errs += _mounts(c.get("volumeMounts"), f"{path}.volumeMounts", volumes)
    errs += requirements_errors(c.get("resources"), f"{path}.resources", pod_level=False)
    return errs


def _restart_policy(c: dict[str, Any], path: str, init: bool) -> list[FieldError]:
    policy = c.get("restartPolicy")
    if policy is None or policy == "":
        if init:
            return [
                fe.forbidden(f"{path}.{probe}", "may not be set for init containers without restartPolicy=Always")
                for probe in ("livenessProbe", "readinessProbe", "startupProbe")
                if c.get(probe) is not None
            ]
        return []
    if not init:
        return [fe.forbidden(f"{path}.restartPolicy", "may not be set for non-init containers")]
    if policy != "Always":
        return [fe.not_supported(f"{path}.restartPolicy", policy, ["Always"])]
    return []


def _port_number(value: Any, path: str, low: int) -> list[FieldError]:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 65535:
        return [fe.invalid(path, value, f"must be between {low} and 65535, inclusive")]
    return []


def _ports(raw: Any, path: str, host_network: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(_as_list(raw, path, errs)):
        ppath = f"{path}[{i}]"
        if not isinstance(port, dict):
            errs.append(fe.invalid(ppath, port, "must be an object"))
            continue
        name = _as_str(port.get("name"), f"{ppath}.name", errs)
        if name:
            errs += _name_errors(name, f"{ppath}.name", is_port_name)
            if name in names:
                errs.append(fe.duplicate(f"{ppath}.name", name))
            names.add(name)
        errs += _port_number(port.get("containerPort", 0), f"{ppath}.containerPort", 1)
        host = port.get("hostPort")
        if host not in (None, 0):
            errs += _port_number(host, f"{ppath}.hostPort", 1)
            if host_network and host != port.get("containerPort"):
                errs.append(
                    fe.invalid(f"{ppath}.hostPort", host, "must match `containerPort` when `hostNetwork` is true")
                )
        errs += _enum(port.get("protocol"), f"{ppath}.protocol", PROTOCOLS)
    return errs


def _env(raw: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, env in enumerate(_as_list(raw, path, errs)):
        epath = f"{path}[{i}]"
        if not isinstance(env, dict):
            errs.append(fe.invalid(epath, env, "must be an object"))
            continue
        name = _as_str(env.get("name"), f"{epath}.name", errs)
        if not name:
            errs.append(fe.required(f"{epath}.name"))
        else:
            errs += _name_errors(name, f"{epath}.name", is_env_var_name)
        value_from = env.get("valueFrom")
        if value_from is not None:
            if env.get("value"):
                errs.append(fe.invalid(f"{epath}.valueFrom", "", "may not be specified when `value` is not empty"))
            sources = [k for k, v in _as_dict(value_from, f"{epath}.valueFrom", errs).items() if v is not None]
            if len(sources) != 1:
                errs.append(
                    fe.invalid(f"{epath}.valueFrom", "", "may not have more than one field specified at a time")
                    if sources
                    else fe.required(
                        f"{epath}.valueFrom",
                        "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
                    )
                )
    return errs


def _mounts(raw: Any, path: str, volumes: set[str]) -> list[FieldError]:
    errs: list[FieldError] = []
    paths: set[str] = set()
    for i, mount in enumerate(_as_list(raw, path, errs)):
        mpath = f"{path}[{i}]"
        if not isinstance(mount, dict):
            errs.append(fe.invalid(mpath, mount, "must be an object"))
            continue
        name = _as_str(mount.get("name"), f"{mpath}.name", errs)
        if not name:
            errs.append(fe.required(f"{mpath}.name"))
        elif name not in volumes:
            errs.append(fe.not_found(f"{mpath}.name", name))
        mount_path = _as_str(mount.get("mountPath"), f"{mpath}.mountPath", errs)
        if not mount_path:
            errs.append(fe.required(f"{mpath}.mountPath"))
        elif mount_path in paths:
            errs.append(fe.invalid(f"{mpath}.mountPath", mount_path, "must be unique"))
        paths.add(mount_path)
    return errs


def _tolerations(raw: Any, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, tol in enumerate(_as_list(raw, path, errs)):
        tpath = f"{path}[{i}]"
        if not isinstance(tol, dict):
            errs.append(fe.invalid(tpath, tol, "must be an object"))
            continue
        key = _as_str(tol.get("key"), f"{tpath}.key", errs)
        op = tol.get("operator") or ""
        if key:
            errs += _name_errors(key, f"{tpath}.key", is_qualified_name)
        elif op != "Exists":
            errs.append(
                fe.invalid(
                    f"{tpath}.operator",
                    op,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"',
                )
            )
        if op == "Exists" and tol.get("value"):
            errs.append(
                fe.invalid(f"{tpath}.operator", tol.get("value"), "value must be empty when `operator` is 'Exists'")
            )
        elif op not in ("", "Equal", "Exists"):
            errs.append(fe.not_supported(f"{tpath}.operator", op, TOLERATION_OPERATORS))
        errs += _enum(tol.get("effect"), f"{tpath}.effect", TAINT_EFFECTS)
        if tol.get("tolerationSeconds") is not None and tol.get("effect") != "NoExecute":
            errs.append(
                fe.invalid(
                    f"{tpath}.effect",
                    tol.get("effect") or "",
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
    return errs
