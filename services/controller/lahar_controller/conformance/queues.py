"""Runner for the queue-state-machine cases: Volcano's queue state handlers."""

from __future__ import annotations

from typing import Any

from lahar_controller import queues
from lahar_controller.conformance.ctl_expect import compare, find, key_of

PENDING: dict[str, str] = {}


def check(case: dict[str, Any]) -> list[str]:
    objects = case["given"]["objects"]
    step, expect = case["step"], case["expect"]
    queue = find(objects, "Queue", step["queue"])
    if step["kind"] == "queueHandlerFor":
        return compare(
            {"handlerState": expect["handlerState"]}, {"handlerState": queues.handler_for(queues.stored_state(queue))}
        )
    if step["kind"] != "queueAction":
        return [f"unknown step kind {step['kind']!r}"]
    name = key_of(queue)[2]
    podgroups = [o for o in objects if o.get("kind") == "PodGroup" and (o.get("spec") or {}).get("queue") == name]
    every = {key_of(o)[2]: o for o in objects if o.get("kind") == "Queue"}
    plan = queues.plan_with(step["handlerState"], queue, step["action"], podgroups, every)
    return compare({"queueState": expect["queueState"]}, {"queueState": plan.state})
