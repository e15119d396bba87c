"""HyperNode discovery from node labels (Volcano's ``label`` discoverer), pure.

Each topology type lists node label keys from the widest domain down to the node's own key
(``kubernetes.io/hostname``, which names no HyperNode and is dropped).  A node labelled
``volcano.sh/tor=t1`` under topology ``a2: [volcano.sh/tor, kubernetes.io/hostname]`` is a
member of the tier-1 HyperNode for ``tor=t1``; with a wider key above it, that HyperNode is a
member of the tier-2 one, and so on.  A node missing a key stops its chain there.

HyperNodes made here carry ``volcano.sh/network-topology-source: label`` and their own
``key: value`` label, so the next pass finds them again by label and keeps their names; new
names are ``hypernode-<type>-tier<N>-<suffix>`` as Volcano's, with a suffix derived from the
label value (Volcano draws it at random; a derived one makes a re-created tree name the same
HyperNodes).  ``plan`` returns what to create, replace and delete to reach the discovered tree.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

SOURCE_LABEL = "volcano.sh/network-topology-source"
SOURCE = "label"
MAX_TYPE_NAME = 20  # Volcano skips longer topology type names


class DiscoveryConfigError(ValueError):
    pass


def parse_types(raw: Mapping[str, Any]) -> dict[str, list[str]]:
    """``{type: [key, ..., hostname key]}`` → ``{type: [tier-1 key, tier-2 key, ...]}``.

    Accepts Volcano's shape (``[{nodeLabel: key}, ...]``) or plain key lists; errors name the
    type (Volcano skips such a type; a configuration with one is refused here whole)."""
    out: dict[str, list[str]] = {}
    for name, labels in raw.items():
        if len(name) > MAX_TYPE_NAME:
            raise DiscoveryConfigError(f"networkTopologyTypes.{name}: longer than {MAX_TYPE_NAME} characters")
        if not isinstance(labels, list):
            raise DiscoveryConfigError(f"networkTopologyTypes.{name}: expected a list of node label keys")
        keys = [str(x.get("nodeLabel", "")) if isinstance(x, dict) else str(x) for x in labels]
        if len(set(keys)) != len(keys) or not all(keys):
            raise DiscoveryConfigError(f"networkTopologyTypes.{name}: duplicate or empty label keys")
        # The last key is the node's own (hostname): tiers are the others, nearest first.
        out[name] = list(reversed(keys[:-1]))
    return out


@dataclass
class Discovered:
    tier: int
    tier_name: str
    label: tuple[str, str]
    members: set[str] = field(default_factory=set)


def _clean(name: str) -> str:
    return "".join(c.lower() if c.isalpha() else c if c.isdigit() or c in ".-" else "-" for c in name)


def _meta(obj: Obj) -> Obj:
    meta: Obj = obj.get("metadata") or {}
    return meta


def discover(types: Mapping[str, list[str]], nodes: Iterable[Obj], existing: Iterable[Obj]) -> dict[str, Discovered]:
    """The HyperNodes the node labels call for, by name."""
    ours = [h for h in existing if (_meta(h).get("labels") or {}).get(SOURCE_LABEL) == SOURCE]
    found: dict[str, Discovered] = {}
    named: dict[tuple[str, str], str] = {}
    for node in sorted(nodes, key=lambda n: str(_meta(n).get("name", ""))):
        labels: Mapping[str, str] = _meta(node).get("labels") or {}
        for type_name, keys in sorted(types.items()):
            member = str(_meta(node).get("name", ""))
            for i, key in enumerate(keys):
                if key not in labels:
                    break
                tier, value = i + 1, labels[key]
                name = named.get((key, value))
                if name is None:
                    name = named[(key, value)] = _name(type_name, key, value, tier, ours)
                hn = found.setdefault(name, Discovered(tier, key, (key, value)))
                hn.members.add(member)
                member = name
    return found


def _name(type_name: str, key: str, value: str, tier: int, ours: list[Obj]) -> str:
    prefix = f"hypernode-{_clean(type_name)}-tier{tier}"
    same = sorted(
        str(_meta(h).get("name", ""))
        for h in ours
        if (_meta(h).get("labels") or {}).get(key) == value and str(_meta(h).get("name", "")).startswith(prefix)
    )
    if same:
        return same[0]
    suffix = hashlib.sha256(f"{key}={value}".encode()).hexdigest()[:5]
    return f"{prefix}-{suffix}"


def render(name: str, hn: Discovered) -> Obj:
    member_type = "Node" if hn.tier == 1 else "HyperNode"
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": {SOURCE_LABEL: SOURCE, hn.label[0]: hn.label[1]}},
        "spec": {
            "tier": hn.tier,
            "tierName": hn.tier_name,
            "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in sorted(hn.members)],
        },
    }


@dataclass
class Plan:
    create: list[Obj] = field(default_factory=list)
    replace: list[Obj] = field(default_factory=list)  # existing ones whose spec or labels differ
    delete: list[str] = field(default_factory=list)  # ours, no longer called for


def plan(types: Mapping[str, list[str]], nodes: Iterable[Obj], existing: Iterable[Obj]) -> Plan:
    """What to write so the label-sourced HyperNodes match the nodes (others are left alone)."""
    current = {str(_meta(h).get("name", "")): h for h in existing}
    wanted = {name: render(name, hn) for name, hn in discover(types, nodes, current.values()).items()}
    out = Plan()
    for name, obj in sorted(wanted.items()):
        have = current.get(name)
        if have is None:
            out.create.append(obj)
        elif have.get("spec") != obj["spec"] or (_meta(have).get("labels") or {}) != obj["metadata"]["labels"]:
            out.replace.append(obj)
    for name, h in sorted(current.items()):
        if name not in wanted and (_meta(h).get("labels") or {}).get(SOURCE_LABEL) == SOURCE:
            out.delete.append(name)
    return out
