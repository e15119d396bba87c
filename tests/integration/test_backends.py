"""The ``cluster`` fixture itself: on the real control plane a service's identity is refused what
deploy/ does not grant it, and the fixture sees every such refusal (it fails the test that caused
one); the emulator authorizes nobody."""

from __future__ import annotations

import pytest

from lahar.adapters.kube import PermanentKubeError

from .backends import Cluster


async def test_a_call_outside_a_role_is_refused_and_seen(cluster: Cluster) -> None:
    binder = cluster.client("binder")  # deploy/ lets the binder bind and evict, not list nodes
    if cluster.backend == "sim":
        await binder.list("nodes")
        assert cluster.new_denials() == []
        return
    with pytest.raises(PermanentKubeError) as error:
        await binder.list("nodes")
    assert error.value.status == 403
    refused = cluster.expect_denials()
    assert refused == ["system:serviceaccount:lahar-system:lahar-binder list /api/v1/nodes?limit=5000"], refused


async def test_a_new_namespace_takes_pods_at_once(cluster: Cluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    await cluster.admin.create("pods", cluster.ns, pod)


async def test_added_nodes_are_ready_and_go_with_the_test(cluster: Cluster) -> None:
    names = await cluster.add_nodes("2:cpu=4,memory=8Gi,name=added")
    assert names == ["added-0001", "added-0002"]
    assert len((await cluster.admin.list("nodes"))[0]) >= 2 + 6
