"""vGPU fit on one node, card by card (Volcano's checkNodeGPUSharingPredicateAndScore, hami-core).

Each container's ask is placed on cards in the policy's order (binpack: most memory used first;
spread: fewest pods first; none: highest index first).  The search works on copies of the
cards' counters, so a filter never changes the ledger; allocate applies what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass

from lahar_scheduler.framework.devices import (
    GPU_IN_USE,
    GPU_NO_USE,
    NO_PERCENTAGE,
    NVIDIA,
    VGPU_MODE,
    VGPU_NOUSE_UUID,
    VGPU_PODGROUP_POLICY,
    VGPU_USE_UUID,
    DeviceRequest,
    VgpuCard,
    VgpuNode,
)

BINPACK = "binpack"
SPREAD = "spread"
MULTIPLIER = 100.0


@dataclass(slots=True)
class VgpuFit:
    devices: list[list[tuple[str, int, int]]]  # per container: (uuid, memory, cores)
    score: float


def policy_order(cards: list[VgpuCard], used: list[list[int]], policy: str) -> list[int]:
    """sortedDeviceIndicesByPolicy over positions in ``cards`` (``used`` = [num, mem, core] each)."""
    positions = list(range(len(cards)))
    if policy == BINPACK:
        return sorted(positions, key=lambda p: (-used[p][1], cards[p].index))
    if policy == SPREAD:
        return sorted(positions, key=lambda p: (used[p][0], cards[p].index))
    return sorted(positions, key=lambda p: -cards[p].index)


def card_score(policy: str, card: VgpuCard, used: list[int]) -> float:
    """GPUScore, taken after the tentative add as Volcano does: spread's bonus for an unused card
    therefore never applies (deviceshare_test TestVgpuScore only bounds it from above)."""
    if policy == BINPACK:
        return MULTIPLIER * used[1] / card.memory if card.memory else 0.0
    if policy == SPREAD and used[0] == 0:
        return MULTIPLIER
    return 0.0


def _type_ok(annotations: dict[str, str], card_type: str) -> bool:
    """checkType for NVIDIA asks: the use-gputype list must match, the nouse list must not."""
    if NVIDIA not in card_type:
        return False
    upper = card_type.upper()
    inuse = annotations.get(GPU_IN_USE)
    if inuse is not None:
        return any(v.upper() in upper for v in inuse.split(","))
    nouse = annotations.get(GPU_NO_USE)
    if nouse is not None:
        return not any(v.upper() in upper for v in nouse.split(","))
    return True


def _uuids(value: str) -> list[str]:
    return [u.strip() for u in value.split(",") if u.strip()]


def vgpu_fit(node: VgpuNode, req: DeviceRequest, annotations: dict[str, str], group: str, policy: str) -> VgpuFit | str:
    """The cards each container gets and the node's score, or why the node does not fit."""
    if not req.has_vgpu:
        return VgpuFit([], 0.0)
    mode = annotations.get(VGPU_MODE)
    if mode is not None and mode != node.mode:
        return f"pod required sharing mode {mode} is not the same as the node mode {node.mode}"
    if not req.vgpu:
        return VgpuFit([], 0.0)
    spread_group = group if annotations.get(VGPU_PODGROUP_POLICY) == SPREAD else ""
    allow, deny = _uuids(annotations.get(VGPU_USE_UUID, "")), _uuids(annotations.get(VGPU_NOUSE_UUID, ""))
    cards = node.cards
    used = [[c.used_num, c.used_mem, c.used_core] for c in cards]
    devices: list[list[tuple[str, int, int]]] = []
    score = 0.0
    for ask in req.vgpu:
        if ask.nums > len(cards):
            return "no enough gpu cards on node"
        need, got, matched = ask.nums, [], False
        for p in policy_order(cards, used, policy):
            card, u = cards[p], used[p]
            if (allow or deny) and (not card.uuid or (allow and card.uuid not in allow) or card.uuid in deny):
                continue
            matched = True
            if card.number <= u[0]:
                continue
            if spread_group and any(g == spread_group and (m or c) for m, c, g in card.pods.values()):
                continue
            mem = int(card.memory * ask.mem_percentage / 100) if ask.mem_percentage != NO_PERCENTAGE else ask.mem
            if card.memory - u[1] < mem or u[2] + ask.cores > 100:
                continue
            if (ask.cores == 100 and u[0] > 0) or (u[2] == 100 and ask.cores == 0):
                continue  # 100 cores asks for the card alone; a card at 100 takes no core-less pod
            if not _type_ok(annotations, card.type):
                continue
            u[0], u[1], u[2] = u[0] + 1, u[1] + mem, u[2] + ask.cores
            got.append((card.uuid, mem, ask.cores))
            score += card_score(policy, card, u)
            need -= 1
            if need == 0:
                break
        if need > 0:
            if (allow or deny) and not matched:
                return "no GPU matches UUID constraints"
            return "not enough gpu fitted on this node"
        devices.append(got)
    return VgpuFit(devices, score)
