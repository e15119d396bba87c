"""``/jobs/validate``: Volcano Job CREATE and UPDATE."""

from __future__ import annotations

from lahar_admission.names import go_list, is_dns1123_subdomain, is_qualified_name
from lahar_admission.review import Verdict
from lahar_admission.rules import jobcompare
from lahar_admission.rules.common import CREATE, UPDATE, Ctx, decode, expect_resource
from lahar_admission.rules.podtemplate import PodOptions, validate_pod_template
from lahar_admission.rules.policies import policy_fragment
from lahar_admission.rules.topology import topology_policy_fragment
from lahar_admission.types import Job, TaskSpec, VolumeSpec, both_tiers
from lahar_admission.view import not_found

KNOWN_PLUGINS = ("ssh", "env", "svc", "tensorflow", "mpi", "pytorch", "hcclrank", "ray")
BOTH_TIERS = "must not specify 'highestTierAllowed' and 'highestTierName' in networkTopology simultaneously"


def validate(ctx: Ctx) -> Verdict:
    expect_resource(ctx.request, "batch.volcano.sh", "v1alpha1", "jobs")
    job = decode(ctx.request.object, Job)
    if ctx.op == CREATE:
        msg = create_message(job, ctx)
        return Verdict.deny(msg.strip()) if msg else Verdict.allow()
    if ctx.op == UPDATE:
        old = decode(ctx.request.old_object, Job, "oldObject")
        err = update_error(old, job, ctx.plain("oldObject"), ctx.plain("object"))
        return Verdict.deny(err) if err else Verdict.allow()
    return Verdict.deny("expect operation to be 'CREATE' or 'UPDATE'")


def mpi_master(args: list[str] | None) -> str:
    """The ``--master`` flag of the mpi plugin's arguments (default ``master``)."""
    master = "master"
    items = list(args or [])
    for i, arg in enumerate(items):
        if arg.startswith("--master="):
            master = arg.split("=", 1)[1]
        elif arg == "--master" and i + 1 < len(items):
            master = items[i + 1]
    return master


def create_message(job: Job, ctx: Ctx) -> str:
    """Every problem of a new job, concatenated in Volcano's order (empty when it is valid)."""
    spec = job.spec
    if not spec.tasks:
        return "No task specified in job spec"
    if spec.plugins is not None and "mpi" in spec.plugins:
        master = mpi_master(spec.plugins["mpi"])
        if all(t.name != master for t in spec.tasks):
            return "The specified mpi master task was not found"
    out = [BOTH_TIERS if both_tiers(spec.network_topology) else ""]
    total, has_deps = _tasks_fragment(job, ctx, out)
    out.append(_job_name_fragment(job.metadata.name))
    if total < spec.min_available:
        out.append(" job 'minAvailable' should not be greater than total replicas in tasks;")
    out.append(policy_fragment(spec.policies, "spec.policies"))
    out.extend(f" unable to find job plugin: {name};" for name in (spec.plugins or {}) if name not in KNOWN_PLUGINS)
    out.append(volumes_fragment(spec.volumes))
    out.append(_queue_fragment(spec.queue, ctx))
    if has_deps and not is_dag(spec.tasks):
        out.append(" job has dependencies between tasks, but doesn't form a directed acyclic graph(DAG);")
    return "".join(out)


def _tasks_fragment(job: Job, ctx: Ctx, out: list[str]) -> tuple[int, bool]:
    names: set[str] = set()
    total = 0
    has_deps = False
    namespace = job.metadata.namespace or ctx.request.namespace
    opts = PodOptions(pod_level_resources=ctx.settings.pod_level_resources)
    for index, task in enumerate(job.spec.tasks):
        has_deps = has_deps or task.depends_on is not None
        if task.min_available is not None and task.min_available > task.replicas:
            out.append(f" 'minAvailable' is greater than 'replicas' in task: {task.name}, job: {job.metadata.name};")
        total += task.replicas
        if task.name in names:
            # Volcano stops looking at tasks after the first duplicate.
            out.append(f" duplicated task name {task.name};")
            break
        names.add(task.name)
        out.append(policy_fragment(task.policies, "spec.tasks.policies"))
        out.append(_pod_name_fragment(f"{job.metadata.name}-{task.name}-{index}"))
        out.append(_template_fragment(task, index, namespace, opts))
        out.append(partition_fragment(task, job.metadata.name))
    return total, has_deps


def _pod_name_fragment(pod_name: str) -> str:
    errs = is_qualified_name(pod_name)
    return f"create pod with name {pod_name} validate failed {go_list(errs)};" if errs else ""


def _job_name_fragment(name: str) -> str:
    errs = is_qualified_name(name)
    return f"create job with name {name} validate failed {go_list(errs)}" if errs else ""


