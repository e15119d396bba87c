"""The cache mirrors the kinds the controller reads, and tolerates a kind the API server does not
serve: the mirror is sealed without it, and once its CRD is installed its objects are mirrored."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from lahar.adapters.mirror import Mirror

from .services import kube_for, poll, stack

pytestmark = pytest.mark.asyncio

CRONJOBS = "cronjobs.batch.volcano.sh"


def _crd() -> dict[str, Any]:
    version = {
        "name": "v1alpha1",
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        "subresources": {"status": {}},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRONJOBS},
        "spec": {
            "group": "batch.volcano.sh",
            "scope": "Namespaced",
            "versions": [version],
            "names": {"kind": "CronJob", "listKind": "CronJobList", "plural": "cronjobs", "singular": "cronjob"},
        },
    }


def _cronjob(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "CronJob",
        "metadata": {"name": "every-minute", "namespace": ns},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"tasks": []}}},
    }


async def test_a_kind_not_served_is_skipped_until_its_crd_is_installed(
    make_sim: Any, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, redis_client: Any
) -> None:
    sim = make_sim(nodes=["1:cpu=4"])
    crds = client.ApiextensionsV1Api(sim.api_client())
    with contextlib.suppress(ApiException):
        crds.delete_custom_resource_definition(CRONJOBS)
    kube = kube_for(sim.url)
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await s.cache(unserved_recheck=0.1)  # ready: sealed although cronjobs answer 404
        crds.create_custom_resource_definition(_crd())
        ns = "cron"
        await kube.create("namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})

        async def created() -> bool:
            try:
                await kube.create("cronjobs", ns, _cronjob(ns))
            except Exception:  # the CRD's resources are served a moment after it is created
                return False
            return True

        await poll(created, timeout=10)
        mirror = Mirror(redis_client, s.names.redis_prefix)
        await poll(lambda: mirror.get("cronjobs", ns, "every-minute"), timeout=10)
    await kube.close()


async def test_pod_disruption_budgets_are_served_and_mirrored(
    make_sim: Any, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, redis_client: Any
) -> None:
    """The emulator serves policy/v1 PodDisruptionBudgets (with their status), and the cache
    mirrors them for the pdb plugin; the scheduler's snapshot reads them from the mirror."""
    from lahar.api.objects import PodDisruptionBudget
    from lahar_scheduler.live import LiveView

    sim = make_sim(nodes=["1:cpu=4"])
    policy = client.PolicyV1Api(sim.api_client())
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 1},
    }
    created = policy.create_namespaced_pod_disruption_budget("default", pdb)
    assert created.metadata.resource_version
    status = {"status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}}
    policy.patch_namespaced_pod_disruption_budget_status("web", "default", status)
    async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
        await s.cache()
        mirror = Mirror(redis_client, s.names.redis_prefix)
        await poll(lambda: mirror.get("poddisruptionbudgets", "default", "web"), timeout=10)
        state = await mirror.load(["poddisruptionbudgets"])
        view = LiveView()
        view.load(state, 0.0)
        held = view.snapshot.pdbs["default/web"]
        assert isinstance(held, PodDisruptionBudget)
        assert held.status.disruptions_allowed == 1
        assert held.spec.selector is not None and held.spec.selector.match_labels == {"app": "web"}
