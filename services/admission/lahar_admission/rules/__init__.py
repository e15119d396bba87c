"""The admission rules: pure functions from (request, cluster view, settings) to a verdict.

``admit(path, request, view, settings)`` is the single entry point.  Nothing here does I/O,
reads a clock or the environment: the cluster comes in through ``view`` and configuration
through ``settings``, so the same call answers a conformance case and a live request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lahar_admission import fielderr as fe
from lahar_admission.fielderr import FieldError
from lahar_admission.review import AdmissionRequest, Verdict
from lahar_admission.rules import jobmutate, jobs, others, podgroups, pods, queues, schema
from lahar_admission.rules.common import CREATE, UPDATE, Ctx, RuleError
from lahar_admission.settings import RuleSettings
from lahar_admission.view import ClusterView


@dataclass(frozen=True)
class Webhook:
    path: str
    rule: Callable[[Ctx], Verdict]
    group: str
    version: str
    resource: str
    kind: str
    mutating: bool
    operations: tuple[str, ...]
    # CRD-schema checks made alongside a validating webhook (doc §6), and on which operations.
    schema: Callable[[Any], list[FieldError]] | None = None
    schema_ops: tuple[str, ...] = (CREATE, UPDATE)


WEBHOOKS: dict[str, Webhook] = {
    w.path: w
    for w in (
        Webhook(
            "/jobs/validate",
            jobs.validate,
            "batch.volcano.sh",
            "v1alpha1",
            "jobs",
            "Job",
            False,
            ("CREATE", "UPDATE"),
            schema.job_errors,
        ),
        Webhook("/jobs/mutate", jobmutate.mutate, "batch.volcano.sh", "v1alpha1", "jobs", "Job", True, ("CREATE",)),
        Webhook(
            "/queues/validate",
            queues.validate,
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            "Queue",
            False,
            ("CREATE", "UPDATE", "DELETE"),
            schema.queue_errors,
        ),
        Webhook(
            "/queues/mutate",
            queues.mutate,
            "scheduling.volcano.sh",
            "v1beta1",
            "queues",
            "Queue",
            True,
            ("CREATE",),
        ),
        Webhook(
            "/podgroups/validate",
            podgroups.validate,
            "scheduling.volcano.sh",
            "v1beta1",
            "podgroups",
            "PodGroup",
            False,
            ("CREATE",),
            schema.podgroup_errors,
            (CREATE,),
        ),
        Webhook(
            "/podgroups/mutate",
            podgroups.mutate,
            "scheduling.volcano.sh",
            "v1beta1",
            "podgroups",
            "PodGroup",
            True,
            ("CREATE",),
        ),
        Webhook("/pods/validate", pods.validate, "", "v1", "pods", "Pod", False, ("CREATE",)),
        Webhook("/pods/mutate", pods.mutate, "", "v1", "pods", "Pod", True, ("CREATE",)),
        Webhook(
            "/hypernodes/validate",
            others.hypernode,
            "topology.volcano.sh",
            "v1alpha1",
            "hypernodes",
            "HyperNode",
            False,
            ("CREATE", "UPDATE"),
            schema.hypernode_errors,
        ),
        Webhook(
            "/cronjobs/validate",
            others.cronjob,
            "batch.volcano.sh",
            "v1alpha1",
            "cronjobs",
            "CronJob",
            False,
            ("CREATE", "UPDATE"),
            schema.cronjob_errors,
        ),
        Webhook(
            "/jobflows/validate",
            others.jobflow,
            "flow.volcano.sh",
            "v1alpha1",
            "jobflows",
            "JobFlow",
            False,
            ("CREATE", "UPDATE"),
        ),
    )
}

# (group, resource) pairs some webhook serves: anything else is a kind this service does not know.
KNOWN_RESOURCES = frozenset((w.group, w.resource) for w in WEBHOOKS.values())


class UnknownPath(LookupError):
    pass


def is_known_resource(request: AdmissionRequest) -> bool:
    return (request.resource.group, request.resource.resource) in KNOWN_RESOURCES


def admit(path: str, request: AdmissionRequest, view: ClusterView, settings: RuleSettings) -> Verdict:
    """Decide one request for the webhook at ``path`` (raises ``UnknownPath`` for other paths).

    Never raises for bad input: an object that does not decode, or an unexpected failure inside
    a rule, is a denial whose message says what went wrong (``Verdict.internal`` marks the
    latter so the service can count it)."""
    hook = WEBHOOKS.get(path)
    if hook is None:
        raise UnknownPath(path)
    ctx = Ctx(request, view, settings)
    try:
        verdict = hook.rule(ctx)
        if settings.schema_checks and hook.schema is not None and request.operation in hook.schema_ops:
            verdict = _with_schema(verdict, hook.schema(ctx.plain("object")))
    except RuleError as exc:
        return Verdict.deny(str(exc))
    except RecursionError:
        return Verdict.deny("object: nested too deeply")
    return verdict


def _with_schema(verdict: Verdict, errs: list[FieldError]) -> Verdict:
    """Add schema errors to the webhook's verdict: the webhook's own message comes first."""
    if not errs:
        return verdict
    text = fe.aggregate(errs)
    if verdict.allowed:
        return Verdict.deny(text)
    return Verdict.deny(f"{verdict.message.rstrip(';')}; {text}")
