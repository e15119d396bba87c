"""Shared GPUs on each node, card by card: Volcano's gpushare and vGPU device ledgers.

Two kinds of node publish their cards:

* **gpushare** (Volcano's device plugin): ``volcano.sh/gpu-memory`` and ``volcano.sh/gpu-number``
  in the node's capacity; every card gets total memory / number (``gpushare.NewGPUDevices``),
  cards listed in ``volcano.sh/gpu-unhealthy-ids`` are left out.  A pod holds the cards its
  ``volcano.sh/gpu-index`` annotation names.
* **vGPU** (HAMi's device plugin): the ``volcano.sh/node-vgpu-register`` annotation lists
  ``uuid,count,memory,type,health,mode`` per card; a pod holds what its
  ``volcano.sh/vgpu-ids-new`` annotation says (uuid, memory and cores per container device).

The ledger lives beside the node arrays and is kept by the same ``add_task``/``remove_task``
calls, so a Statement's undo and the session's rollback restore it with the rest of the node.
gpushare cards are arrays ``[node, card]`` (filters are vector operations over nodes); vGPU
cards, rarer and searched card by card as Volcano does, are small Python objects per node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from lahar.api.objects import Container, Node, Pod
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray

GPU_MEMORY = "volcano.sh/gpu-memory"
GPU_NUMBER = "volcano.sh/gpu-number"
GPU_INDEX = "volcano.sh/gpu-index"
PREDICATE_TIME = "volcano.sh/predicate-time"
UNHEALTHY_GPU_IDS = "volcano.sh/gpu-unhealthy-ids"

VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_REGISTER = "volcano.sh/node-vgpu-register"
VGPU_IDS = "volcano.sh/vgpu-ids-new"
VGPU_TO_ALLOCATE = "volcano.sh/devices-to-allocate"
VGPU_NODE = "volcano.sh/vgpu-node"
VGPU_TIME = "volcano.sh/vgpu-time"
VGPU_BIND_TIME = "volcano.sh/bind-time"
VGPU_BIND_PHASE = "volcano.sh/bind-phase"
VGPU_MODE = "volcano.sh/vgpu-mode"
VGPU_PODGROUP_POLICY = "volcano.sh/vgpu-podgroup-policy"
VGPU_USE_UUID = "volcano.sh/vgpu-use-gpuuuid"
VGPU_NOUSE_UUID = "volcano.sh/vgpu-nouse-gpuuuid"
GPU_IN_USE = "nvidia.com/use-gputype"
GPU_NO_USE = "nvidia.com/nouse-gputype"
NVIDIA = "NVIDIA"
HAMI_CORE = "hami-core"
# ExtractResourceRequest: no percentage asked (the default config names no percentage resource).
NO_PERCENTAGE = 101


# -- what a pod asks for ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class VgpuRequest:
    """One container's vGPU ask (Volcano's ContainerDeviceRequest)."""

    nums: int
    mem: int
    mem_percentage: int
    cores: int


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    gpu_memory: int  # getGPUMemoryOfPod: Σ containers' limits, or the largest init container's
    gpu_number: int
    vgpu: tuple[VgpuRequest, ...]  # one per container that asks
    has_vgpu: bool  # checkVGPUResourcesInPod: a container limits vgpu-number or vgpu-memory


def _limit(c: Container, name: str) -> int:
    q = c.resources.limits.get(name)
    return q.units if q is not None else 0


def _limit_or_request(c: Container, name: str) -> int | None:
    q = c.resources.limits.get(name)
    if q is None:
        q = c.resources.requests.get(name)
    return q.units if q is not None else None


def _pod_max(pod: Pod, name: str) -> int:
    """Σ regular containers, or the largest init container if more (getGPUMemoryOfPod)."""
    total = sum(_limit(c, name) for c in pod.spec.containers)
    init = max((_limit(c, name) for c in pod.spec.init_containers), default=0)
    return max(total, init)


def _vgpu_requests(pod: Pod) -> tuple[VgpuRequest, ...]:
    """ExtractResourceRequest with the default vGPU config (no memory-percentage resource)."""
    out = []
    for c in pod.spec.containers:
        count = c.resources.limits.get(VGPU_NUMBER)
        if count is None and VGPU_MEMORY not in c.resources.limits:
            continue
        nums = count.units if count is not None else 1
        mem = _limit_or_request(c, VGPU_MEMORY) or 0
        # No memory asked: the whole card (percentage 100), as Volcano defaults it.
        percentage = 100 if mem == 0 else NO_PERCENTAGE
        cores = _limit_or_request(c, VGPU_CORES) or 0
        out.append(VgpuRequest(nums, mem, percentage, cores))
    return tuple(out)


def device_request(pod: Pod) -> DeviceRequest | None:
    """What a pod asks of shared GPUs, or None (the common case: no device work at all)."""
    names = (GPU_MEMORY, GPU_NUMBER, VGPU_NUMBER, VGPU_MEMORY)
    if not any(n in c.resources.limits for c in (*pod.spec.containers, *pod.spec.init_containers) for n in names):
        return None
    has_vgpu = any(VGPU_NUMBER in c.resources.limits or VGPU_MEMORY in c.resources.limits for c in pod.spec.containers)
    return DeviceRequest(_pod_max(pod, GPU_MEMORY), _pod_max(pod, GPU_NUMBER), _vgpu_requests(pod), has_vgpu)


# -- what a pod holds ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class CardUse:
    """The cards a pod holds on its node: gpushare card ids (each counting ``share_mem``) and
    vGPU container devices (uuid, memory, cores)."""

    share_ids: tuple[int, ...] = ()
    share_mem: int = 0
    vgpu: tuple[tuple[str, int, int], ...] = ()


def parse_gpu_index(value: str) -> tuple[int, ...]:
    """GetGPUIndex: comma-separated ids; any bad id makes the whole annotation void."""
    try:
        return tuple(int(v) for v in value.split(","))
    except ValueError:
        return ()


def encode_vgpu(devices: list[list[tuple[str, int, int]]]) -> str:
    """encodePodDevices: ``uuid,NVIDIA,mem,cores:`` per device, containers joined by ``;``."""
    return ";".join("".join(f"{u},{NVIDIA},{m},{c}:" for u, m, c in ctr) for ctr in devices)


def decode_vgpu(value: str) -> tuple[tuple[str, int, int], ...]:
    out = []
    for ctr in value.split(";"):
        for item in ctr.split(":"):
            parts = item.split(",")
            if len(parts) < 4:
                continue
            try:
                out.append((parts[0], int(parts[2]), int(parts[3])))
            except ValueError:
                continue
    return tuple(out)


def card_use(annotations: dict[str, str], req: DeviceRequest | None) -> CardUse | None:
    """What a placed pod holds, from the annotations a scheduler wrote at bind (AddResource)."""
    if req is None:
        return None
    share: tuple[int, ...] = ()
    if (req.gpu_memory > 0 or req.gpu_number > 0) and GPU_INDEX in annotations:
        share = parse_gpu_index(annotations[GPU_INDEX])
    vgpu = decode_vgpu(annotations[VGPU_IDS]) if VGPU_IDS in annotations else ()
    if not share and not vgpu:
        return None
    return CardUse(share, req.gpu_memory, vgpu)


# -- the nodes' cards ---------------------------------------------------------------------------
@dataclass(slots=True)
class VgpuCard:
    index: int
    uuid: str
    number: int  # how many pods may share it
    memory: int
    type: str
    used_num: int = 0
    used_mem: int = 0
    used_core: int = 0
    # pod uid -> (memory, cores, its PodGroup key), for the podgroup spread policy
    pods: dict[str, tuple[int, int, str]] = field(default_factory=dict)


@dataclass(slots=True)
class VgpuNode:
    mode: str
    cards: list[VgpuCard]


def _quantity_units(node: Node, name: str, where: str = "capacity") -> int:
    held = node.status.capacity if where == "capacity" else node.status.allocatable
    q = held.get(name)
    return q.units if q is not None else 0


def gpushare_cards(node: Node) -> tuple[int, list[int]]:
    """(memory per card, healthy card ids) as gpushare.NewGPUDevices reads the node; (0, []) if none."""
    total, number = _quantity_units(node, GPU_MEMORY), _quantity_units(node, GPU_NUMBER)
    if GPU_MEMORY not in node.status.capacity or number <= 0:
        return 0, []
    raw = node.metadata.annotations.get(UNHEALTHY_GPU_IDS, "")
    unhealthy = {_int(v, -1) for v in raw.split(",")} if raw else set()  # bad ids are skipped
    return total // number, [i for i in range(number) if i not in unhealthy]


def vgpu_cards(node: Node) -> VgpuNode | None:
    """vgpu.NewGPUDevices: the register annotation, and non-zero vgpu allocatable resources."""
    register = node.metadata.annotations.get(VGPU_REGISTER)
    if register is None or ":" not in register:
        return None
    for name in (VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY):
        if _quantity_units(node, name, "allocatable") == 0:
            return None
    cards, mode = [], HAMI_CORE
    for index, item in enumerate(register.split(":")):
        if "," not in item:
            continue
        parts = item.split(",")
        if len(parts) < 6:
            return None  # a malformed card voids the node's devices, as decodeNodeDevices does
        # MIG needs geometries from the device ConfigMap; without them Volcano falls back to hami-core.
        cards.append(VgpuCard(index, parts[0], _int(parts[1]), _int(parts[2]), parts[3]))
    return VgpuNode(mode, cards) if cards else None


def _int(text: str, bad: int = 0) -> int:
    try:
        return int(text)
    except ValueError:
        return bad


class DeviceTable:
    """Every node's shared cards.  ``share_*`` arrays are ``[node, card]``; absent cards have
    ``share_present`` False."""

    def __init__(self, nodes: list[Node]) -> None:
        n = len(nodes)
        per_node = [gpushare_cards(node) for node in nodes]
        width = max((max(ids) + 1 for _, ids in per_node if ids), default=0)
        self.share_total: FloatArray = np.zeros((n, width))
        self.share_present: BoolArray = np.zeros((n, width), dtype=bool)
        for i, (mem, ids) in enumerate(per_node):
            for card in ids:
                self.share_total[i, card] = mem
                self.share_present[i, card] = True
        self.share_used: FloatArray = np.zeros((n, width))
        self.share_pods: IntArray = np.zeros((n, width), dtype=np.intp)
        self.has_share: BoolArray = np.asarray(self.share_present.any(axis=1), dtype=bool)
        self.vgpu: dict[int, VgpuNode] = {}
        for i, node in enumerate(nodes):
            cards = vgpu_cards(node)
            if cards is not None:
                self.vgpu[i] = cards
        self.has_vgpu: BoolArray = np.zeros(n, dtype=bool)
        self.has_vgpu[list(self.vgpu)] = True
        self.any = bool(width) or bool(self.vgpu)

    def add(self, row: int, uid: str, use: CardUse, group: str) -> None:
        self._apply(row, uid, use, group, 1)

    def sub(self, row: int, uid: str, use: CardUse) -> None:
        self._apply(row, uid, use, "", -1)

    def _apply(self, row: int, uid: str, use: CardUse, group: str, sign: int) -> None:
        width = self.share_present.shape[1]
        for card_id in use.share_ids:
            if 0 <= card_id < width and self.share_present[row, card_id]:
                self.share_used[row, card_id] += sign * use.share_mem
                self.share_pods[row, card_id] += sign
        node = self.vgpu.get(row)
        if node is None or not use.vgpu:
            return
        for uuid, mem, cores in use.vgpu:
            for card in node.cards:
                if card.uuid and card.uuid in uuid:  # Volcano matches by containment
                    if sign > 0 and uid not in card.pods:
                        card.used_num += 1
                        card.used_mem += mem
                        card.used_core += cores
                        card.pods[uid] = (mem, cores, group)
                    elif sign < 0 and card.pods.pop(uid, None) is not None:
                        card.used_num -= 1
                        card.used_mem -= mem
                        card.used_core -= cores
                    break

    # -- gpushare -----------------------------------------------------------------------------
    def share_idle(self, rows: IntArray) -> FloatArray:
        """Idle memory per card, clamped at zero (an over-subscribed card offers none)."""
        return np.maximum(self.share_total[rows] - self.share_used[rows], 0.0)

    def share_fits_memory(self, rows: IntArray, mem: int) -> BoolArray:
        """predicateGPUbyMemory: some card with idle memory ≥ the ask."""
        if not self.share_present.shape[1]:
            return np.zeros(len(rows), dtype=bool)
        ok = (self.share_idle(rows) >= mem) & self.share_present[rows]
        return np.asarray(ok.any(axis=1))

    def share_fits_number(self, rows: IntArray, number: int) -> BoolArray:
        """predicateGPUbyNumber: at least ``number`` cards no pod holds."""
        if not self.share_present.shape[1]:
            return np.zeros(len(rows), dtype=bool)
        idle = (self.share_pods[rows] == 0) & self.share_present[rows]
        return np.asarray(idle.sum(axis=1) >= number)

    def share_pick(self, row: int, req: DeviceRequest) -> tuple[int, ...]:
        """The cards gpushare's Allocate gives: the lowest-id card with room for the memory ask,
        else the first ``gpu-number`` idle cards."""
        present = self.share_present[row]
        if req.gpu_memory > 0:
            idle = np.maximum(self.share_total[row] - self.share_used[row], 0.0)
            fits = np.flatnonzero(present & (idle >= req.gpu_memory))
            return (int(fits[0]),) if len(fits) else ()
        if req.gpu_number > 0:
            free = np.flatnonzero(present & (self.share_pods[row] == 0))
            return tuple(int(c) for c in free[: req.gpu_number]) if len(free) >= req.gpu_number else ()
        return ()
