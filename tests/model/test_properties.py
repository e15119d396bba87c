"""Properties of the scheduler on random clusters, under the default configuration.

Random nodes (cpu, memory, pod slots, some GPUs, zone labels, NoSchedule taints), random queues and
weights, random gang jobs (minMember, node selectors, tolerations, some init containers and
BestEffort pods).  Several cycles are simulated: binds become Running pods for the next cycle.
The checks use the generator's own numbers, not the scheduler's arithmetic.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import node, pod, podgroup, queue
from lahar_scheduler.core import load_conf
from lahar_scheduler.simulation import Outcome, simulate

GPU = "nvidia.com/gpu"
TAINT = "dedicated"
CONF = load_conf(None)
CYCLES = 3
# Modest by default so ``make test`` stays fast and repeatable (fixed examples); set
# LAHAR_MODEL_EXAMPLES=2000 LAHAR_MODEL_RANDOM=1 to hunt with fresh random examples.
EXAMPLES = int(os.environ.get("LAHAR_MODEL_EXAMPLES", "60"))
DERANDOMIZE = not os.environ.get("LAHAR_MODEL_RANDOM")


@dataclass
class PodSpec:
    key: str
    job: str
    cpu: int  # millicores, effective (max of containers and init container)
    memory: int  # MiB
    gpu: int
    selector: dict[str, str]
    tolerates: set[str]  # taint values tolerated
    best_effort: bool
    app: str | None = None  # label app=<app>
    avoid: str | None = None  # required anti-affinity to app=<avoid>, per node (hostname)


@dataclass
class NodeSpec:
    name: str
    cpu: int
    memory: int
    pods: int
    gpu: int
    labels: dict[str, str]
    taint: str | None


@dataclass
class World:
    nodes: dict[str, NodeSpec] = field(default_factory=dict)
    pods: dict[str, PodSpec] = field(default_factory=dict)
    min_member: dict[str, int] = field(default_factory=dict)
    queues: list[str] = field(default_factory=list)
    objects: list[Any] = field(default_factory=list)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    w = World()
    n_nodes = draw(st.integers(1, 6))
    for i in range(n_nodes):
        spec = NodeSpec(
            name=f"n{i}",
            cpu=draw(st.sampled_from([1000, 2000, 4000, 8000])),
            memory=draw(st.sampled_from([1024, 4096, 8192])),
            pods=draw(st.integers(1, 8)),
            gpu=draw(st.sampled_from([0, 0, 2, 4])),
            labels={"zone": z} if (z := draw(st.sampled_from(["a", "b", None]))) else {},
            taint=draw(st.sampled_from([None, None, "x", "y"])),
        )
        spec.labels["kubernetes.io/hostname"] = spec.name
        w.nodes[spec.name] = spec
        extra = {GPU: str(spec.gpu)} if spec.gpu else {}
        taints = [{"key": TAINT, "value": spec.taint, "effect": "NoSchedule"}] if spec.taint else []
        w.objects.append(
            node(
                spec.name,
                cpu=f"{spec.cpu}m",
                memory=f"{spec.memory}Mi",
                pods=str(spec.pods),
                labels=spec.labels,
                taints=taints,
                extra=extra,
            )
        )
    queues = w.queues = [f"q{i}" for i in range(draw(st.integers(1, 3)))]
    for q in queues:
        w.objects.append(queue(q, draw(st.integers(1, 4))))
    for j in range(draw(st.integers(1, 6))):
        name = f"j{j}"
        n_tasks = draw(st.integers(1, 4))
        min_member = draw(st.integers(1, n_tasks))
        w.min_member[f"default/{name}"] = min_member
        selector = {"zone": z} if (z := draw(st.sampled_from(["a", "b", None, None]))) else {}
        tolerates = set(draw(st.sets(st.sampled_from(["x", "y"]), max_size=2)))
        tolerations = [
            {"key": TAINT, "operator": "Equal", "value": v, "effect": "NoSchedule"} for v in sorted(tolerates)
        ]
        w.objects.append(
            podgroup(
                name,
                queue=draw(st.sampled_from(queues)),
                min_member=min_member,
                phase=draw(st.sampled_from(["Pending", "Inqueue"])),
            )
        )
        best_effort_job = draw(st.integers(0, 9)) == 0
        app = draw(st.sampled_from(["web", "db", None, None]))
        avoid = draw(st.sampled_from(["web", "db", None, None, None]))
        affinity = None
        if avoid:
            term = {"labelSelector": {"matchLabels": {"app": avoid}}, "topologyKey": "kubernetes.io/hostname"}
            affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        for t in range(n_tasks):
            key = f"default/{name}-t-{t}"
            if best_effort_job:
                cpu = mem = gpu = init_cpu = 0
            else:
                cpu = draw(st.sampled_from([100, 250, 500, 1000, 2000]))
                mem = draw(st.sampled_from([0, 128, 512, 1024]))
                gpu = draw(st.sampled_from([0, 0, 0, 1, 2]))
                init_cpu = draw(st.sampled_from([0, 0, 0, 3000]))
            extra = {GPU: str(gpu)} if gpu else {}
            w.objects.append(
                pod(
                    f"{name}-t-{t}",
                    group=name,
                    cpu=f"{cpu}m" if cpu else None,
                    memory=f"{mem}Mi" if mem else None,
                    extra=extra,
                    node_selector=selector,
                    tolerations=tolerations,
                    init_requests={"cpu": f"{init_cpu}m"} if init_cpu else None,
                    labels={"app": app} if app else None,
                    affinity=affinity,
                )
            )
            w.pods[key] = PodSpec(
                key,
                f"default/{name}",
                max(cpu, init_cpu),
                mem,
                gpu,
                selector,
                tolerates,
                best_effort_job,
                app,
                avoid,
            )
    return w


# Volcano's Helm chart configuration (binpack added, victim filters of gang and drf off), for a
# second look at resource accounting under different scoring.
HELM_CONF = load_conf(
    """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
)


