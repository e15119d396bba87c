"""msgspec types for the Kubernetes and Volcano objects a scheduler needs.

They decode JSON and YAML exactly as ``kubectl get -o yaml`` prints them (camelCase keys) and
ignore every field they do not declare.  Resource lists hold ``Quantity`` values, so a malformed
quantity is a decode error with its path (see ``lahar.api.codec``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from lahar.api.quantity import Quantity

ResourceList = dict[str, Quantity]


class _Base(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    pass


class OwnerReference(_Base):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(_Base):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []


# --- core/v1 -------------------------------------------------------------------------------


class ResourceRequirements(_Base):
    requests: ResourceList = {}
    limits: ResourceList = {}


class ContainerPort(_Base):
    container_port: int = 0
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""
    name: str = ""


class Container(_Base):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = []
    restart_policy: str | None = None
    command: list[str] = []
    args: list[str] = []


class LabelSelectorRequirement(_Base):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(_Base):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class NodeSelectorRequirement(_Base):
    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(_Base):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_Base):
    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(_Base):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(_Base):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class PodAffinityTerm(_Base):
    label_selector: LabelSelector | None = None
    namespaces: list[str] = []
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = []
    mismatch_label_keys: list[str] = []


class WeightedPodAffinityTerm(_Base):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(_Base):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = []


class Affinity(_Base):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class Toleration(_Base):
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class Taint(_Base):
    key: str
    value: str = ""
    effect: str = ""


class TopologySpreadConstraint(_Base):
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


class SchedulingGate(_Base):
    name: str


class PodResourceClaim(_Base):
    """An entry of ``pod.spec.resourceClaims``: a claim by name or one made from a template."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodResourceClaimStatus(_Base):
    name: str = ""
    resource_claim_name: str | None = None


class PodSpec(_Base):
    containers: list[Container] = []
    init_containers: list[Container] = []
    node_name: str = ""
    scheduler_name: str = ""
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    node_selector: dict[str, str] = {}
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    overhead: ResourceList = {}
    resources: ResourceRequirements | None = None
    scheduling_gates: list[SchedulingGate] = []
    restart_policy: str = ""
    host_network: bool = False
    termination_grace_period_seconds: int | None = None
    service_account_name: str = ""
    volumes: list[dict[str, Any]] = []
    resource_claims: list[PodResourceClaim] = []


class Condition(_Base):
    type: str
    status: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    last_probe_time: str | None = None
    transition_id: str = msgspec.field(default="", name="transitionID")


class PodStatus(_Base):
    phase: str = ""
    conditions: list[Condition] = []
    nominated_node_name: str = ""
    start_time: str | None = None
    host_ip: str = msgspec.field(default="", name="hostIP")
    pod_ip: str = msgspec.field(default="", name="podIP")
    message: str = ""
    reason: str = ""
    resource_claim_statuses: list[PodResourceClaimStatus] = []


class Pod(_Base):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


class NodeSpec(_Base):
    unschedulable: bool = False
    taints: list[Taint] = []
    pod_cidr: str = msgspec.field(default="", name="podCIDR")


class NodeStatus(_Base):
    capacity: ResourceList = {}
    allocatable: ResourceList = {}
    conditions: list[Condition] = []


class Node(_Base):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


class Namespace(_Base):
    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class ResourceQuotaSpec(_Base):
    hard: ResourceList = {}


class ResourceQuotaStatus(_Base):
    hard: ResourceList = {}
    used: ResourceList = {}


class ResourceQuota(_Base):
    api_version: str = "v1"
    kind: str = "ResourceQuota"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceQuotaSpec = msgspec.field(default_factory=ResourceQuotaSpec)
    status: ResourceQuotaStatus = msgspec.field(default_factory=ResourceQuotaStatus)


# --- policy/v1 -----------------------------------------------------------------------------


class PodDisruptionBudgetSpec(_Base):
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodDisruptionBudgetStatus(_Base):
    disruptions_allowed: int = 0
    # Pods the API server has admitted an eviction for, by name → the time it did.
    disrupted_pods: dict[str, str] = {}
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0


class PodDisruptionBudget(_Base):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = msgspec.field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = msgspec.field(default_factory=PodDisruptionBudgetStatus)


# --- scheduling.k8s.io/v1 ------------------------------------------------------------------


class PriorityClass(_Base):
    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None
    description: str = ""


# --- scheduling.volcano.sh/v1beta1 ---------------------------------------------------------


