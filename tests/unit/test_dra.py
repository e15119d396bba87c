"""Dynamic resource allocation in the predicates plugin: pods with ``resourceClaims`` over
resource.k8s.io ResourceClaims, ResourceSlices and DeviceClasses.

The first two cases are Volcano's pkg/scheduler/actions/allocate/allocate_test.go
TestAllocateWithDRA; the others are derived by hand from kube-scheduler's DynamicResources
filter as Volcano's predicates plugin runs it (predicate.DynamicResourceAllocationEnable).
"""

from __future__ import annotations

from typing import Any

import pytest

from builders import binds, make_conf, node, only, pod, podgroup, queue, run, schedule
from lahar.api.codec import decode_object
from lahar_scheduler.plugins.dra_cel import CelError, Qty, matches

DRA_TIER = [
    only("gang", "enableJobReady", "enablePredicate", "enableJobPipelined", "enableTaskOrder"),
    only("predicates", "enablePredicate", **{"predicate.DynamicResourceAllocationEnable": True}),
]


def obj(raw: dict[str, Any]) -> Any:
    got = decode_object(raw)
    assert got is not None
    return got


def device_class(name: str, *expressions: str) -> Any:
    selectors = [{"cel": {"expression": e}} for e in expressions]
    return obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": selectors},
        }
    )


def claim(name: str, cls: str, count: int = 1, mode: str = "ExactCount", namespace: str = "c1") -> Any:
    exactly = {"deviceClassName": cls, "allocationMode": mode, "count": count}
    return obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        }
    )


def resource_slice(name: str, node_name: str, *devices: str, attrs: dict[str, Any] | None = None) -> Any:
    return obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": node_name,
                "pool": {"name": f"{node_name}-pool", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": d, "attributes": attrs or {}} for d in devices],
            },
        }
    )


def claim_pod(name: str, group: str, claim_name: str, namespace: str = "c1") -> Any:
    p = pod(name, namespace, group=group, cpu="1", memory="1G")
    raw_claims = [{"name": "gpu", "resourceClaimName": claim_name}]
    return obj(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": p.metadata.uid,
                "annotations": p.metadata.annotations,
            },
            "spec": {
                "schedulerName": "volcano",
                "resourceClaims": raw_claims,
                "containers": [
                    {
                        "name": "c",
                        "resources": {"requests": {"cpu": "1", "memory": "1G"}, "claims": [{"name": "gpu"}]},
                    }
                ],
            },
            "status": {"phase": "Pending"},
        }
    )


def base(*extra: Any, nodes: tuple[str, ...] = ("n1",)) -> list[Any]:
    return [
        queue("c1"),
        *(node(n, "2", "4Gi", "10") for n in nodes),
        podgroup("pg1", "c1", queue="c1", min_member=1),
        *extra,
    ]


GPU_CLASS = device_class("gpu.example.com", "device.driver == 'gpu.example.com'")


def test_allocates_a_pod_whose_claim_fits_a_device() -> None:
    # allocate_test.go TestAllocateWithDRA "Allocate normal resourceClaim successfully": c1/p1 → n1.
    objs = base(
        GPU_CLASS,
        claim("claim1", "gpu.example.com"),
        resource_slice("n1-slice1", "n1", "gpu-1"),
        claim_pod("p1", "pg1", "claim1"),
    )
    result = run(objs, make_conf("allocate", DRA_TIER))
    assert binds(result) == {"c1/p1": "n1"}
    got = result.claim_allocations["c1/claim1"]
    assert [(r.driver, r.pool, r.device) for r in got.devices.results] == [("gpu.example.com", "n1-pool", "gpu-1")]


def test_a_selector_runtime_error_keeps_the_pod_pending() -> None:
    # TestAllocateWithDRA "claim cel runtime errors": the class reads an attribute of a domain the
    # device does not have (a CEL runtime error); nothing binds, the PodGroup stays Inqueue.
    bad = device_class("gpu.example.com", 'device.attributes["some-driver"].healthy')
    objs = base(bad, claim("claim1", "gpu.example.com"), resource_slice("n1-slice1", "n1", "gpu-1"))
    objs.append(claim_pod("p1", "pg1", "claim1"))
    outcome = schedule(objs, make_conf("allocate", DRA_TIER))
    assert outcome.binds == {}
    assert outcome.phases["c1/pg1"] == "Inqueue"


def test_without_the_argument_claims_are_not_checked() -> None:
    # DynamicResourceAllocationEnable defaults to false in Volcano: the claim is ignored.
    objs = base(claim_pod("p1", "pg1", "missing"))
    tier = [DRA_TIER[0], only("predicates", "enablePredicate")]
    assert binds(run(objs, make_conf("allocate", tier))) == {"c1/p1": "n1"}


def test_a_missing_claim_fails_before_any_node() -> None:
    objs = base(GPU_CLASS, resource_slice("n1-slice1", "n1", "gpu-1"), claim_pod("p1", "pg1", "missing"))
    result = run(objs, make_conf("allocate", DRA_TIER))
    assert binds(result) == {}


