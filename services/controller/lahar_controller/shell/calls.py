"""The API calls the controller may make: the one table its ClusterRole is written from.

The rules return effects naming objects by apiVersion and kind; ``resource_of`` maps them to the
resources ``lahar.adapters.kube`` knows.  Every call goes through ``check`` first, so the code
cannot make a call this table (and deploy/controller.yaml) does not grant.
"""

from __future__ import annotations

KIND_RESOURCES: dict[tuple[str, str], str] = {
    ("v1", "Pod"): "pods",
    ("v1", "Service"): "services",
    ("v1", "ConfigMap"): "configmaps",
    ("v1", "Secret"): "secrets",
    ("v1", "PersistentVolumeClaim"): "persistentvolumeclaims",
    ("v1", "Event"): "events",
    ("networking.k8s.io/v1", "NetworkPolicy"): "networkpolicies",
    ("scheduling.volcano.sh/v1beta1", "PodGroup"): "podgroups",
    ("scheduling.volcano.sh/v1beta1", "Queue"): "queues",
    ("batch.volcano.sh/v1alpha1", "Job"): "jobs",
    ("batch.volcano.sh/v1alpha1", "CronJob"): "cronjobs",
    ("bus.volcano.sh/v1alpha1", "Command"): "commands",
    ("flow.volcano.sh/v1alpha1", "JobFlow"): "jobflows",
    ("flow.volcano.sh/v1alpha1", "JobTemplate"): "jobtemplates",
    ("topology.volcano.sh/v1alpha1", "HyperNode"): "hypernodes",
}

# (verb, resource[/subresource]); verbs as RBAC spells them (PUT is "update").
CALLS: frozenset[tuple[str, str]] = frozenset(
    {
        # a Job's pods: created, marked out of sync (merge patch of annotations), deleted; plain
        # pods: annotated with their PodGroup
        ("create", "pods"),
        ("patch", "pods"),
        ("delete", "pods"),
        # a Job's PodGroup, and the PodGroups of plain pods
        ("create", "podgroups"),
        ("update", "podgroups"),
        ("delete", "podgroups"),
        # Jobs: the spec (claim names, forwarding mark) and status; TTL deletes after a fresh get;
        # CronJobs create and delete their runs
        ("get", "jobs"),
        ("create", "jobs"),
        ("update", "jobs"),
        ("update", "jobs/status"),
        ("delete", "jobs"),
        ("update", "cronjobs/status"),
        # Commands are executed once: deleted first
        ("delete", "commands"),
        # JobFlows and JobTemplates: their status (a flow's Jobs are created and deleted above)
        ("update", "jobflows/status"),
        ("update", "jobtemplates/status"),
        # queues: the standard ones created, parent and closed-by-parent marks, states and counts
        ("create", "queues"),
        ("patch", "queues"),
        ("patch", "queues/status"),
        # what the job plugins make (svc, ssh, ray, ...) and the claims a Job asks for
        ("create", "services"),
        ("delete", "services"),
        ("create", "configmaps"),
        ("get", "configmaps"),
        ("update", "configmaps"),
        ("delete", "configmaps"),
        ("create", "secrets"),
        ("delete", "secrets"),
        ("create", "networkpolicies"),
        ("delete", "networkpolicies"),
        ("create", "persistentvolumeclaims"),
        ("create", "events"),
        # HyperNodes discovered from node labels: kept in step with the nodes (re-read first)
        ("create", "hypernodes"),
        ("get", "hypernodes"),
        ("update", "hypernodes"),
        ("delete", "hypernodes"),
    }
)


class NotAllowed(Exception):
    """A call outside ``CALLS``: a bug (the ClusterRole would refuse it), never retried."""


class UnknownKind(Exception):
    """An effect on a kind the controller has no resource for."""


def resource_of(api_version: str, kind: str) -> str:
    try:
        return KIND_RESOURCES[(api_version, kind)]
    except KeyError:
        raise UnknownKind(f"no resource for {api_version} {kind}") from None


def check(verb: str, resource: str) -> None:
    if (verb, resource) not in CALLS:
        raise NotAllowed(f"the controller may not {verb} {resource}")
