"""The GPU-sharing + HyperNode variant of the synthetic cluster (``lahar bench scheduler
--variant gpushare-hypernode``).

On top of ``synthetic``'s cluster: GPU nodes publish their 8 cards as shared GPU memory
(``volcano.sh/gpu-memory``, 16000 per card, and ``volcano.sh/gpu-number``), and GPU jobs ask
for slices of a card instead of whole ``nvidia.com/gpu`` devices; the nodes sit in a 3-tier
HyperNode tree (16 nodes per leaf, 8 leaves per tier-2 HyperNode, one spine); one job in five
must stay inside one leaf (``networkTopology: hard, highestTierAllowed: 1``), one in ten inside a
tier-2 HyperNode, and one in ten prefers one (soft).  The configuration is the default one with
deviceshare (gpushare) and network-topology-aware added.  Deterministic for a given seed.
"""

from __future__ import annotations

import random

from lahar.api.objects import (
    ExactMatch,
    HyperNode,
    HyperNodeSpec,
    MemberSelector,
    MemberSpec,
    NetworkTopologySpec,
    Node,
    ObjectMeta,
    Pod,
    PodGroup,
)
from lahar.api.quantity import Quantity
from lahar_scheduler.framework.conf import DEFAULT_CONF

CARD_MEMORY = 16000
SLICE = 4000  # what a GPU task asks of one card
LEAF, FAN = 16, 8
CONF = (
    DEFAULT_CONF
    + """\
  - name: deviceshare
    arguments: {deviceshare.GPUSharingEnable: true}
  - name: network-topology-aware
"""
)


def share_gpus(nodes: list[Node]) -> None:
    """GPU nodes publish their cards as shared memory (the device plugin's resources)."""
    for node in nodes:
        cards = node.status.allocatable.pop("nvidia.com/gpu", None)
        node.status.capacity.pop("nvidia.com/gpu", None)
        if cards is None:
            continue
        n = cards.units
        for res in (node.status.allocatable, node.status.capacity):
            res["volcano.sh/gpu-memory"] = Quantity(n * CARD_MEMORY)
            res["volcano.sh/gpu-number"] = Quantity(n)


def hypernodes(nodes: list[Node]) -> list[HyperNode]:
    """Leaves of LEAF consecutive nodes, FAN leaves per tier-2 HyperNode, one spine."""
    names = [n.metadata.name for n in nodes]
    leaves = [_hypernode(f"leaf-{i // LEAF:04d}", 1, names[i : i + LEAF], "Node") for i in range(0, len(names), LEAF)]
    leaf_names = [h.metadata.name for h in leaves]
    pods = [
        _hypernode(f"pod-{i // FAN:03d}", 2, leaf_names[i : i + FAN], "HyperNode")
        for i in range(0, len(leaf_names), FAN)
    ]
    spine = _hypernode("spine", 3, [h.metadata.name for h in pods], "HyperNode")
    return [*leaves, *pods, spine]


def _hypernode(name: str, tier: int, members: list[str], kind: str) -> HyperNode:
    spec = HyperNodeSpec(
        tier=tier,
        members=[MemberSpec(type=kind, selector=MemberSelector(exact_match=ExactMatch(name=m))) for m in members],
    )
    return HyperNode(metadata=ObjectMeta(name=name), spec=spec)


def constrain_jobs(groups: list[PodGroup], pods: list[Pod], seed: int = 0) -> None:
    """GPU tasks ask for a slice of one card; some jobs get a network topology."""
    rng = random.Random(seed)
    for pg in groups:
        pick = rng.random()
        if pick < 0.2:
            pg.spec.network_topology = NetworkTopologySpec(mode="hard", highest_tier_allowed=1)
        elif pick < 0.3:
            pg.spec.network_topology = NetworkTopologySpec(mode="hard", highest_tier_allowed=2)
        elif pick < 0.4:
            pg.spec.network_topology = NetworkTopologySpec(mode="soft", highest_tier_allowed=1)
    for pod in pods:
        for c in pod.spec.containers:
            if c.resources.requests.pop("nvidia.com/gpu", None) is not None:
                c.resources.limits["volcano.sh/gpu-memory"] = Quantity(SLICE)
