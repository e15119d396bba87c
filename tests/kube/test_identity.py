"""deploy/'s ServiceAccounts and RBAC on Kubernetes itself: each service's token may do what its
ClusterRole grants and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from lahar.kube import identity
from lahar.kube.api import Api, ApiError
from lahar.kube.control_plane import ControlPlane

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NS = "lahar-system"


def _status(api: Api, method: str, path: str) -> int:
    try:
        api.call(method, path)
    except ApiError as exc:
        return exc.status
    return 200


def test_access_objects_come_in_dependency_order() -> None:
    kinds = [o["kind"] for o in identity.access_objects(DEPLOY)]
    assert kinds[0] == "Namespace"
    assert kinds.index("ClusterRoleBinding") > kinds.index("ClusterRole") > kinds.index("ServiceAccount")
    assert identity.collection({"kind": "ServiceAccount", "metadata": {"namespace": NS}}) == (
        f"/api/v1/namespaces/{NS}/serviceaccounts"
    )


def test_each_service_gets_only_what_its_cluster_role_grants(kube_control_plane: ControlPlane) -> None:
    admin = kube_control_plane.api
    objects = identity.access_objects(DEPLOY)
    identity.apply(admin, objects)
    identity.apply(admin, objects)  # again: replaced, not an error
    ca = admin.ca

    binder = Api(admin.url, identity.token(admin, NS, "lahar-binder"), ca)
    assert _status(binder, "GET", "/api/v1/namespaces/default/pods/absent") == 404  # allowed, not found
    assert _status(binder, "GET", "/api/v1/nodes") == 403
    assert _status(binder, "DELETE", "/api/v1/namespaces/default/pods/absent") == 403

    cache = Api(admin.url, identity.token(admin, NS, "lahar-cache"), ca)
    assert _status(cache, "GET", "/api/v1/nodes") == 200
    assert _status(cache, "POST", "/api/v1/namespaces/default/pods/absent/binding") == 403


@pytest.mark.parametrize("kind", ["Deployment", "Service"])
def test_only_access_kinds_are_applied(kind: str) -> None:
    assert kind not in {o["kind"] for o in identity.access_objects(DEPLOY)}
