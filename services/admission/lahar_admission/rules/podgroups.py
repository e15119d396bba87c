"""``/podgroups/validate`` and ``/podgroups/mutate``."""

from __future__ import annotations

from lahar_admission.review import Verdict
from lahar_admission.rules.common import CREATE, Ctx, decode, expect_resource
from lahar_admission.types import PodGroup, both_tiers
from lahar_admission.view import not_found

QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
_BOTH = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously."


def _gvr(ctx: Ctx) -> None:
    expect_resource(ctx.request, "scheduling.volcano.sh", "v1beta1", "podgroups")


def validate(ctx: Ctx) -> Verdict:
    _gvr(ctx)
    pg = decode(ctx.request.object, PodGroup)
    if ctx.op != CREATE:
        return Verdict.deny(f"unsupported operation {ctx.op}")
    errs = [m for m in (_queue_error(pg.spec.queue, ctx), _topology_error(pg)) if m]
    return Verdict.deny("; ".join(errs)) if errs else Verdict.allow()


def _queue_error(name: str, ctx: Ctx) -> str:
    if not name:
        return ""
    queue = ctx.view.queue(name)
    if queue is None:
        return f"unable to find queue: {not_found('queue.scheduling.volcano.sh', name)}"
    if queue.status.state != "Open":
        return (
            "can only submit PodGroup to queue with state `Open`, "
            f"queue `{queue.metadata.name}` status is `{queue.status.state}`."
        )
    return ""


def _topology_error(pg: PodGroup) -> str:
    errs = [_BOTH] if both_tiers(pg.spec.network_topology) else []
    for policy in pg.spec.sub_group_policy:
        if both_tiers(policy.network_topology):
            errs.append(f"in subGroupPolicy '{policy.name}': {_BOTH}")
            break
    return " ".join(errs)


def mutate(ctx: Ctx) -> Verdict:
    _gvr(ctx)
    pg = decode(ctx.request.object, PodGroup)
    if ctx.op != CREATE:
        return Verdict.deny(f"invalid operation `{ctx.op}`, expect operation to be `CREATE`")
    if pg.spec.queue != "default":
        return Verdict.allow()
    ns = ctx.view.namespace(pg.metadata.namespace or ctx.request.namespace)
    # A namespace that can't be read, or has no annotation, leaves the podgroup as it is.
    if ns is None or QUEUE_NAME_ANNOTATION not in ns.metadata.annotations:
        return Verdict.allow()
    return Verdict.allow(
        [{"op": "add", "path": "/spec/queue", "value": ns.metadata.annotations[QUEUE_NAME_ANNOTATION]}]
    )
