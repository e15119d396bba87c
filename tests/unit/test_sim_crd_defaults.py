"""CRD structural defaults in the emulator, and the skeleton of Volcano's schemas it serves."""

from __future__ import annotations

from lahar.kube.control_plane import volcano_crds
from lahar.sim.crd_defaults import apply_defaults, skeleton, skeletons, volcano_skeletons


def test_the_shipped_skeleton_matches_volcanos_manifests() -> None:
    # After updating lahar/kube/crds, regenerate libs/lahar/sim/data/volcano_crd_defaults.json:
    # json.dumps(skeletons(volcano_crds()), indent=1, sort_keys=True) + "\n"
    assert volcano_skeletons() == skeletons(volcano_crds())


def test_defaults_fill_missing_fields_of_present_objects_only() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "weight": {"type": "integer", "default": 1},
                    "topology": {"type": "object", "properties": {"mode": {"type": "string", "default": "hard"}}},
                    "tasks": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"replicas": {"type": "integer", "default": 1}}},
                    },
                    "byName": {"type": "object", "additionalProperties": {"properties": {"on": {"default": True}}}},
                },
            }
        },
    }
    obj = {"spec": {"weight": 5, "tasks": [{}, {"replicas": 3}], "byName": {"a": {}}}}
    apply_defaults(obj, schema)
    assert obj == {"spec": {"weight": 5, "tasks": [{"replicas": 1}, {"replicas": 3}], "byName": {"a": {"on": True}}}}
    empty: dict[str, object] = {}
    apply_defaults(empty, schema)
    assert empty == {}  # no spec: nothing below it is defaulted


def test_skeleton_keeps_only_branches_with_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "object", "properties": {"c": {"type": "integer", "default": 2}, "d": {"type": "string"}}},
        },
    }
    assert skeleton(schema) == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "b": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {"c": {"type": "integer", "default": 2}},
            }
        },
    }
