"""NUMA topology of a node (from its Numatopology) and the kubelet topology manager's hint logic,
as Volcano's numa-aware plugin replays it (policy/ and provider/cpumanager at ed72c7c8).

A *hint* is a set of NUMA nodes (``mask``, a frozenset; None means "any") and whether it is
preferred.  Pure functions over small sets: a node has a handful of NUMA nodes.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from lahar.api.objects import Container, Numatopology, Pod
from lahar.api.quantity import Quantity, QuantityError

CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"
NUMA_POLICY_KEY = "volcano.sh/numa-topology-policy"
NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE = "none", "best-effort", "restricted", "single-numa-node"

Mask = frozenset[int]


@dataclass(frozen=True, slots=True)
class Hint:
    mask: Mask | None
    preferred: bool


def parse_cpuset(text: str) -> frozenset[int]:
    """A Linux cpuset list ("0-3,8"); a malformed list is empty (Volcano logs and goes on)."""
    out: set[int] = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        return frozenset()
    return frozenset(out)


def format_cpuset(cpus: frozenset[int] | set[int]) -> str:
    runs, ordered = [], sorted(cpus)
    for _, group in itertools.groupby(enumerate(ordered), lambda p: p[1] - p[0]):
        ids = [c for _, c in group]
        runs.append(str(ids[0]) if len(ids) == 1 else f"{ids[0]}-{ids[-1]}")
    return ",".join(runs)


@dataclass(slots=True)
class NumaInfo:
    """One node's Numatopology, read (Volcano's NumatopoInfo)."""

    policies: dict[str, str]
    cpus: dict[int, tuple[int, int, int]]  # cpu id -> (numa node, socket, core)
    allocatable: frozenset[int]  # cpus free for exclusive use, per the exporter
    reserved_cpus: int  # resReserved cpu, rounded up
    assigned: set[str]  # pods (namespace/name and uid) the exporter lists in podAllocations

    @property
    def numa_nodes(self) -> list[int]:
        return sorted({n for n, _, _ in self.cpus.values()})

    def cpus_in(self, mask: Mask) -> set[int]:
        return {c for c, (n, _, _) in self.cpus.items() if n in mask}


def numa_info(obj: Numatopology) -> NumaInfo:
    spec = obj.spec
    cpus: dict[int, tuple[int, int, int]] = {}
    for key, d in spec.cpu_detail.items():
        try:
            cpus[int(key)] = (d.numa, d.socket, d.core)
        except ValueError:
            continue
    cpu = spec.numares.get("cpu")
    reserved = 0
    if "cpu" in spec.res_reserved:
        try:
            reserved = math.ceil(Quantity(spec.res_reserved["cpu"]).milli / 1000)
        except QuantityError:
            reserved = 0
    assigned = set()
    for alloc in spec.pod_allocations:
        assigned.add(f"{alloc.namespace}/{alloc.name}")
        if alloc.uid:
            assigned.add(alloc.uid)
    allocatable = parse_cpuset(cpu.allocatable) if cpu is not None else frozenset()
    return NumaInfo(dict(spec.policies), cpus, allocatable, reserved, assigned)


# -- the pod ------------------------------------------------------------------------------------------
def is_guaranteed(pod: Pod) -> bool:
    """Kubernetes' Guaranteed QoS: every container limits cpu and memory and requests equal them."""
    for c in (*pod.spec.init_containers, *pod.spec.containers):
        lim, req = c.resources.limits, c.resources.requests
        for name in ("cpu", "memory"):
            if name not in lim:
                return False
            if name in req and req[name] != lim[name]:
                return False
    return bool(pod.spec.containers)


def guaranteed_cpus(c: Container) -> int:
    """Whole cpus asked (0 unless the request is integral), cpumanager's guaranteedCPUs."""
    q = c.resources.requests.get("cpu") or c.resources.limits.get("cpu")
    if q is None or q.milli % 1000:
        return 0
    return q.milli // 1000


# -- hints (cpumanager.GetTopologyHints) -----------------------------------------------------------------
def reserved_set(info: NumaInfo) -> frozenset[int]:
    """The cpus the kubelet reserves: kubelet takes them by topology from the start of the machine;
    here the first ones in (socket, core, id) order, its usual outcome."""
    if info.reserved_cpus <= 0:
        return frozenset()
    ordered = sorted(info.cpus, key=lambda c: (info.cpus[c][1], info.cpus[c][2], c))
    return frozenset(ordered[: info.reserved_cpus])


