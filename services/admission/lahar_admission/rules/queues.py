"""``/queues/validate`` and ``/queues/mutate``."""

from __future__ import annotations

import math
import re
from typing import Any

from lahar_admission import fielderr as fe
from lahar_admission.fielderr import FieldError
from lahar_admission.goquantity import canonical_of
from lahar_admission.review import Verdict
from lahar_admission.rules import queuetree
from lahar_admission.rules.common import CREATE, DELETE, UPDATE, Ctx, decode, expect_resource
from lahar_admission.rules.resources import quantity_value_errors
from lahar_admission.types import Queue, QueueSpec
from lahar_admission.view import not_found

HIERARCHY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS = "volcano.sh/hierarchy-weights"
# Go's strconv.ParseFloat syntax: no spaces, no '_' outside hex digits, inf/nan words allowed.
_GO_FLOAT = re.compile(
    r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)"
    r"[pP][+-]?\d+|inf(?:inity)?|nan)$",
    re.IGNORECASE,
)


def _queue_gvr(ctx: Ctx) -> None:
    expect_resource(ctx.request, "scheduling.volcano.sh", "v1beta1", "queues")


def validate(ctx: Ctx) -> Verdict:
    _queue_gvr(ctx)
    if ctx.op == DELETE:
        err = delete_error(ctx.request.name, ctx)
        return Verdict.deny(err) if err else Verdict.allow()
    if ctx.op not in (CREATE, UPDATE):
        return Verdict.deny(f"invalid operation `{ctx.op}`, expect operation to be `CREATE`, `UPDATE` or `DELETE`")
    queue = decode(ctx.request.object, Queue)
    old = decode(ctx.request.old_object, Queue, "oldObject") if ctx.op == UPDATE else None
    err = _object_errors(queue, ctx) or _stages(queue, old, ctx)
    return Verdict.deny(err) if err else Verdict.allow()


def _object_errors(queue: Queue, ctx: Ctx) -> str:
    errs = quantity_errors(queue.spec, "requestBody.spec")
    state = queue.status.state
    if state and state not in ("Open", "Closed"):
        errs.append(fe.invalid("requestBody.spec.state", state, "queue state must be in [Open Closed]"))
    errs += hierarchy_errors(queue, ctx, "requestBody.metadata.annotations")
    return fe.aggregate(errs) if errs else ""


def _stages(queue: Queue, old: Queue | None, ctx: Ctx) -> str:
    parent_changed = old is None or old.spec.parent != queue.spec.parent
    if parent_changed:
        err = queuetree.parent_error(queue, ctx.view, ctx.settings.max_queue_depth)
        if err:
            return err
    if (
        old is not None
        and queue.metadata.name == "root"
        and ctx.settings.enable_root_queue_protection
        and queuetree.resources_changed(old, queue)
    ):
        return "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
    if queue.metadata.name != "root" and (old is None or parent_changed or queuetree.resources_changed(old, queue)):
        return queuetree.resource_error(queue, ctx.view)
    return ""


