"""``/openapi/v3`` (and an empty ``/openapi/v2``): enough OpenAPI for ``kubectl apply|create``
to validate without ``--validate=false``.

kubectl asks the server's OpenAPI v3 documents whether the PATCH of a kind takes the
``fieldValidation`` query parameter; when it does, kubectl leaves validation to the server (as with
kube-apiserver since 1.27) instead of downloading schemas to check objects itself.  So each
group-version document lists, per resource, its collection and item paths with the operations
carrying ``x-kubernetes-group-version-kind`` and that parameter.  Schemas are not served: the
emulator does not validate fields it does not know (see README "What it does not emulate").
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from lahar.sim.resources import Registry, ResourceType

Obj = dict[str, Any]
_PARAMS = [
    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
]


def root(registry: Registry) -> Obj:
    """``GET /openapi/v3``: one entry per group-version, each naming its document's URL."""
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            name = _gv_path(group, version)
            doc = group_version(registry, group, version)
            digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16].upper()
            paths[name] = {"serverRelativeURL": f"/openapi/v3/{name}?hash={digest}"}
    return {"paths": paths}


def group_version(registry: Registry, group: str, version: str) -> Obj | None:
    """``GET /openapi/v3/api/v1`` or ``/openapi/v3/apis/G/V``; None if the server has no such GV."""
    types = registry.in_group_version(group, version)
    if not types:
        return None
    paths: Obj = {}
    for t in types:
        base = f"/{_gv_path(group, version)}"
        prefix = f"{base}/namespaces/{{namespace}}/{t.plural}" if t.namespaced else f"{base}/{t.plural}"
        paths[prefix] = {"post": _operation(t, "create"), "get": _operation(t, "list")}
        paths[f"{prefix}/{{name}}"] = {
            "get": _operation(t, "read"),
            "put": _operation(t, "replace"),
            "patch": _operation(t, "patch"),
            "delete": _operation(t, "delete"),
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (lahar sim)", "version": "v1.32.0-lahar-sim"},
        "paths": paths,
        "components": {"schemas": {}},
    }


def swagger_v2() -> Obj:
    """``GET /openapi/v2``: a valid document without definitions, for clients that read it."""
    return {"swagger": "2.0", "info": {"title": "Kubernetes (lahar sim)", "version": "v1.32.0-lahar-sim"}, "paths": {}}


def _operation(t: ResourceType, action: str) -> Obj:
    op: Obj = {
        "operationId": f"{action}{t.kind}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version, "kind": t.kind},
        "responses": {"200": {"description": "OK"}},
    }
    if action in ("create", "replace", "patch"):
        op["parameters"] = _PARAMS
    return op


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"
