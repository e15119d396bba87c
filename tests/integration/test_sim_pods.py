"""pods/binding, pods/eviction, the simulated kubelet and graceful deletion."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lahar.sim import bind_pod


def test_bind_pod_helper_and_conflict(core: client.CoreV1Api, ns: str, pod) -> None:
    created = core.create_namespaced_pod(ns, pod("b"))
    bind_pod(core.api_client, ns, "b", "node-0002", uid=created.metadata.uid, annotations={"lahar.io/session": "7"})
    bound = core.read_namespaced_pod("b", ns)
    assert bound.spec.node_name == "node-0002"
    assert bound.metadata.annotations == {"lahar.io/session": "7"}
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    with pytest.raises(ApiException) as err:
        bind_pod(core.api_client, ns, "b", "node-0003")
    assert err.value.status == 409
    body = json.loads(err.value.body)
    assert body["reason"] == "Conflict"
    assert (
        body["message"]
        == 'Operation cannot be fulfilled on pods/binding "b": pod b is already assigned to node "node-0002"'
    )


def test_bind_missing_pod_is_404(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        bind_pod(core.api_client, ns, "ghost", "node-0001")
    assert err.value.status == 404


def test_bind_with_wrong_uid_is_conflict(core: client.CoreV1Api, ns: str, pod) -> None:
    core.create_namespaced_pod(ns, pod("u"))
    with pytest.raises(ApiException) as err:
        bind_pod(core.api_client, ns, "u", "node-0001", uid="not-the-uid")
    assert err.value.status == 409


def test_generated_client_cannot_decode_the_binding_reply(core: client.CoreV1Api, ns: str, pod) -> None:
    """Why bind_pod exists: the server's 201 Status is real, and the generated client chokes on it."""
    core.create_namespaced_pod(ns, pod("g"))
    body = {"metadata": {"name": "g"}, "target": {"kind": "Node", "name": "node-0001"}}
    with pytest.raises(Exception):  # noqa: B017 - whatever the generated client raises
        core.create_namespaced_pod_binding("g", ns, body)
    assert core.read_namespaced_pod("g", ns).spec.node_name == "node-0001"


def test_legacy_bindings_resource(core: client.CoreV1Api, ns: str, pod, sim) -> None:
    import httpx

    core.create_namespaced_pod(ns, pod("l"))
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        reply = http.post(
            f"/api/v1/namespaces/{ns}/bindings",
            json={"metadata": {"name": "l"}, "target": {"kind": "Node", "name": "node-0004"}},
        )
    assert reply.status_code == 201 and reply.json()["status"] == "Success"
    assert core.read_namespaced_pod("l", ns).spec.node_name == "node-0004"


def test_kubelet_phases_pending_running_succeeded(core: client.CoreV1Api, ns: str, pod, wait_for) -> None:
    core.create_namespaced_pod(ns, pod("k", annotations={"sim.lahar.io/run-seconds": "0.3"}))
    assert core.read_namespaced_pod("k", ns).status.phase == "Pending"
    bind_pod(core.api_client, ns, "k", "node-0001")
    running = wait_for(lambda: (p := core.read_namespaced_pod("k", ns)).status.phase == "Running" and p, what="Running")
    assert running.status.pod_ip and running.status.host_ip and running.status.start_time
    assert running.status.container_statuses[0].state.running is not None
    done = wait_for(
        lambda: (p := core.read_namespaced_pod("k", ns)).status.phase == "Succeeded" and p, what="Succeeded"
    )
    assert done.status.container_statuses[0].state.terminated.exit_code == 0


def test_kubelet_failed_exit_code(core: client.CoreV1Api, ns: str, pod, wait_for) -> None:
    core.create_namespaced_pod(
        ns, pod("f", annotations={"sim.lahar.io/run-seconds": "0.1", "sim.lahar.io/exit-code": "3"})
    )
    bind_pod(core.api_client, ns, "f", "node-0001")
    failed = wait_for(lambda: (p := core.read_namespaced_pod("f", ns)).status.phase == "Failed" and p, what="Failed")
    assert failed.status.container_statuses[0].state.terminated.exit_code == 3


def test_without_run_seconds_it_runs_on(core: client.CoreV1Api, ns: str, pod, wait_for) -> None:
    core.create_namespaced_pod(ns, pod("forever"))
    bind_pod(core.api_client, ns, "forever", "node-0001")
    wait_for(lambda: core.read_namespaced_pod("forever", ns).status.phase == "Running", what="Running")


def test_eviction_terminating_then_gone(core: client.CoreV1Api, ns: str, pod, wait_for) -> None:
    core.create_namespaced_pod(ns, pod("e", termination_grace_period_seconds=1))
    bind_pod(core.api_client, ns, "e", "node-0001")
    wait_for(lambda: core.read_namespaced_pod("e", ns).status.phase == "Running", what="Running")
    core.create_namespaced_pod_eviction(
        "e", ns, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "e", "namespace": ns}}
    )
    terminating = core.read_namespaced_pod("e", ns)
    assert terminating.metadata.deletion_timestamp is not None
    assert terminating.metadata.deletion_grace_period_seconds == 1

    def gone() -> bool:
        try:
            core.read_namespaced_pod("e", ns)
        except ApiException as exc:
            return exc.status == 404
        return False

    wait_for(gone, timeout=5, what="the evicted pod to go")


def test_eviction_of_missing_pod_is_404(core: client.CoreV1Api, ns: str) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod_eviction("none", ns, {"metadata": {"name": "none"}})
    assert err.value.status == 404


def test_delete_grace_period_zero_is_immediate(core: client.CoreV1Api, ns: str, pod, wait_for) -> None:
    core.create_namespaced_pod(ns, pod("z"))
    bind_pod(core.api_client, ns, "z", "node-0001")
    core.delete_namespaced_pod("z", ns, grace_period_seconds=0)
    with pytest.raises(ApiException):
        core.read_namespaced_pod("z", ns)


def test_delete_bound_pod_waits_for_grace(core: client.CoreV1Api, ns: str, pod, wait_for) -> None:
    core.create_namespaced_pod(ns, pod("d"))
    bind_pod(core.api_client, ns, "d", "node-0001")
    core.delete_namespaced_pod("d", ns, grace_period_seconds=1)
    assert core.read_namespaced_pod("d", ns).metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as err:
        bind_pod(core.api_client, ns, "d", "node-0002")
    assert err.value.status == 409

    def gone() -> bool:
        return not [p for p in core.list_namespaced_pod(ns).items if p.metadata.name == "d"]

    wait_for(gone, timeout=5, what="deletion after the grace period")


def test_priority_class_resolves_to_priority(
    api_client: client.ApiClient, core: client.CoreV1Api, ns: str, pod
) -> None:
    client.SchedulingV1Api(api_client).create_priority_class({"metadata": {"name": f"pc-{ns}"}, "value": 4242})
    created = core.create_namespaced_pod(ns, pod("pri", priority_class_name=f"pc-{ns}"))
    assert created.spec.priority == 4242
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(ns, pod("nopri", priority_class_name="no-such-class"))
    assert err.value.status == 403 and "no PriorityClass with name no-such-class" in err.value.body