def _template_fragment(task: TaskSpec, index: int, namespace: str, opts: PodOptions) -> str:
    errs = validate_pod_template(task.template, task.name, namespace, opts)
    if errs:
        return f"spec.task[{index}]." + "".join(f"{e}. " for e in errs)
    return topology_policy_fragment(task, index)


def partition_fragment(task: TaskSpec, job_name: str) -> str:
    pp = task.partition_policy
    if pp is None:
        return ""
    where = f"in task: {task.name}, job: {job_name}"
    msg = ""
    if pp.total_partitions <= 0:
        msg = f"'TotalPartitions' must be greater than 0 {where}"
    elif pp.partition_size <= 0:
        msg = f"'PartitionSize' must be greater than 0 {where}"
    elif task.replicas != pp.total_partitions * pp.partition_size:
        msg = f"'Replicas' are not equal to TotalPartitions*PartitionSize {where}"
    elif (
        task.min_available is not None
        and pp.min_partitions > 0
        and pp.min_partitions * pp.partition_size != task.min_available
    ):
        msg = f"'MinAvailable' is not equal to MinPartitions*PartitionSize {where}"
    return msg + (BOTH_TIERS if both_tiers(pp.network_topology) else "")


def volumes_fragment(volumes: list[VolumeSpec]) -> str:
    """validateIO: the first problem only."""
    seen: set[str] = set()
    for vol in volumes:
        if not vol.mount_path:
            return " mountPath is required;"
        if vol.mount_path in seen:
            return f" duplicated mountPath: {vol.mount_path};"
        if vol.volume_claim is None and not vol.volume_claim_name:
            return " either VolumeClaim or VolumeClaimName must be specified;"
        if vol.volume_claim_name:
            if vol.volume_claim is not None:
                return (
                    "conflict: If you want to use an existing PVC, just specify VolumeClaimName."
                    "If you want to create a new PVC, you do not need to specify VolumeClaimName"
                )
            errs = is_dns1123_subdomain(vol.volume_claim_name)
            if errs:
                return f"invalid VolumeClaimName {vol.volume_claim_name} : {go_list(errs)}"
        seen.add(vol.mount_path)
    return ""


def _queue_fragment(name: str, ctx: Ctx) -> str:
    queue = ctx.view.queue(name)
    if queue is None:
        return f" unable to find job queue: {not_found('queue.scheduling.volcano.sh', name)};"
    out = ""
    if queue.status.state != "Open":
        out += (
            " can only submit job to queue with state `Open`, "
            f"queue `{queue.metadata.name}` status is `{queue.status.state}`;"
        )
    if queue.metadata.name == "root":
        return out + " can not submit job to root queue;"
    children = ctx.view.children(queue.metadata.name)
    if children:
        out += f" can only submit job to leaf queue, queue `{queue.metadata.name}` has {len(children)} child queues;"
    return out


def is_dag(tasks: list[TaskSpec]) -> bool:
    """Kahn's sort over ``dependsOn``; a dependency on an unknown task never resolves, so it
    makes the job "not a DAG", as in Volcano."""
    in_degree: dict[str, int] = {}
    edges: dict[str, set[str]] = {}
    for task in tasks:
        in_degree[task.name] = 0
    for task in tasks:
        for dep in task.depends_on.name if task.depends_on else []:
            edges.setdefault(dep, set()).add(task.name)
            in_degree[task.name] = in_degree.get(task.name, 0) + 1
    ready = [name for name, degree in in_degree.items() if degree == 0]
    done = 0
    while ready:
        node = ready.pop()
        done += 1
        for nxt in edges.pop(node, set()):
            in_degree[nxt] -= 1
            if in_degree[nxt] == 0:
                ready.append(nxt)
    return done == len(tasks)


def update_error(old: Job, new: Job, old_plain: object, new_plain: object) -> str:
    """validateJobUpdate: the first problem, or empty."""
    total = 0
    for task in new.spec.tasks:
        if task.replicas < 0:
            return f"'replicas' must be >= 0 in task: {task.name}"
        if task.min_available is not None:
            if task.min_available < 0:
                return f"'minAvailable' must be >= 0 in task: {task.name}"
            if task.min_available > task.replicas:
                return f"'minAvailable' must be <= 'replicas' in task: {task.name}"
        msg = partition_fragment(task, new.metadata.name)
        if msg:
            return msg
        total += task.replicas
    if new.spec.min_available > total:
        return "job 'minAvailable' must not be greater than total replicas"
    if new.spec.min_available < 0:
        return "job 'minAvailable' must be >= 0"
    if both_tiers(new.spec.network_topology):
        return BOTH_TIERS
    if len(old.spec.tasks) != len(new.spec.tasks):
        return "job updates may not add or remove tasks"
    if not jobcompare.same_frozen_spec(old_plain, new_plain):
        return (
            "job updates may not change fields other than `minAvailable`, "
            "`tasks[*].replicas under spec` and `PriorityClassName`"
        )
    return ""
