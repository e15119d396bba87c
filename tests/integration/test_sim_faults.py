"""Injected latency and errors, from the Python API and the admin endpoint."""

from __future__ import annotations

import time

import httpx
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from lahar.sim import bind_pod
from lahar.sim.faults import Faults, FaultSpecError, apply_specs


def test_injected_binding_errors(sim, core: client.CoreV1Api, ns: str, pod) -> None:
    core.create_namespaced_pod(ns, pod("x"))
    sim.faults.set_error_rate("binding", 1.0, codes=(429,))
    with pytest.raises(ApiException) as err:
        bind_pod(core.api_client, ns, "x", "node-0001")
    assert err.value.status == 429 and err.value.headers["Retry-After"] == "1"
    sim.faults.set_error_rate("binding", 1.0, codes=(500,))
    with pytest.raises(ApiException) as err:
        bind_pod(core.api_client, ns, "x", "node-0001")
    assert err.value.status == 500
    assert core.read_namespaced_pod("x", ns).spec.node_name is None  # nothing was bound
    sim.faults.clear()
    bind_pod(core.api_client, ns, "x", "node-0001")


def test_partial_error_rate(sim, core: client.CoreV1Api, ns: str) -> None:
    sim.faults.set_error_rate("get", 0.5)
    outcomes = []
    for _ in range(60):
        try:
            core.read_namespace(ns)
            outcomes.append(True)
        except ApiException as exc:
            assert exc.status in (429, 500)
            outcomes.append(False)
    assert 5 < outcomes.count(False) < 55


def test_injected_latency(sim, core: client.CoreV1Api, ns: str) -> None:
    sim.faults.set_latency("list", 0.2)
    began = time.monotonic()
    core.list_namespaced_pod(ns)
    assert time.monotonic() - began >= 0.2
    began = time.monotonic()
    core.read_namespace(ns)  # other verbs are not slowed
    assert time.monotonic() - began < 0.2


def test_admin_endpoint(sim, ns: str) -> None:
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        reply = http.put("/lahar-sim/v1/faults", json={"errorRate": {"create": 1.0}, "errorCodes": {"create": [500]}})
        assert reply.status_code == 200 and reply.json()["errorRate"] == {"create": 1.0}
        assert http.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "c"}}).status_code == 500
        http.put("/lahar-sim/v1/faults", json={})
        assert http.post(f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "c"}}).status_code == 201
        bad = http.put("/lahar-sim/v1/faults", json={"latency": {"bogus": 1}})
        assert bad.status_code == 400 and "bogus" in bad.json()["message"]


def test_fault_specs() -> None:
    faults = Faults()
    apply_specs(faults, ["binding=50ms", "*=0.5s"], ["binding=0.01", "create=0.2:429"])
    assert faults.latency == {"binding": 0.05, "*": 0.5}
    assert faults.error_rate == {"binding": 0.01, "create": 0.2} and faults.error_codes["create"] == (429,)
    for bad in (["binding"], ["bind=1s"], ["binding=fast"]):
        with pytest.raises(FaultSpecError):
            apply_specs(Faults(), bad, [])
    with pytest.raises(FaultSpecError, match="between 0 and 1"):
        apply_specs(Faults(), [], ["binding=2"])