def run_world(w: World, seed: int, conf: Any = CONF) -> Outcome:
    return simulate(w.objects, conf, cycles=CYCLES, seed=seed)


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=DERANDOMIZE,
)


@SETTINGS
@given(worlds(), st.integers(0, 3), st.sampled_from(["default", "helm"]))
def test_no_node_is_ever_overcommitted(w: World, seed: int, conf: str) -> None:
    out = run_world(w, seed, CONF if conf == "default" else HELM_CONF)
    on_node: dict[str, list[PodSpec]] = {n: [] for n in w.nodes}
    for cycle, result in enumerate(out.results, start=1):
        for t, node_name in result.binds:
            assert not any(t.key in [p.key for p in ps] for ps in on_node.values()), f"{t.key} bound twice"
            on_node[node_name].append(w.pods[t.key])
        for name, placed in on_node.items():
            spec = w.nodes[name]
            where = f"cycle {cycle}, node {name}"
            assert sum(p.cpu for p in placed) <= spec.cpu, where
            assert sum(p.memory for p in placed) <= spec.memory, where
            assert sum(p.gpu for p in placed) <= spec.gpu, where
            assert len(placed) <= spec.pods, where


@SETTINGS
@given(worlds(), st.integers(0, 3))
def test_a_gang_binds_nothing_or_reaches_min_member(w: World, seed: int) -> None:
    """Per session, a job either binds nothing or ends the session with at least minMember pods
    placed.  Jobs with BestEffort pods are left out: Volcano's gang counts pending BestEffort pods
    as ready, and backfill binds them one by one as long as the job counts as ready, so such a job
    may legitimately end a session short of minMember when pod slots run out."""
    out = run_world(w, seed)
    placed: dict[str, int] = dict.fromkeys(w.min_member, 0)
    for result in out.results:
        now: dict[str, int] = {}
        for t, _ in result.binds:
            now[t.job] = now.get(t.job, 0) + 1
        for job, count in now.items():
            if any(p.best_effort for p in w.pods.values() if p.job == job):
                continue
            assert placed[job] + count >= w.min_member[job], f"{job}: {count} bound, min {w.min_member[job]}"
        for job, count in now.items():
            placed[job] += count


@SETTINGS
@given(worlds(), st.integers(0, 3))
def test_binds_respect_node_selectors_and_no_schedule_taints(w: World, seed: int) -> None:
    out = run_world(w, seed)
    for key, node_name in out.binds.items():
        p, n = w.pods[key], w.nodes[node_name]
        for k, v in p.selector.items():
            assert n.labels.get(k) == v, f"{key} on {node_name}: selector {p.selector}, labels {n.labels}"
        if n.taint is not None:
            assert n.taint in p.tolerates, f"{key} on {node_name}: untolerated taint {n.taint}"


@SETTINGS
@given(worlds(), st.integers(0, 3))
def test_required_anti_affinity_is_never_violated(w: World, seed: int) -> None:
    """No node ends up with a pod that has required anti-affinity (hostname) to app=X next to a pod
    labelled app=X, whichever of the two came first (the newcomer's own terms and the existing
    pods' terms both apply)."""
    out = run_world(w, seed)
    by_node: dict[str, list[PodSpec]] = {}
    for key, node_name in out.binds.items():
        by_node.setdefault(node_name, []).append(w.pods[key])
    for node_name, placed in by_node.items():
        for a in placed:
            for b in placed:
                if a is not b and a.avoid is not None:
                    assert b.app != a.avoid, f"{a.key} avoids app={a.avoid} but shares {node_name} with {b.key}"


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None, derandomize=DERANDOMIZE)
@given(worlds(), st.integers(0, 100))
def test_same_input_and_seed_give_the_same_output(w: World, seed: int) -> None:
    a, b = run_world(w, seed), run_world(w, seed)
    assert a.to_json() == b.to_json()
    for ra, rb in zip(a.results, b.results, strict=True):
        assert [(t.key, n) for t, n in ra.binds] == [(t.key, n) for t, n in rb.binds]
        assert ra.pipelined == rb.pipelined


@settings(max_examples=max(10, EXAMPLES // 3), deadline=None, derandomize=DERANDOMIZE)
@given(worlds())
def test_something_is_scheduled_when_an_empty_cluster_can_take_a_job(w: World) -> None:
    """Sanity of the generator and the scheduler together: with one queue (so proportion's split
    between queues cannot strand a job), if some job without selector or GPUs fits on one untainted
    node on its own, at least one pod is bound over the cycles."""
    if len(w.queues) != 1:
        return
    out = run_world(w, 0)
    for job in w.min_member:
        pods = [p for p in w.pods.values() if p.job == job]
        if any(p.selector or p.gpu for p in pods):
            continue
        for n in w.nodes.values():
            room = n.taint is None and n.pods >= len(pods)
            if room and sum(p.cpu for p in pods) <= n.cpu and sum(p.memory for p in pods) <= n.memory:
                assert out.binds, f"{job} fits {n.name} alone, yet nothing was bound"
                return
