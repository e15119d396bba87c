"""msgspec types for the objects admission decodes.

They follow Volcano's Go types closely enough for the rules: a field Go reads as a zero value
defaults to that zero value here (``weight: 0`` and an absent weight are the same to the queue
mutator), pointer fields are ``X | None``, and integers are bounded to int32 as the CRD and Go
are.  Pod templates stay plain data (``dict``): the job mutator hands them back whole, and the
pod-template validator walks them field by field.  Unknown fields are ignored.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from lahar.api.objects import ObjectMeta
from lahar.api.quantity import Quantity

Int32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
ResourceList = dict[str, Quantity]


class _Base(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    pass


class NetworkTopology(_Base):
    mode: str = ""
    highest_tier_allowed: Int32 | None = None
    highest_tier_name: str = ""


def both_tiers(nt: NetworkTopology | None) -> bool:
    return nt is not None and nt.highest_tier_allowed is not None and nt.highest_tier_name != ""


# --- batch.volcano.sh/v1alpha1 Job -------------------------------------------------------


class PartitionPolicy(_Base):
    total_partitions: Int32 = 0
    partition_size: Int32 = 0
    min_partitions: Int32 = 0
    network_topology: NetworkTopology | None = None


class VolumeSpec(_Base):
    mount_path: str = ""
    volume_claim_name: str = ""
    volume_claim: dict[str, Any] | None = None


class DependsOn(_Base):
    name: list[str] = []
    iteration: str = ""


class LifecyclePolicy(_Base):
    action: str = ""
    event: str = ""
    events: list[str] = []
    exit_code: Int32 | None = None
    timeout: str | None = None


class TaskSpec(_Base):
    name: str = ""
    replicas: Int32 = 0
    min_available: Int32 | None = None
    template: dict[str, Any] = {}
    policies: list[LifecyclePolicy] = []
    topology_policy: str = ""
    max_retry: Int32 = 0
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None


class JobSpec(_Base):
    scheduler_name: str = ""
    min_available: Int32 = 0
    volumes: list[VolumeSpec] = []
    tasks: list[TaskSpec] = []
    policies: list[LifecyclePolicy] = []
    plugins: dict[str, list[str] | None] | None = None
    running_estimate: str | None = None
    queue: str = ""
    max_retry: Int32 = 0
    ttl_seconds_after_finished: Int32 | None = None
    priority_class_name: str = ""
    min_success: Int32 | None = None
    network_topology: NetworkTopology | None = None


class Job(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: JobSpec = msgspec.field(default_factory=JobSpec)


# --- scheduling.volcano.sh/v1beta1 Queue / PodGroup ---------------------------------------


class Guarantee(_Base):
    resource: ResourceList = {}


class QueueSpec(_Base):
    weight: Int32 = 0
    capability: ResourceList = {}
    reclaimable: bool | None = None
    deserved: ResourceList = {}
    guarantee: Guarantee = msgspec.field(default_factory=Guarantee)
    parent: str = ""
    priority: Int32 = 0
    dequeue_strategy: str = ""
    type: str = ""


class QueueStatus(_Base):
    state: str = ""
    allocated: ResourceList = {}


class Queue(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: QueueSpec = msgspec.field(default_factory=QueueSpec)
    status: QueueStatus = msgspec.field(default_factory=QueueStatus)


class SubGroupPolicy(_Base):
    name: str = ""
    network_topology: NetworkTopology | None = None
    sub_group_size: Int32 | None = None
    min_sub_groups: Int32 | None = None


class PodGroupSpec(_Base):
    min_member: Int32 = 0
    min_task_member: dict[str, Int32] = {}
    queue: str = ""
    priority_class_name: str = ""
    min_resources: ResourceList | None = None
    network_topology: NetworkTopology | None = None
    sub_group_policy: list[SubGroupPolicy] = []


class PodGroupStatus(_Base):
    phase: str = ""


class PodGroup(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    status: PodGroupStatus = msgspec.field(default_factory=PodGroupStatus)


# --- core/v1 Pod (only what the pod webhooks read) ----------------------------------------


class PodSpec(_Base):
    scheduler_name: str = ""
    node_selector: dict[str, str] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    scheduling_gates: list[dict[str, Any]] | None = None


class Pod(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class Namespace(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


# --- topology / cron / flow ---------------------------------------------------------------


class ExactMatch(_Base):
    name: str = ""


class RegexMatch(_Base):
    pattern: str = ""


class MemberSelector(_Base):
    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: dict[str, Any] | None = None


class HyperNodeMember(_Base):
    type: str = ""
    selector: MemberSelector = msgspec.field(default_factory=MemberSelector)


class HyperNodeSpec(_Base):
    tier: Int32 | None = None
    tier_name: str = ""
    members: list[HyperNodeMember] = []


class HyperNode(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: HyperNodeSpec = msgspec.field(default_factory=HyperNodeSpec)


class CronJobSpec(_Base):
    schedule: str = ""
    time_zone: str | None = None
    starting_deadline_seconds: Int64 | None = None
    concurrency_policy: str = ""
    suspend: bool | None = None
    job_template: dict[str, Any] | None = None
    successful_jobs_history_limit: Int32 | None = None
    failed_jobs_history_limit: Int32 | None = None


class CronJob(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: CronJobSpec = msgspec.field(default_factory=CronJobSpec)


class FlowDependsOn(_Base):
    targets: list[str] = []


class Flow(_Base):
    name: str = ""
    depends_on: FlowDependsOn | None = None


class JobFlowSpec(_Base):
    flows: list[Flow] = []
    job_retain_policy: str = ""


class JobFlow(_Base):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: JobFlowSpec = msgspec.field(default_factory=JobFlowSpec)


# --- the webhook manager's --admission-conf file ------------------------------------------


class ResGroupObject(_Base):
    key: str = ""
    value: list[str] = []


class ResGroup(_Base):
    resource_group: str = ""
    object: ResGroupObject = msgspec.field(default_factory=ResGroupObject)
    scheduler_name: str = ""
    tolerations: list[dict[str, Any]] = []
    labels: dict[str, str] = {}
    affinity: str = ""
    # The ``annotation`` entries parsed once at load time (each is a one-line YAML map).
    annotation_pairs: dict[str, str] = {}


class AdmissionConfig(_Base):
    resource_groups: list[ResGroup] = []
