"""The fidelity sequence, in order: the steps of each module, then the namespace's deletion.
``run`` plays it on two servers and cleans up after both.
"""

from __future__ import annotations

from lahar.sim.fidelity.client import Client, compare_servers
from lahar.sim.fidelity.compare import Known, Record, Verdict
from lahar.sim.fidelity.steps import admission, custom, dra, objects, pods
from lahar.sim.fidelity.steps.common import LABEL, MUTATING, SCHED, WEBHOOKS, Steps


def delete_namespace(c: Client) -> Record:
    reply = c.call("DELETE", f"/api/v1/namespaces/{c.run_id}")
    body = reply.body if isinstance(reply.body, dict) else {}
    return {"code": reply.code, "kind": body.get("kind"), "phase": body.get("status", {}).get("phase")}


STEPS: Steps = [
    *objects.STEPS,
    *pods.STEPS,
    *custom.STEPS,
    *admission.STEPS,
    *dra.STEPS,
    ("namespace: delete", delete_namespace),
]


def cleanup(c: Client) -> None:
    """Remove what a run made outside its namespace, and the namespace (whatever the steps did)."""
    selector = {"labelSelector": f"{LABEL}={c.run_id}"}
    for path in (WEBHOOKS, MUTATING, f"/apis/{SCHED}/queues", *dra.CLUSTER_SCOPED):
        c.call("DELETE", path, params=selector)
    hook = c.state.pop("hook", None)
    if hook is not None:
        hook.close()
    c.call("DELETE", f"/api/v1/namespaces/{c.run_id}")


def run(left: Client, right: Client, known: list[Known]) -> list[Verdict]:
    """The whole sequence on both servers, compared; what the runs made is removed whatever happens."""
    try:
        verdicts, _, _ = compare_servers(left, right, STEPS, known)
    finally:
        for client in (left, right):
            cleanup(client)
    return verdicts
