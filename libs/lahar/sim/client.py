"""Binding a pod with the official ``kubernetes`` client.

The API server answers ``POST .../pods/NAME/binding`` with 201 and a ``Status`` body, which the
generated client tries to decode as a ``V1Binding`` and fails on (kubernetes-client/python
issues 547 and 825).  ``bind_pod`` asks for the raw response instead and reads the Status
itself, so Lahar's code gets: None on success, ``ApiException`` (status 409 when the pod is
already bound, 404 when it is missing) otherwise.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kubernetes import client
from kubernetes.client.exceptions import ApiException


def binding_body(
    namespace: str, name: str, node: str, uid: str | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def bind_pod(
    api_client: client.ApiClient,
    namespace: str,
    name: str,
    node: str,
    *,
    uid: str | None = None,
    annotations: dict[str, str] | None = None,
    timeout: float | None = None,
) -> None:
    """Bind ``namespace/name`` to ``node``; ``uid`` makes the binding conditional on the pod's uid."""
    # The generated signature wants a V1Binding and returns one; with _preload_content=False
    # it takes our dict and returns the raw urllib3 response, hence Any.
    core: Any = client.CoreV1Api(api_client)
    response = core.create_namespaced_pod_binding(
        name,
        namespace,
        binding_body(namespace, name, node, uid, annotations),
        _preload_content=False,
        _request_timeout=timeout,
    )
    try:
        data = response.data
        status = msgspec.json.decode(data) if data else {}
    except msgspec.DecodeError:
        return  # a 2xx without a readable body is still a success
    finally:
        response.release_conn()
    if isinstance(status, dict) and status.get("kind") == "Status" and status.get("status") == "Failure":
        raise ApiException(status=int(status.get("code") or 500), reason=str(status.get("reason") or ""))