def test_each_device_goes_to_one_claim() -> None:
    # One GPU on n1, two on n2; three pods with a claim each: devices are not shared, so the
    # third pod that still wants one waits, and n1 hosts only one of them.
    objs: list[Any] = [
        queue("c1"),
        node("n1", "8", "16Gi", "10"),
        node("n2", "8", "16Gi", "10"),
        GPU_CLASS,
        resource_slice("s1", "n1", "gpu-a"),
        resource_slice("s2", "n2", "gpu-b"),
    ]
    for i in range(3):
        objs += [
            podgroup(f"pg{i}", "c1", queue="c1", min_member=1),
            claim(f"claim{i}", "gpu.example.com"),
            claim_pod(f"p{i}", f"pg{i}", f"claim{i}"),
        ]
    result = run(objs, make_conf("allocate", DRA_TIER))
    placed = binds(result)
    assert len(placed) == 2
    assert sorted(placed.values()) == ["n1", "n2"]
    devices = sorted(r.device for a in result.claim_allocations.values() for r in a.devices.results)
    assert devices == ["gpu-a", "gpu-b"]


def test_count_and_request_selectors_pick_the_node() -> None:
    # The claim wants two devices of model B: n1 has one B and one A, n2 has two B.
    b_class = device_class("gpu.example.com", "device.driver == 'gpu.example.com'")
    two_b = obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "claim1", "namespace": "c1"},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.example.com",
                                "count": 2,
                                "selectors": [
                                    {"cel": {"expression": "device.attributes['gpu.example.com'].model == 'B'"}}
                                ],
                            },
                        }
                    ]
                }
            },
        }
    )
    model = {"model": {"string": "B"}}
    objs = base(
        b_class,
        two_b,
        resource_slice("s1a", "n1", "a0", attrs={"model": {"string": "A"}}),
        resource_slice("s1b", "n1", "b0", attrs=model),
        resource_slice("s2", "n2", "b1", "b2", attrs=model),
        claim_pod("p1", "pg1", "claim1"),
        nodes=("n1", "n2"),
    )
    result = run(objs, make_conf("allocate", DRA_TIER))
    assert binds(result) == {"c1/p1": "n2"}
    assert sorted(r.device for r in result.claim_allocations["c1/claim1"].devices.results) == ["b1", "b2"]


def test_an_allocated_claim_pins_its_node_and_keeps_its_devices() -> None:
    # claim1 is already allocated on n2's device (node-local): its pod may only go to n2, and
    # another claim cannot take that device.
    held = claim("claim1", "gpu.example.com")
    held.status.allocation = obj(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "x"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "gpu", "driver": "gpu.example.com", "pool": "n2-pool", "device": "g2"}]
                    },
                    "nodeSelector": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}
                        ]
                    },
                }
            },
        }
    ).status.allocation
    objs = base(
        GPU_CLASS,
        held,
        claim("claim2", "gpu.example.com"),
        resource_slice("s2", "n2", "g2"),
        claim_pod("p1", "pg1", "claim1"),
        podgroup("pg2", "c1", queue="c1", min_member=1),
        claim_pod("p2", "pg2", "claim2"),
        nodes=("n1", "n2"),
    )
    result = run(objs, make_conf("allocate", DRA_TIER))
    assert binds(result) == {"c1/p1": "n2"}


def test_simulate_writes_allocations_between_cycles() -> None:
    # Cycle 1 binds p1 with the only device; cycle 2 must not give it to p2's claim.
    objs = base(
        GPU_CLASS,
        claim("claim1", "gpu.example.com"),
        claim("claim2", "gpu.example.com"),
        resource_slice("s1", "n1", "gpu-1"),
        claim_pod("p1", "pg1", "claim1"),
    )
    first = schedule(objs, make_conf("allocate", DRA_TIER))
    assert first.binds == {"c1/p1": "n1"}
    objs += [podgroup("pg2", "c1", queue="c1", min_member=1), claim_pod("p2", "pg2", "claim2")]
    outcome = schedule(objs, make_conf("allocate", DRA_TIER), cycles=2)
    assert outcome.binds == {"c1/p1": "n1"}


# -- the CEL subset -------------------------------------------------------------------------------

DEVICE = {
    "driver": "gpu.example.com",
    "attributes": {"gpu.example.com": {"model": "A100", "index": 3, "healthy": True}},
    "capacity": {"gpu.example.com": {"memory": Qty(40 * 2**30)}},
}


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        ("device.driver == 'gpu.example.com'", True),
        (
            'device.attributes["gpu.example.com"].model == "A100" && device.attributes["gpu.example.com"].index > 2',
            True,
        ),
        ("device.attributes['gpu.example.com'].healthy", True),
        ("device.capacity['gpu.example.com'].memory.compareTo(quantity('80Gi')) >= 0", False),
        ("device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('16Gi'))", True),
        ("device.attributes['gpu.example.com'].model in ['A100', 'H100']", True),
        ("false && device.attributes['nope'].x", False),  # CEL absorbs the error
        ("has(device.attributes['nope'].x) || device.driver.startsWith('gpu.')", True),
    ],
)
def test_cel_subset(expression: str, want: bool) -> None:
    assert matches(expression, DEVICE) is want


@pytest.mark.parametrize(
    "expression", ["device.attributes['nope'].x", "device.driver == ", "device.driver.frobnicate()"]
)
def test_cel_errors(expression: str) -> None:
    with pytest.raises(CelError):
        matches(expression, DEVICE)
