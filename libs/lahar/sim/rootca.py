"""The root CA publisher of kube-controller-manager: every namespace gets a ``kube-root-ca.crt``
ConfigMap.  Here it is made with the namespace, in the same request (on a real cluster it
follows within moments), so a client never sees a namespace without it.  The emulator serves
plain http and has no CA of its own: the bundle is a CA made for this emulator that signs
nothing, there because clients and pod volumes name the ConfigMap, not to be trusted.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from lahar.infra.certs import make_pair

if TYPE_CHECKING:
    from lahar.sim.api import Api

NAME = "kube-root-ca.crt"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as "
    "the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of "
    "Kubernetes clusters."
)


@cache
def ca_bundle() -> str:
    return make_pair(["127.0.0.1"], ca_name="lahar-sim-ca").ca.decode()


class RootCAPublisher:
    def __init__(self, api: Api) -> None:
        self.api = api

    def publish(self, namespace: str) -> None:
        configmaps = self.api.rtype("", "configmaps")
        if self.api.store.get(self.api.rtype("", "namespaces"), None, namespace) is None:
            return
        if self.api.store.get(configmaps, namespace, NAME) is not None:
            return
        meta: dict[str, Any] = {
            "name": NAME,
            "namespace": namespace,
            "annotations": {"kubernetes.io/description": DESCRIPTION},
        }
        self.api.seed_object(
            configmaps, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"ca.crt": ca_bundle()}}
        )
