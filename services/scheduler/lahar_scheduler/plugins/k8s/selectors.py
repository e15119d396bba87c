"""Label and node selectors with Kubernetes' matching rules."""

from __future__ import annotations

from collections.abc import Mapping

from lahar.api.objects import (
    LabelSelector,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinityTerm,
    Toleration,
)


def label_selector_matches(sel: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A nil selector matches nothing; an empty one matches everything."""
    if sel is None:
        return False
    for key, val in sel.match_labels.items():
        if labels.get(key) != val:
            return False
    for req in sel.match_expressions:
        present = req.key in labels
        op = req.operator
        if op == "In":
            if not present or labels[req.key] not in req.values:
                return False
        elif op == "NotIn":
            if present and labels[req.key] in req.values:
                return False
        elif op == "Exists":
            if not present:
                return False
        elif op == "DoesNotExist":
            if present:
                return False
        else:
            return False
    return True


def _node_requirement(req: NodeSelectorRequirement, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        try:
            have, bound = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def node_term_matches(term: NodeSelectorTerm, name: str, labels: Mapping[str, str]) -> bool:
    """An empty term matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_expressions:
        if not _node_requirement(req, labels.get(req.key)):
            return False
    for req in term.match_fields:
        field = name if req.key == "metadata.name" else None
        if not _node_requirement(req, field):
            return False
    return True


def node_selector_matches(sel: NodeSelector, name: str, labels: Mapping[str, str]) -> bool:
    return any(node_term_matches(t, name, labels) for t in sel.node_selector_terms)


def pod_matches_node(pod: Pod, name: str, labels: Mapping[str, str]) -> bool:
    """nodeSelector and required node affinity (kube's GetRequiredNodeAffinity)."""
    for key, val in pod.spec.node_selector.items():
        if labels.get(key) != val:
            return False
    aff = pod.spec.affinity
    if aff is not None and aff.node_affinity is not None:
        req = aff.node_affinity.required_during_scheduling_ignored_during_execution
        if req is not None and not node_selector_matches(req, name, labels):
            return False
    return True


def term_namespaces(pod: Pod, term: PodAffinityTerm) -> set[str] | None:
    """Namespaces an affinity term looks at; None means every namespace."""
    if term.namespace_selector is not None:
        sel = term.namespace_selector
        if not sel.match_labels and not sel.match_expressions:
            return None
    if term.namespaces:
        return set(term.namespaces)
    if term.namespace_selector is not None:
        # A non-empty namespace selector: resolved against namespace labels by the caller.
        return set()
    return {pod.metadata.namespace}


def tolerates(tolerations: list[Toleration], key: str, value: str, effect: str) -> bool:
    for t in tolerations:
        if t.effect and t.effect != effect:
            continue
        if t.key and t.key != key:
            continue
        if t.operator == "Exists":
            return True
        if t.operator in ("", "Equal") and t.value == value:
            return True
    return False
