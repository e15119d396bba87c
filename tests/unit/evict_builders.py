"""Plain Kubernetes/Volcano objects and scheduler confs for the preempt, reclaim and capacity tests.

Objects are written as the API server serves them and decoded through ``lahar.api.codec``, with
the conformance corpus conventions: pods name the ``volcano`` scheduler and have UID
``<namespace>-<name>``, nodes have capacity = allocatable, queues are Open.  ``tier`` builds plugin
options the way Volcano's unit tests do: only the flags named are on, every other one is off.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import pytest
import yaml

from lahar.api.codec import decode_object
from lahar.api.objects import KubeObject
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework.conf import FLAGS, SchedulerConf
from lahar_scheduler.simulation import Outcome, simulate

GROUP = "scheduling.k8s.io/group-name"


def _decode(raw: dict[str, Any]) -> KubeObject:
    obj = decode_object(raw)
    assert obj is not None, raw
    return obj


def res(cpu: str | None = None, memory: str | None = None, scalars: Mapping[str, str] | None = None) -> dict[str, str]:
    """A resource list (cpu/memory when given, plus any scalar resources)."""
    out = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    out.update(scalars or {})
    return out


def node(
    name: str,
    cpu: str,
    memory: str,
    pods: str = "10",
    *,
    labels: Mapping[str, str] | None = None,
    scalars: Mapping[str, str] | None = None,
) -> KubeObject:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(scalars or {})}
    return _decode(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": dict(labels or {})},
            "status": {"allocatable": alloc, "capacity": dict(alloc)},
        }
    )


def pod(
    name: str,
    group: str,
    requests: Mapping[str, str],
    node_name: str = "",
    *,
    namespace: str = "c1",
    phase: str | None = None,
    labels: Mapping[str, str] | None = None,
    priority: int | None = None,
    preemption_policy: str | None = None,
    priority_class: str | None = None,
    affinity: dict[str, Any] | None = None,
    nominated: str | None = None,
) -> KubeObject:
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "containers": [{"name": "c", "resources": {"requests": dict(requests)} if requests else {}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if preemption_policy is not None:
        spec["preemptionPolicy"] = preemption_policy
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if affinity is not None:
        spec["affinity"] = affinity
    status: dict[str, Any] = {"phase": phase or ("Running" if node_name else "Pending")}
    if nominated:
        status["nominatedNodeName"] = nominated
    return _decode(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"{namespace}-{name}",
                "labels": dict(labels or {}),
                "annotations": {GROUP: group},
            },
            "spec": spec,
            "status": status,
        }
    )


def podgroup(
    name: str,
    queue: str,
    min_member: int,
    *,
    namespace: str = "c1",
    phase: str = "Inqueue",
    priority_class: str | None = None,
    min_task_member: Mapping[str, int] | None = None,
    min_resources: Mapping[str, str] | None = None,
) -> KubeObject:
    spec: dict[str, Any] = {"queue": queue, "minMember": min_member}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member is not None:
        spec["minTaskMember"] = dict(min_task_member)
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    return _decode(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def queue(
    name: str,
    weight: int = 1,
    *,
    capability: Mapping[str, str] | None = None,
    deserved: Mapping[str, str] | None = None,
    guarantee: Mapping[str, str] | None = None,
    parent: str | None = None,
    priority: int | None = None,
    state: str = "Open",
    reclaimable: bool | None = None,
) -> KubeObject:
    spec: dict[str, Any] = {"weight": weight}
    for key, value in (("capability", capability), ("deserved", deserved)):
        if value is not None:
            spec[key] = dict(value)
    if guarantee is not None:
        spec["guarantee"] = {"resource": dict(guarantee)}
    if parent is not None:
        spec["parent"] = parent
    if priority is not None:
        spec["priority"] = priority
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    return _decode(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": name},
            "spec": spec,
            "status": {"state": state},
        }
    )


def priority_class(name: str, value: int) -> KubeObject:
    return _decode(
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
    )


def plugin(name: str, *enabled: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A plugin option with only the named flags on (Volcano's unit tests leave the rest nil = off)."""
    out: dict[str, Any] = {"name": name}
    for flag in FLAGS:
        out[flag] = flag in enabled
    unknown = set(enabled) - set(FLAGS)
    assert not unknown, unknown
    if arguments:
        out["arguments"] = dict(arguments)
    return out


