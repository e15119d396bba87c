"""Redis key layout of the cluster mirror — the only place these keys are spelled.

The cache service writes every watched object to a hash per kind, field ``namespace/name``
(``name`` for cluster-scoped kinds), value the object's JSON exactly as the API server serves it
(so any reader decodes it with ``lahar.api`` types).  ``seq`` holds the JetStream sequence of the
last delta the mirror reflects, written in the same MULTI/EXEC as the objects.
"""

from __future__ import annotations

KINDS = (
    "nodes",
    "pods",
    "podgroups",
    "queues",
    "jobs",
    "priorityclasses",
    "namespaces",
    "resourcequotas",
    "numatopologies",  # nodeinfo.volcano.sh: NUMA layout per node, for numa-aware
    "poddisruptionbudgets",
    # network topology (topology.volcano.sh): the scheduler's HyperNode tree
    "hypernodes",
    # for the controller: Commands, CronJobs, claims a Job names, and the workloads whose pods
    # get PodGroups (batch/v1 Jobs as "batchjobs": "jobs" are Volcano's)
    "commands",
    "cronjobs",
    "persistentvolumeclaims",
    "replicasets",
    "statefulsets",
    "daemonsets",
    "batchjobs",
    # JobFlows and the JobTemplates their steps name
    "jobflows",
    "jobtemplates",
)


def objects_key(prefix: str, kind: str) -> str:
    """Hash of one kind's objects, e.g. ``lahar:mirror:queues``."""
    if kind not in KINDS:
        raise ValueError(f"unknown mirrored kind {kind!r}")
    return f"{prefix}:mirror:{kind}"


def seq_key(prefix: str) -> str:
    """The JetStream sequence of the last delta reflected in the mirror."""
    return f"{prefix}:mirror:seq"


def stream_id_key(prefix: str) -> str:
    """The identity of the CLUSTER stream the mirror reflects (its ``lahar.id`` metadata).

    Absent means the mirror is unidentified: being rebuilt by the cache, or lost (a ``FLUSHALL``).
    A reader must not trust such a mirror, nor one whose identity differs from the live stream's.
    """
    return f"{prefix}:mirror:stream"


def fence_key(prefix: str) -> str:
    """The epoch of the cache leader that last wrote the mirror; older leaders' writes are refused."""
    return f"{prefix}:mirror:fence"


def epochs_key(prefix: str) -> str:
    """Hash role -> the highest leader epoch ever granted, so fences never go backwards even when
    the lease bucket is lost and recreated."""
    return f"{prefix}:epochs"


def field(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


DEFAULT_PREFIX = "lahar"