class NetworkTopologySpec(_Base):
    """A job's network-topology constraint: ``hard`` keeps every task inside one HyperNode of
    tier ≤ ``highestTierAllowed`` (or the tier named ``highestTierName``); ``soft`` prefers it."""

    mode: str = ""
    highest_tier_allowed: int | None = None
    highest_tier_name: str = ""


class SubGroupPolicySpec(_Base):
    """A PodGroup sub-group policy (kept whole; the scheduler reads its networkTopology only)."""

    name: str = ""
    sub_group_size: int | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] = []
    network_topology: NetworkTopologySpec | None = None


class PodGroupSpec(_Base):
    min_member: int = 0
    min_task_member: dict[str, int] = {}
    queue: str = ""
    priority_class_name: str = ""
    min_resources: ResourceList | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicySpec] = []


class PodGroupStatus(_Base):
    phase: str = ""
    conditions: list[Condition] = []
    running: int = 0
    succeeded: int = 0
    failed: int = 0


class PodGroup(_Base):
    api_version: str = "scheduling.volcano.sh/v1beta1"
    kind: str = "PodGroup"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    status: PodGroupStatus = msgspec.field(default_factory=PodGroupStatus)


class Guarantee(_Base):
    resource: ResourceList = {}


class QueueSpec(_Base):
    weight: int = 1
    capability: ResourceList = {}
    reclaimable: bool | None = None
    guarantee: Guarantee | None = None
    deserved: ResourceList = {}
    parent: str = ""
    priority: int = 0
    affinity: dict[str, Any] | None = None
    extend_clusters: list[dict[str, Any]] = []


class QueueStatus(_Base):
    state: str = ""
    allocated: ResourceList = {}
    pending: int = 0
    running: int = 0
    inqueue: int = 0
    unknown: int = 0
    completed: int = 0


class Queue(_Base):
    api_version: str = "scheduling.volcano.sh/v1beta1"
    kind: str = "Queue"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: QueueSpec = msgspec.field(default_factory=QueueSpec)
    status: QueueStatus = msgspec.field(default_factory=QueueStatus)


# --- batch.volcano.sh/v1alpha1 -------------------------------------------------------------


class PodTemplateSpec(_Base):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)


class LifecyclePolicy(_Base):
    action: str = ""
    event: str = ""
    events: list[str] = []
    exit_code: int | None = None
    timeout: str | None = None


class DependsOn(_Base):
    name: list[str] = []
    iteration: str = ""


class TaskSpec(_Base):
    name: str = ""
    replicas: int = 0
    min_available: int | None = None
    template: PodTemplateSpec = msgspec.field(default_factory=PodTemplateSpec)
    policies: list[LifecyclePolicy] = []
    topology_policy: str = ""
    max_retry: int = 0
    depends_on: DependsOn | None = None
    partition_policy: dict[str, Any] | None = None


class JobSpec(_Base):
    scheduler_name: str = ""
    min_available: int = 0
    volumes: list[dict[str, Any]] = []
    tasks: list[TaskSpec] = []
    policies: list[LifecyclePolicy] = []
    plugins: dict[str, list[str]] = {}
    running_estimate: str | None = None
    queue: str = ""
    max_retry: int = 0
    ttl_seconds_after_finished: int | None = None
    priority_class_name: str = ""
    min_success: int | None = None
    network_topology: NetworkTopologySpec | None = None


class JobState(_Base):
    phase: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class JobStatus(_Base):
    state: JobState = msgspec.field(default_factory=JobState)
    min_available: int = 0
    task_status_count: dict[str, Any] = {}
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    version: int = 0
    retry_count: int = 0
    running_duration: str | None = None
    conditions: list[dict[str, Any]] = []


class Job(_Base):
    api_version: str = "batch.volcano.sh/v1alpha1"
    kind: str = "Job"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: JobSpec = msgspec.field(default_factory=JobSpec)
    status: JobStatus = msgspec.field(default_factory=JobStatus)


# -- nodeinfo.volcano.sh/v1alpha1 Numatopology (one per node, named after it) -------------------
class NumaResourceInfo(_Base):
    allocatable: str = ""  # a cpuset list, "0-3,8": the ids still free for exclusive use
    capacity: int = 0


class CPUInfo(_Base):
    numa: int = 0
    socket: int = 0
    core: int = 0


class ContainerAllocation(_Base):
    name: str = ""
    allocations: dict[str, str] = {}


class PodAllocation(_Base):
    uid: str = ""
    name: str = ""
    namespace: str = ""
    container_allocations: list[ContainerAllocation] = []