def conf(actions: str, *tiers: Iterable[dict[str, Any]], **action_args: Mapping[str, Any]) -> SchedulerConf:
    doc: dict[str, Any] = {"actions": actions, "tiers": [{"plugins": list(t)} for t in tiers]}
    if action_args:
        doc["configurations"] = [{"name": k, "arguments": dict(v)} for k, v in action_args.items()]
    return load_conf(yaml.safe_dump(doc))


def run(objects: Iterable[KubeObject], scheduler_conf: SchedulerConf, seed: int = 0) -> Outcome:
    return simulate(list(objects), scheduler_conf, cycles=1, seed=seed)


def evicted(outcome: Outcome) -> list[str]:
    return sorted(outcome.evictions)


def random_cluster(draw: Any, queues: int = 2) -> list[KubeObject]:
    """A small contended cluster from hypothesis draws: running low/mid-priority jobs in a few
    queues (some with capabilities) and pending high-priority jobs."""
    from hypothesis import strategies as st

    objs: list[KubeObject] = [priority_class("p1", 10), priority_class("p2", 50), priority_class("p3", 100)]
    for q in range(queues):
        cap = draw(st.sampled_from([None, "3", "5", "8"]))
        objs.append(queue(f"q{q}", draw(st.integers(1, 3)), capability=res(cap, f"{cap}G") if cap else None))
    nodes = draw(st.integers(1, 4))
    for n in range(nodes):
        objs.append(node(f"n{n}", str(draw(st.integers(2, 4))), "8G", pods=str(draw(st.integers(2, 6)))))
    for j in range(draw(st.integers(1, 4))):
        name, q = f"run{j}", f"q{draw(st.integers(0, queues - 1))}"
        tasks = draw(st.integers(1, 3))
        objs.append(
            podgroup(
                name,
                q,
                draw(st.integers(0, tasks)),
                phase="Running",
                priority_class=draw(st.sampled_from(["p1", "p2"])),
            )
        )
        for t in range(tasks):
            cpu = draw(st.sampled_from(["1", "2"]))
            labels = {"volcano.sh/preemptable": "false"} if draw(st.booleans()) and t == 0 else None
            objs.append(
                pod(
                    f"{name}-t-{t}",
                    name,
                    res(cpu, "1G"),
                    f"n{draw(st.integers(0, nodes - 1))}",
                    labels=labels,
                    priority=draw(st.integers(1, 3)),
                )
            )
    for j in range(draw(st.integers(1, 3))):
        name, q = f"want{j}", f"q{draw(st.integers(0, queues - 1))}"
        tasks = draw(st.integers(1, 3))
        objs.append(podgroup(name, q, draw(st.integers(1, tasks)), priority_class=draw(st.sampled_from(["p2", "p3"]))))
        for t in range(tasks):
            objs.append(pod(f"{name}-t-{t}", name, res(draw(st.sampled_from(["1", "2", "3"])), "1G")))
    return objs


@contextlib.contextmanager
def unpruned() -> Iterator[None]:
    """Switch off every shortcut: the victim-sum bound, the queue shortfall, the failed-shape memo."""
    import numpy as np

    from lahar_scheduler.actions import evictutil, preempt, reclaim
    from lahar_scheduler.framework import victims

    counter = itertools.count()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            evictutil.VictimBound, "candidates", lambda self, task, key: np.ones(len(self.ssn.nodes), dtype=bool)
        )
        mp.setattr(victims, "eviction_need", lambda ssn, queue, task: None)  # what NeedMemo asks
        mp.setattr(preempt, "shape_key", lambda task, kind: (next(counter),))
        mp.setattr(reclaim, "shape_key", lambda task, kind: (next(counter),))
        yield
