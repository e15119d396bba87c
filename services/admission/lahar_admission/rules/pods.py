"""``/pods/validate`` (job disruption-budget annotations) and ``/pods/mutate`` (resource groups)."""

from __future__ import annotations

import json
import re
from typing import Any

from lahar_admission.review import Verdict
from lahar_admission.rules.common import CREATE, Ctx, decode, expect_resource
from lahar_admission.types import AdmissionConfig, Pod, ResGroup

JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"
RESOURCE_GROUP_ANNOTATION = "volcano.sh/resource-group"
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
_GO_INT = re.compile(r"^[+-]?[0-9]+$")
_INT64 = 2**63


def _gvr(ctx: Ctx) -> None:
    expect_resource(ctx.request, "", "v1", "pods")


def validate(ctx: Ctx) -> Verdict:
    _gvr(ctx)
    pod = decode(ctx.request.object, Pod)
    if ctx.op != CREATE:
        return Verdict.deny("expect operation to be 'CREATE'")
    if pod.spec.scheduler_name not in ctx.settings.scheduler_names:
        return Verdict.allow()
    err = _annotation_error(pod.metadata.annotations)
    return Verdict.deny(err) if err else Verdict.allow()


def _annotation_error(annotations: dict[str, str]) -> str:
    keys = (JDB_MIN_AVAILABLE, JDB_MAX_UNAVAILABLE)
    found = 0
    for key in keys:
        if key in annotations:
            found += 1
            err = int_or_percent_error(key, annotations[key])
            if err:
                return err
    if found > 1:
        return f"not allow configure multiple annotations <[{' '.join(keys)}]> at same time"
    return ""


def _go_atoi(text: str) -> tuple[int | None, str]:
    if not _GO_INT.match(text):
        return None, f'strconv.Atoi: parsing "{text}": invalid syntax'
    value = int(text)
    if not -_INT64 <= value < _INT64:
        return None, f'strconv.Atoi: parsing "{text}": value out of range'
    return value, ""


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def int_or_percent_error(key: str, value: str) -> str:
    """validateIntPercentageStr: a positive integer, or a percentage between 1% and 99%."""
    number, _ = _go_atoi(value)
    if number is not None:
        # intstr keeps an int32: larger values wrap as Go's conversion does.
        as_int32 = (number + 2**31) % 2**32 - 2**31
        if as_int32 <= 0:
            return f"invalid value <{_go_quote(value)}> for {key}, it must be a positive integer"
        return ""
    percent, err = _go_atoi(value.replace("%", ""))
    if percent is None:
        return f"invalid value {err} for {key}"
    if percent <= 0 or percent >= 100:
        return f"invalid value <{_go_quote(value)}> for {key}, it must be a valid percentage which between 1% ~ 99%"
    return ""


def mutate(ctx: Ctx) -> Verdict:
    _gvr(ctx)
    pod = decode(ctx.request.object, Pod)
    if ctx.op != CREATE:
        return Verdict.deny("expect operation to be 'CREATE' ")
    config = ctx.view.admission_config()
    if config is None:
        return Verdict.allow()
    namespace = pod.metadata.namespace or ctx.request.namespace
    ops = _gate_ops(pod) if ctx.settings.scheduling_gates_queue_admission else []
    ops += resource_group_ops(pod, namespace, config)
    return Verdict.allow(ops)


def _gate_ops(pod: Pod) -> list[dict[str, Any]]:
    if pod.metadata.annotations.get(QUEUE_ALLOCATION_GATE) != "true":
        return []
    gates = pod.spec.scheduling_gates
    if any(g.get("name") == QUEUE_ALLOCATION_GATE for g in gates or []):
        return []
    gate = {"name": QUEUE_ALLOCATION_GATE}
    if gates is None:
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [gate]}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": gate}]


def _belongs(pod: Pod, namespace: str, group: ResGroup) -> bool:
    key = group.object.key
    if key == "namespace":
        return namespace in group.object.value
    if key not in ("", "annotation"):
        return False
    annotations = pod.metadata.annotations
    if any(annotations.get(k, "") == v for k, v in group.annotation_pairs.items()):
        return True
    return key == "" and annotations.get(RESOURCE_GROUP_ANNOTATION, "") == group.resource_group


def resource_group_ops(pod: Pod, namespace: str, config: AdmissionConfig) -> list[dict[str, Any]]:
    """The patch of the first resource group the pod belongs to."""
    for group in config.resource_groups:
        if _belongs(pod, namespace, group):
            return _group_ops(pod, group)
    return []


def _group_ops(pod: Pod, group: ResGroup) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    if group.labels:
        selector = {**(pod.spec.node_selector or {}), **group.labels}
        ops.append({"op": "add", "path": "/spec/nodeSelector", "value": selector})
    if group.affinity and pod.spec.affinity is None:
        try:
            affinity = json.loads(group.affinity)
        except ValueError:
            affinity = None
        if isinstance(affinity, dict):
            ops.append({"op": "add", "path": "/spec/affinity", "value": affinity})
    if group.tolerations:
        ops.append(
            {
                "op": "add",
                "path": "/spec/tolerations",
                "value": [*(pod.spec.tolerations or []), *group.tolerations],
            }
        )
    if group.scheduler_name:
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": group.scheduler_name})
    return ops
