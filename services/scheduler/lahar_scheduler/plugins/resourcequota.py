"""resourcequota: enqueue admits a job only if its minResources fit every ResourceQuota of its
namespace (Volcano's resourcequota plugin).

Per quota: the job's minResources restricted to the names the quota limits (``hard``), added to
the quota's ``status.used`` and to the minResources of jobs of the namespace admitted earlier in
this session, must stay ≤ ``hard`` on each of those names.  Names are compared as Kubernetes
spells them (``cpu``, ``requests.cpu``, ``pods``, ``count/pods``…): Volcano's controller sizes
minResources with the ResourceQuota evaluator's names, so they meet the quota's.  Only the
namespace's quotas at session open count (the status the quota controller last wrote).
"""

from __future__ import annotations

from fractions import Fraction

import msgspec

from lahar.api.objects import ResourceList, ResourceQuotaStatus
from lahar.api.quantity import format_quantity
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.jobs import JobInfo
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import Vote
from lahar_scheduler.framework.why import Why
from lahar_scheduler.plugins.base import Plugin

Amounts = dict[str, Fraction]


class ResourceQuotaArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


def amounts(rl: ResourceList) -> Amounts:
    return {name: q.amount for name, q in rl.items()}


def quota_amount(name: str, value: Fraction) -> str:
    """A quota quantity as a person writes it: cores for cpu names, Gi/Mi for byte names."""
    base = name.rsplit(".", 1)[-1]
    if base == "cpu":
        return format_quantity(float(value * 1000), True)
    if base in ("memory", "ephemeral-storage", "storage") or base.startswith("hugepages-"):
        return format_quantity(float(value), False)
    return f"{float(value):g}"


def exceeded(request: Amounts, used: Amounts, pending: Amounts, hard: Amounts) -> list[str]:
    """Names the quota limits where used + pending + request would pass hard (quotav1's
    Mask then LessThanOrEqual: names the job does not request are not checked)."""
    out = []
    for name, limit in hard.items():
        if name in request and used.get(name, 0) + pending.get(name, 0) + request[name] > limit:
            out.append(name)
    return sorted(out)


def quota_why(
    namespace: str, quota: str, names: list[str], req: Amounts, st: ResourceQuotaStatus, pending: Amounts
) -> Why:
    used, hard = amounts(st.used), amounts(st.hard)
    parts, details, grow, free = [], [], [], []
    for n in names:
        taken = used.get(n, Fraction(0)) + pending.get(n, Fraction(0))
        left = max(Fraction(0), hard[n] - taken)
        parts.append(
            f"{n} {quota_amount(n, req[n])} requested, {quota_amount(n, left)} of hard {quota_amount(n, hard[n])} left"
        )
        more = f"; {quota_amount(n, pending[n])} more by jobs admitted this session" if pending.get(n) else ""
        details.append(f"{n}: quota {quota} has used {quota_amount(n, used.get(n, Fraction(0)))} (status.used){more}")
        grow.append(f"{n} to {quota_amount(n, taken + req[n])}")
        free.append(f"{quota_amount(n, req[n] - left)} {n}")
    summary = f"namespace {namespace}: resource quota {quota} insufficient: " + "; ".join(parts)
    remedy = f"raise quota {quota}'s hard {', '.join(grow)}, or free {', '.join(free)} in namespace {namespace}"
    return Why("enqueue", "resourcequota", summary, remedy, details)


class ResourceQuotaPlugin(Plugin):
    name = "resourcequota"
    Args = ResourceQuotaArgs

    def on_session_open(self, ssn: Session) -> None:
        self.ssn = ssn
        self.pending: dict[str, Amounts] = {}  # namespace → minResources of jobs admitted this session
        ssn.add(P.JOB_ENQUEUEABLE, self.enqueueable)
        ssn.add(P.JOB_ENQUEUED, self.enqueued)

    def enqueueable(self, job: JobInfo) -> Vote:
        pg = job.podgroup
        if pg is None or pg.spec.min_resources is None:
            return Vote.PERMIT
        quotas = self.ssn.snapshot.quotas.get(job.namespace)
        if not quotas:
            return Vote.PERMIT
        req = amounts(pg.spec.min_resources)
        held = self.pending.get(job.namespace, {})
        for name, st in sorted(quotas.items()):
            short = exceeded(req, amounts(st.used), held, amounts(st.hard))
            if short:
                # Volcano records an event only; the condition keeps its generic text.
                self.ssn.explain(job, quota_why(job.namespace, name, short, req, st, held))
                return Vote.REJECT
        return Vote.PERMIT

    def enqueued(self, job: JobInfo) -> None:
        pg = job.podgroup
        if pg is None or pg.spec.min_resources is None or job.namespace not in self.ssn.snapshot.quotas:
            return
        held = self.pending.setdefault(job.namespace, {})
        for name, value in amounts(pg.spec.min_resources).items():
            held[name] = held.get(name, Fraction(0)) + value
