"""Each Lahar service with its own identity on the real control plane: the ServiceAccounts and
RBAC objects of deploy/ applied as they are, and a kubeconfig per ServiceAccount with a token
from the TokenRequest API.  A permission missing from deploy/ then fails on Kubernetes itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lahar.api import safeyaml
from lahar.kube.api import Api, ApiError

Obj = dict[str, Any]
RBAC = "/apis/rbac.authorization.k8s.io/v1"
# Applied in this order: what a later kind refers to exists first.
KINDS = ("Namespace", "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
TOKEN_SECONDS = 24 * 3600


def access_objects(deploy_dir: Path) -> list[Obj]:
    """The Namespace, ServiceAccounts and RBAC objects of every manifest in ``deploy_dir``."""
    found: list[Obj] = []
    for path in sorted(deploy_dir.glob("*.yaml")):
        for doc in safeyaml.load_all(path.read_text(), str(path)):
            if isinstance(doc, dict) and doc.get("kind") in KINDS:
                found.append(doc)
    return sorted(found, key=lambda o: KINDS.index(o["kind"]))


CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding")


def collection(obj: Obj) -> str:
    """The URL path of the collection ``obj`` is created in."""
    kind = obj["kind"]
    plural = {"Namespace": "namespaces", "ServiceAccount": "serviceaccounts"}.get(kind, kind.lower() + "s")
    base = "/api/v1" if kind in ("Namespace", "ServiceAccount") else RBAC
    if kind in CLUSTER_SCOPED:
        return f"{base}/{plural}"
    return f"{base}/namespaces/{obj['metadata']['namespace']}/{plural}"


def apply(api: Api, objects: list[Obj]) -> None:
    """Create each object, or replace the one of that name (a manifest changed since)."""
    for obj in objects:
        if not api.create(collection(obj), obj):
            api.call("PUT", f"{collection(obj)}/{obj['metadata']['name']}", obj)


def token(api: Api, namespace: str, service_account: str, seconds: int = TOKEN_SECONDS) -> str:
    """A bound token for the ServiceAccount, as the kubelet would project into its pod."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}
    reply = api.call("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token", request)
    value = reply.get("status", {}).get("token")
    if not isinstance(value, str) or not value:
        raise ApiError(500, f"TokenRequest for {namespace}/{service_account} returned no token")
    return value
