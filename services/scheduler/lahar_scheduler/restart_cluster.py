"""The cluster ``lahar bench restart`` loads: Kubernetes and Volcano objects as the API server
serves them (JSON bytes, the mirror's form), deterministic for a seed.

Most pods run, bound to nodes, in gang jobs whose PodGroups are Running; the rest wait in gangs
of Pending PodGroups, so the first session has something to decide.  Pods carry what a real
API server adds (default tolerations, the service-account volume, conditions, container
statuses): decoding them is most of what a restart costs, so they must not be thinner than
real ones.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from lahar.wire.keys import field as key_of

STAMP = "2026-12-02T10:00:00Z"
NAMESPACE = "bench"
QUEUES = 4
GANG = 10
_encode = msgspec.json.Encoder().encode


@dataclass
class Cluster:
    """Objects by kind, each as (mirror key, JSON bytes)."""

    objects: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)

    def add(self, kind: str, namespace: str, name: str, obj: dict[str, Any]) -> None:
        self.objects.setdefault(kind, []).append((key_of(namespace, name), _encode(obj)))

    def count(self, kind: str) -> int:
        return len(self.objects.get(kind, []))

    def items(self) -> Iterator[tuple[str, str, bytes]]:
        for kind, held in self.objects.items():
            for key, raw in held:
                yield kind, key, raw


def build(nodes: int, pods: int, pending: int, seed: int = 0) -> Cluster:
    """``nodes`` nodes, ``pods`` pods of which ``pending`` wait (rounded to whole gangs)."""
    rng = random.Random(seed)
    out = Cluster()
    for name in ("default", NAMESPACE):
        out.add("namespaces", "", name, _namespace(name))
    out.add("priorityclasses", "", "batch", _priority_class("batch", 100))
    for q in range(QUEUES):
        out.add("queues", "", f"queue-{q}", _queue(f"queue-{q}", q + 1))
    node_names = [f"node-{i:05d}" for i in range(nodes)]
    for i, name in enumerate(node_names):
        out.add("nodes", "", name, _node(name, i))
    pending = min(pending, pods)
    running = pods - pending
    _jobs(out, rng, running, node_names, "run")
    _jobs(out, rng, pending, [], "wait")
    return out


def _jobs(out: Cluster, rng: random.Random, pods: int, node_names: list[str], prefix: str) -> None:
    """Gang jobs of identical tasks; running ones spread round-robin over the nodes (at most
    ten 1-2 cpu tasks per node on average, well within a 32-cpu node)."""
    placed = 0
    for j in range((pods + GANG - 1) // GANG):
        job = f"{prefix}-{j:05d}"
        tasks = min(GANG, pods - j * GANG)
        cpu, mem = rng.choice(((1, 2), (2, 4), (1, 4)))
        queue = f"queue-{j % QUEUES}"
        out.add("podgroups", NAMESPACE, job, _podgroup(job, tasks, queue, cpu, mem, bool(node_names)))
        for t in range(tasks):
            node = node_names[placed % len(node_names)] if node_names else ""
            placed += 1
            out.add("pods", NAMESPACE, f"{job}-worker-{t}", _pod(job, t, cpu, mem, node))


def _meta(name: str, namespace: str = "", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{name}")),
        "resourceVersion": "1000",
        "creationTimestamp": STAMP,
    }
    if namespace:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def _namespace(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": _meta(name, labels={"kubernetes.io/metadata.name": name}),
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _meta(name),
        "value": value,
        "preemptionPolicy": "PreemptLowerPriority",
    }


def _queue(name: str, weight: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": _meta(name),
        "spec": {"weight": weight, "reclaimable": True, "parent": "root"},
        "status": {"state": "Open"},
    }


def _node(name: str, index: int) -> dict[str, Any]:
    resources = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    ip = f"10.{index // 65536}.{index // 256 % 256}.{index % 256}"
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "m5.8xlarge",
        "topology.kubernetes.io/zone": f"zone-{index % 3}",
        "topology.kubernetes.io/region": "region-1",
    }
    conditions = [
        {"type": t, "status": "False", "reason": f"Kubelet Has No {t}", "message": "ok"}
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    conditions.append({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is ready"})
    for c in conditions:
        c["lastHeartbeatTime"] = c["lastTransitionTime"] = STAMP
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, labels=labels, annotations={"node.alpha.kubernetes.io/ttl": "0"}),
        "spec": {"podCIDR": f"10.244.{index % 256}.0/24"},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "kubeletVersion": "v1.34.4",
                "containerRuntimeVersion": "containerd://2.0.0",
                "kernelVersion": "6.8.0",
                "osImage": "Ubuntu 24.04",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        },
    }


def _podgroup(name: str, tasks: int, queue: str, cpu: int, mem: int, running: bool) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": "Running", "running": tasks} if running else {"phase": "Pending"}
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": _meta(name, NAMESPACE),
        "spec": {
            "minMember": tasks,
            "queue": queue,
            "priorityClassName": "batch",
            "minResources": {"cpu": str(cpu * tasks), "memory": f"{mem * tasks}Gi"},
        },
        "status": status,
    }


_TOLERATIONS = [
    {"key": f"node.kubernetes.io/{t}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    for t in ("not-ready", "unreachable")
]


def _volume() -> dict[str, Any]:
    return {
        "name": "kube-api-access-8x2kq",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [
                            {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
                        ]
                    }
                },
            ],
        },
    }


def _pod(job: str, task: int, cpu: int, mem: int, node: str) -> dict[str, Any]:
    name = f"{job}-worker-{task}"
    requests = {"cpu": str(cpu), "memory": f"{mem}Gi"}
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "busybox:1.36",
                "command": ["sleep", "3600"],
                "resources": {"requests": requests, "limits": requests},
                "volumeMounts": [
                    {
                        "name": "kube-api-access-8x2kq",
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "OnFailure",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "volcano",
        "tolerations": _TOLERATIONS,
        "priorityClassName": "batch",
        "priority": 100,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "volumes": [_volume()],
    }
    meta = _meta(
        name,
        NAMESPACE,
        labels={"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker", "volcano.sh/queue-name": "q"},
        annotations={"scheduling.k8s.io/group-name": job, "volcano.sh/task-spec": "worker"},
        ownerReferences=[
            {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "name": job,
                "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"job/{job}")),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    )
    status: dict[str, Any] = {"phase": "Pending", "qosClass": "Guaranteed"}
    if node:
        spec["nodeName"] = node
        status = _running_status(task)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def _running_status(task: int) -> dict[str, Any]:
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STAMP}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    ip = f"10.244.{task % 256}.{task // 256 % 256}"
    return {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": "10.0.0.1",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": STAMP,
        "containerStatuses": [
            {
                "name": "main",
                "state": {"running": {"startedAt": STAMP}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": "docker.io/library/busybox:1.36",
                "imageID": "docker.io/library/busybox@sha256:" + "ab" * 32,
                "containerID": "containerd://" + "cd" * 32,
                "started": True,
            }
        ],
        "qosClass": "Guaranteed",
    }