class NumatopoSpec(_Base):
    policies: dict[str, str] = {}  # CPUManagerPolicy, TopologyManagerPolicy
    res_reserved: dict[str, str] = {}
    numares: dict[str, NumaResourceInfo] = {}
    cpu_detail: dict[str, CPUInfo] = {}
    pod_allocations: list[PodAllocation] = []


class Numatopology(_Base):
    api_version: str = "nodeinfo.volcano.sh/v1alpha1"
    kind: str = "Numatopology"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NumatopoSpec = msgspec.field(default_factory=NumatopoSpec)


# --- topology.volcano.sh/v1alpha1 -----------------------------------------------------------


class ExactMatch(_Base):
    name: str = ""


class RegexMatch(_Base):
    pattern: str = ""


class MemberSelector(_Base):
    """Exactly one of the three in a valid object (admission enforces it)."""

    exact_match: ExactMatch | None = None
    regex_match: RegexMatch | None = None
    label_match: LabelSelector | None = None


class MemberSpec(_Base):
    type: str = ""  # "Node" or "HyperNode"
    selector: MemberSelector = msgspec.field(default_factory=MemberSelector)


class HyperNodeSpec(_Base):
    tier: int = 0
    tier_name: str = ""
    members: list[MemberSpec] = []


class HyperNodeStatus(_Base):
    conditions: list[Condition] = []
    node_count: int | None = None


class HyperNode(_Base):
    """A network-topology domain: real nodes (tier 1, usually) or other HyperNodes (above)."""

    api_version: str = "topology.volcano.sh/v1alpha1"
    kind: str = "HyperNode"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: HyperNodeSpec = msgspec.field(default_factory=HyperNodeSpec)
    status: HyperNodeStatus = msgspec.field(default_factory=HyperNodeStatus)


# --- resource.k8s.io/v1 (dynamic resource allocation) ---------------------------------------


class CELDeviceSelector(_Base):
    expression: str = ""


class DeviceSelector(_Base):
    cel: CELDeviceSelector | None = None


class ExactDeviceRequest(_Base):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = "ExactCount"
    count: int = 1


class DeviceRequest(_Base):
    name: str = ""
    exactly: ExactDeviceRequest | None = None


class DeviceClaim(_Base):
    requests: list[DeviceRequest] = []


class ResourceClaimSpec(_Base):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(_Base):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""


class DeviceAllocationResult(_Base):
    results: list[DeviceRequestAllocationResult] = []


class AllocationResult(_Base):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None


class ResourceClaimConsumerReference(_Base):
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(_Base):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = []


class ResourceClaim(_Base):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "ResourceClaim"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


class DeviceAttribute(_Base):
    """One typed value (exactly one field is set)."""

    int_: int | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class DeviceCapacity(_Base):
    value: Quantity


class Device(_Base):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}


class ResourcePool(_Base):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 1


class ResourceSliceSpec(_Base):
    driver: str = ""
    pool: ResourcePool = msgspec.field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    devices: list[Device] = []


class ResourceSlice(_Base):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "ResourceSlice"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


class DeviceClassSpec(_Base):
    selectors: list[DeviceSelector] = []


class DeviceClass(_Base):
    api_version: str = "resource.k8s.io/v1"
    kind: str = "DeviceClass"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)


DraObject = ResourceClaim | ResourceSlice | DeviceClass

KubeObject = (
    Pod
    | Node
    | Namespace
    | ResourceQuota
    | PodDisruptionBudget
    | PriorityClass
    | PodGroup
    | Queue
    | Job
    | Numatopology
    | HyperNode
)

# (apiVersion group, kind) → type.  The group is matched without its version so that
# v1beta1/v1 variants that share the fields we read still decode.
KINDS: dict[tuple[str, str], type[Any]] = {
    ("", "Pod"): Pod,
    ("", "Node"): Node,
    ("", "Namespace"): Namespace,
    ("", "ResourceQuota"): ResourceQuota,
    ("policy", "PodDisruptionBudget"): PodDisruptionBudget,
    ("scheduling.k8s.io", "PriorityClass"): PriorityClass,
    ("scheduling.volcano.sh", "PodGroup"): PodGroup,
    ("scheduling.volcano.sh", "Queue"): Queue,
    ("batch.volcano.sh", "Job"): Job,
    ("nodeinfo.volcano.sh", "Numatopology"): Numatopology,
    ("topology.volcano.sh", "HyperNode"): HyperNode,
    ("resource.k8s.io", "ResourceClaim"): ResourceClaim,
    ("resource.k8s.io", "ResourceSlice"): ResourceSlice,
    ("resource.k8s.io", "DeviceClass"): DeviceClass,
}


def group_of(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""
