"""A pod's quota usage (what Volcano puts in a PodGroup's minResources)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from lahar.api.quota import pod_quota_usage, pod_requests, quantity_text, times, to_text


def pod(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": containers, "initContainers": init or [], **spec}, "status": {"phase": "Pending"}}


def c(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"resources": {"requests": requests or {}, "limits": limits or {}}, **extra}


def test_compute_resources_under_both_names_and_limits() -> None:
    usage = to_text(pod_quota_usage(pod([c({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1"}), c({"cpu": "250m"})])))
    assert usage == {
        "count/pods": "1",
        "pods": "1",
        "cpu": "750m",
        "requests.cpu": "750m",
        "memory": "1Gi",
        "requests.memory": "1Gi",
        "limits.cpu": "1",
    }


def test_a_limit_without_request_is_the_request() -> None:
    assert pod_requests(pod([c(limits={"cpu": "2"})])) == {"cpu": Fraction(2)}


def test_extended_and_hugepages() -> None:
    usage = pod_quota_usage(pod([c({"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi"})]))
    assert usage["nvidia.com/gpu"] == usage["requests.nvidia.com/gpu"] == 2
    assert usage["hugepages-2Mi"] == usage["requests.hugepages-2Mi"] == 4 * 2**20


def test_init_containers_take_the_peak_and_sidecars_add() -> None:
    plain = pod([c({"cpu": "1"})], init=[c({"cpu": "3"})])
    assert pod_requests(plain)["cpu"] == 3
    sidecar = pod([c({"cpu": "1"})], init=[c({"cpu": "500m"}, restartPolicy="Always"), c({"cpu": "1"})])
    # containers 1 + sidecar 0.5 = 1.5; the plain init container runs beside the sidecar: 1.5
    assert pod_requests(sidecar)["cpu"] == Fraction(3, 2)


def test_overhead_adds_to_requests() -> None:
    assert pod_requests(pod([c({"cpu": "1"})], overhead={"cpu": "100m"}))["cpu"] == Fraction(11, 10)


def test_finished_pod_counts_only_as_an_object() -> None:
    done = pod([c({"cpu": "1"})])
    done["status"]["phase"] = "Succeeded"
    assert pod_quota_usage(done) == {"count/pods": 1}


def test_times_and_canonical_text() -> None:
    usage = times(pod_quota_usage(pod([c({"cpu": "1", "memory": "2Gi"})])), 3)
    assert to_text(usage)["cpu"] == "3" and to_text(usage)["memory"] == "6Gi" and to_text(usage)["pods"] == "3"
    assert quantity_text(Fraction(3, 2)) == "1500m"
    assert quantity_text(Fraction(1, 3)) == "333333334n"
    assert quantity_text(Fraction(1000)) == "1000"
