"""Label, annotation and name conventions of Volcano's job controller, spelled once.

Volcano users, its scheduler and its tools read these keys on Jobs, pods and PodGroups, so they
must match Volcano's exactly.
"""

from __future__ import annotations

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_KIND = "Job"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"

# pod labels and annotations the controller writes
TASK_INDEX = "volcano.sh/task-index"
TASK_SPEC = "volcano.sh/task-spec"
JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
JOB_VERSION = "volcano.sh/job-version"
TEMPLATE_UID = "volcano.sh/template-uid"
JOB_RETRY_COUNT = "volcano.sh/job-retry-count"
JOB_FORWARDING = "volcano.sh/job-forwarding"
PARTITION_ID = "volcano.sh/partition-id"
NUMA_POLICY = "volcano.sh/numa-topology-policy"
GROUP_NAME = "scheduling.k8s.io/group-name"
OUT_OF_SYNC = "volcano.sh/controller-out-of-sync"

# copied from the job onto its pods (annotations; the first two also as labels)
PREEMPTABLE = "volcano.sh/preemptable"
COOLDOWN_TIME = "volcano.sh/cooldown-time"
REVOCABLE_ZONE = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE = "volcano.sh/jdb-max-unavailable"

DEFAULT_TASK_SPEC = "default"


def pod_name(job_name: str, task_name: str, index: int) -> str:
    """``<job>-<task>-<index>``: the only name a job's pod may have (the controller finds pods by it)."""
    return f"{job_name}-{task_name}-{index}"


def podgroup_name(job_name: str, job_uid: str) -> str:
    """``<job>-<uid>``: the uid keeps a re-created job of the same name off the old job's group."""
    return f"{job_name}-{job_uid}"


def plugin_mark(plugin: str) -> str:
    """The ``status.controlledResources`` key a plugin sets once its job set-up is done."""
    return f"plugin-{plugin}"