def cpu_hints(info: NumaInfo, available: frozenset[int], request: int) -> list[Hint]:
    """generateCPUTopologyHints: every NUMA-node set with enough free cpus; the narrowest sets
    that could ever hold the request are preferred."""
    nodes = info.numa_nodes
    min_size = len(nodes)
    found: list[Mask] = []
    for size in range(1, len(nodes) + 1):
        for combo in itertools.combinations(nodes, size):
            mask = frozenset(combo)
            if len(info.cpus_in(mask)) >= request and size < min_size:
                min_size = size
            if sum(1 for c in available if info.cpus[c][0] in mask) >= request:
                found.append(mask)
    return [Hint(m, len(m) == min_size) for m in found]


def container_hints(info: NumaInfo, available: frozenset[int], c: Container) -> list[Hint]:
    """filterProvidersHints over the one (cpu) provider: no cpu ask = no preference."""
    if "cpu" not in c.resources.requests and "cpu" not in c.resources.limits:
        return [Hint(None, True)]
    request = guaranteed_cpus(c)
    if request == 0:
        return [Hint(None, True)]
    hints = cpu_hints(info, available - reserved_set(info), request)
    return hints or [Hint(None, False)]


# -- policies -------------------------------------------------------------------------------------------
def _narrower(a: Mask, b: Mask) -> bool:
    """bitmask.IsNarrowerThan: fewer NUMA nodes, or as many with the lower bit value."""
    if len(a) == len(b):
        return sum(1 << n for n in a) < sum(1 << n for n in b)
    return len(a) < len(b)


def merge_hints(nodes: list[int], hints: list[Hint]) -> Hint:
    """mergeFilteredHints for one provider: preferred over not, then the narrowest."""
    default: Mask = frozenset(nodes)
    best = Hint(default, False)
    for h in hints:
        mask = default & (h.mask if h.mask is not None else default)
        if not mask:
            continue
        if h.preferred and not best.preferred:
            best = Hint(mask, True)
        elif h.preferred == best.preferred and best.mask is not None and _narrower(mask, best.mask):
            best = Hint(mask, h.preferred)
    return best


def admit(policy: str, nodes: list[int], hints: list[Hint]) -> tuple[Hint, bool]:
    """The topology manager policy's verdict for one container: (best hint, admitted)."""
    if policy == SINGLE_NUMA_NODE:
        single = [h for h in hints if h.preferred and (h.mask is None or len(h.mask) == 1)]
        best = merge_hints(nodes, single)
        return best, best.preferred
    if policy in (BEST_EFFORT, RESTRICTED):
        best = merge_hints(nodes, hints)
        return best, policy == BEST_EFFORT or best.preferred
    return Hint(None, False), True  # none, and any policy Volcano does not know


# -- allocation (cpumanager.Allocate) --------------------------------------------------------------------
def take(info: NumaInfo, available: set[int], count: int) -> set[int]:
    """takeByTopology, simplified: whole free cores first, then single cpus, each in (NUMA node,
    socket, core) order, so a request stays on as few NUMA nodes as it can."""
    if count <= 0:
        return set()
    cores: dict[tuple[int, int, int], list[int]] = {}
    for c in sorted(available):
        n, s, core = info.cpus[c]
        cores.setdefault((n, s, core), []).append(c)
    siblings: dict[tuple[int, int, int], int] = {}
    for _, (n, s, core) in info.cpus.items():
        siblings[(n, s, core)] = siblings.get((n, s, core), 0) + 1
    whole = [k for k in sorted(cores) if len(cores[k]) == siblings[k]]
    out: list[int] = []
    for k in whole:
        if len(out) + len(cores[k]) <= count:
            out.extend(cores[k])
    for k in sorted(cores):
        for c in cores[k]:
            if len(out) < count and c not in out:
                out.append(c)
    return set(out) if len(out) == count else set()


def allocate(info: NumaInfo, available: frozenset[int], c: Container, best: Hint) -> set[int]:
    request = guaranteed_cpus(c)
    free = set(available - reserved_set(info))
    result: set[int] = set()
    if best.mask is not None:
        aligned = free & info.cpus_in(best.mask)
        result = take(info, aligned, min(request, len(aligned)))
    rest = take(info, free - result, request - len(result))
    return result | rest if len(result) + len(rest) == request else set()


def numa_count(info: NumaInfo, cpus: set[int] | frozenset[int]) -> int:
    return len({info.cpus[c][0] for c in cpus if c in info.cpus})
