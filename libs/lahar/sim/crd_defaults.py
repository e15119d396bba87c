"""Structural defaulting of custom resources: the ``default`` values of a CRD's openAPIV3Schema,
applied on every write, as the API server does (pruning and validation are not emulated).

Volcano's CRDs are served with a *skeleton* of their schemas: only the branches that lead to a
default, kept in ``data/volcano_crd_defaults.json`` (Volcano's full manifests are over 1 MB,
too slow to load at every emulator start).  ``skeleton()`` makes it from the manifests in
``lahar/kube/crds``; a test checks that the two agree.
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from typing import Any

Obj = dict[str, Any]
DEFAULTS_FILE = "volcano_crd_defaults.json"


def apply_defaults(value: Any, schema: Obj | None) -> None:
    """Fill in, in place, every missing property of ``value`` that ``schema`` gives a default."""
    if not schema:
        return
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                apply_defaults(value[name], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for item in value.values():
                apply_defaults(item, extra)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(item, schema["items"])


def skeleton(schema: Any) -> Obj | None:
    """The part of ``schema`` that leads to a default (None when nothing does)."""
    if not isinstance(schema, dict):
        return None
    out: Obj = {}
    if "default" in schema:
        out["default"] = schema["default"]
    props = {k: s for k, s in ((k, skeleton(v)) for k, v in (schema.get("properties") or {}).items()) if s}
    if props:
        out["properties"] = props
    for key in ("items", "additionalProperties"):
        sub = skeleton(schema.get(key))
        if sub:
            out[key] = sub
    if not out:
        return None
    if "type" in schema:
        out["type"] = schema["type"]
    if out.get("type") == "object":
        out["x-kubernetes-preserve-unknown-fields"] = True  # the emulator keeps unknown fields
    return out


def skeletons(crds: list[Obj]) -> dict[str, Obj]:
    """``{"<crd name>/<version>": skeleton}`` for every served version that has defaults."""
    out = {}
    for crd in crds:
        for version in crd["spec"]["versions"]:
            sk = skeleton(((version.get("schema") or {}).get("openAPIV3Schema")) or {})
            if sk:
                out[f"{crd['metadata']['name']}/{version['name']}"] = sk
    return out


def volcano_skeletons() -> dict[str, Obj]:
    text = (resources.files("lahar.sim") / "data" / DEFAULTS_FILE).read_text()
    loaded: dict[str, Obj] = json.loads(text)
    return loaded