def quantity_errors(spec: QueueSpec, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for name, q in spec.capability.items():
        errs += quantity_value_errors(name, q, f"{path}.capability.{name}")
    for name, q in spec.deserved.items():
        errs += quantity_value_errors(name, q, f"{path}.deserved.{name}")
    for name, g in spec.guarantee.resource.items():
        errs += quantity_value_errors(name, g, f"{path}.guarantee.resource.{name}")
        d = spec.deserved.get(name)
        if d is None:
            errs.append(
                fe.invalid_raw(
                    f"{path}.deserved.{name}",
                    '"<nil>"',
                    f"deserved[{name}] must be >= guarantee[{name}]={canonical_of(g)}",
                )
            )
        elif d.amount < g.amount:
            errs.append(
                fe.invalid(
                    f"{path}.deserved.{name}",
                    canonical_of(d),
                    f"deserved[{name}]={canonical_of(d)} must be >= guarantee[{name}]={canonical_of(g)}",
                )
            )
    for name, d in spec.deserved.items():
        c = spec.capability.get(name)
        if c is not None and d.amount > c.amount:
            errs.append(
                fe.invalid(
                    f"{path}.deserved.{name}",
                    canonical_of(d),
                    f"deserved[{name}]={canonical_of(d)} must be <= capability[{name}]={canonical_of(c)}",
                )
            )
    return errs


def _go_parse_float(text: str) -> tuple[float | None, str]:
    """strconv.ParseFloat(text, 64): the value, or Go's error text."""
    if not _GO_FLOAT.match(text):
        return None, f'strconv.ParseFloat: parsing "{text}": invalid syntax'
    try:
        value = float.fromhex(text) if "x" in text.lower() else float(text)
    except (ValueError, OverflowError):
        return None, f'strconv.ParseFloat: parsing "{text}": invalid syntax'
    if math.isinf(value) and "inf" not in text.lower():
        return None, f'strconv.ParseFloat: parsing "{text}": value out of range'
    return value, ""


def hierarchy_errors(queue: Queue, ctx: Ctx, path: str) -> list[FieldError]:
    annotations = queue.metadata.annotations
    hierarchy = annotations.get(HIERARCHY, "")
    weights = annotations.get(HIERARCHY_WEIGHTS, "")
    if not hierarchy and not weights:
        return []
    parts, wparts = hierarchy.split("/"), weights.split("/")
    if len(parts) != len(wparts):
        return [fe.invalid(path, hierarchy, f"{HIERARCHY} must have the same length with {HIERARCHY_WEIGHTS}")]
    for w in wparts:
        value, err = _go_parse_float(w)
        if value is None:
            return [fe.invalid(path, weights, f"{w} in the {weights} is invalid number: {err}")]
        if not value > 0:
            return [fe.invalid(path, weights, f"{w} in the {weights} must be larger than 0")]
    for other in ctx.view.queues():
        theirs = other.metadata.annotations.get(HIERARCHY, "")
        if theirs and other.metadata.name != queue.metadata.name and theirs.startswith(hierarchy + "/"):
            return [
                fe.invalid(
                    path,
                    hierarchy,
                    f"{hierarchy} is not allowed to be in the sub path of {theirs} of queue {other.metadata.name}",
                )
            ]
    return []


def delete_error(name: str, ctx: Ctx) -> str:
    if name in ("default", "root"):
        return f"`{name}` queue can not be deleted"
    queue = ctx.view.queue(name)
    if queue is None:
        return not_found("queue.scheduling.volcano.sh", name)
    if ctx.settings.enable_queue_allocated_pods_check:
        pods = queue.status.allocated.get("pods")
        if pods is not None and pods.amount != 0:
            return f"queue {name} cannot be deleted because it has allocated Pods: {pods.units}"
    children = [c.metadata.name for c in ctx.view.children(name)]
    if children:
        return f"queue {name} can not be deleted because it has {len(children)} child queues: " + ", ".join(children)
    return ""


def mutate(ctx: Ctx) -> Verdict:
    _queue_gvr(ctx)
    queue = decode(ctx.request.object, Queue)
    if ctx.op != CREATE:
        return Verdict.deny(f"invalid operation `{ctx.op}`, expect operation to be `CREATE`")
    return Verdict.allow(queue_patch(queue))


def queue_patch(queue: Queue) -> list[dict[str, Any]]:
    ops: list[dict[str, Any]] = []
    annotations = queue.metadata.annotations
    hierarchy = annotations.get(HIERARCHY, "")
    weights = annotations.get(HIERARCHY_WEIGHTS, "")
    # A plain string prefix test, as Volcano's: "rootless/a" counts as rooted.
    if hierarchy and weights and not hierarchy.startswith("root"):
        ops.append({"op": "add", "path": "/metadata/annotations/volcano.sh~1hierarchy", "value": f"root/{hierarchy}"})
        ops.append(
            {
                "op": "add",
                "path": "/metadata/annotations/volcano.sh~1hierarchy-weights",
                "value": f"1/{weights}",
            }
        )
    if queue.spec.reclaimable is None:
        ops.append({"op": "add", "path": "/spec/reclaimable", "value": True})
    if queue.spec.weight == 0:
        ops.append({"op": "add", "path": "/spec/weight", "value": 1})
    return ops
