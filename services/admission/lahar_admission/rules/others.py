"""``/cronjobs/validate``, ``/hypernodes/validate`` and ``/jobflows/validate``."""

from __future__ import annotations

import re

import re2

from lahar_admission import fielderr as fe
from lahar_admission.fielderr import FieldError
from lahar_admission.names import is_qualified_name
from lahar_admission.review import Verdict
from lahar_admission.rules.common import CREATE, UPDATE, Ctx, decode, expect_resource
from lahar_admission.rules.cron import is_valid_schedule
from lahar_admission.types import CronJob, HyperNode, JobFlow

_TZ_PART = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
CRON_NAME_MAX = 63 - 11


def cronjob(ctx: Ctx) -> Verdict:
    expect_resource(ctx.request, "batch.volcano.sh", "v1alpha1", "cronjobs")
    cj = decode(ctx.request.object, CronJob)
    if ctx.op not in (CREATE, UPDATE):
        return Verdict.deny("expect operation to be 'CREATE' or 'UPDATE'")
    errs = [m for m in (_spec_message(cj, ctx).strip(), _cron_name_message(cj.metadata.name)) if m]
    return Verdict.deny("; ".join(errs)) if errs else Verdict.allow()


def _spec_message(cj: CronJob, ctx: Ctx) -> str:
    msg = ""
    schedule = cj.spec.schedule
    if not schedule:
        msg += " schedule is required, but got empty"
    elif "TZ" in schedule:
        msg += " schedule should not contain TZ or CRON_TZ, TZ should only be set in the timeZone field"
    elif not is_valid_schedule(schedule):
        msg += "schedule is not a valid cron expression"
    tz = cj.spec.time_zone
    if tz is None:
        return msg
    if tz == "":
        return msg + " timeZone must be nil or non-empty string, got empty string"
    for part in tz.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.match(part):
            msg += " unknown timeZone"
    if tz.lower() == "local":
        msg += " timeZone can't be Local, and must be defined in https://www.iana.org/time-zones"
    elif tz not in ctx.settings.time_zones:
        msg += " invalid timeZone"
    return msg


def _cron_name_message(name: str) -> str:
    if len(name) > CRON_NAME_MAX:
        return (
            f"cronJob name must be no more than {CRON_NAME_MAX} characters "
            "to accommodate job name suffix (max 63 total)"
        )
    errs = is_qualified_name(name)
    if errs:
        return f"invalid cronJob name {fe.show(name)}: {'; '.join(errs)}"
    return ""


def re2_error(pattern: str) -> str:
    """The RE2 compile error for ``pattern`` (empty when it compiles), as Go prints it."""
    try:
        re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else str(exc)
        text = detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
        return f"error parsing regexp: {text}"
    return ""


def hypernode(ctx: Ctx) -> Verdict:
    expect_resource(ctx.request, "topology.volcano.sh", "v1alpha1", "hypernodes")
    if ctx.op not in (CREATE, UPDATE):
        return Verdict.allow()
    hn = decode(ctx.request.object, HyperNode)
    errs: list[FieldError] = []
    if not hn.spec.members:
        errs.append(fe.invalid("spec.members", [], "member must have at least one member"))
    for member in hn.spec.members:
        rm = member.selector.regex_match
        if rm is not None and rm.pattern:
            err = re2_error(rm.pattern)
            if err:
                errs.append(
                    fe.invalid(
                        "spec.members.selector.regexMatch.pattern",
                        rm.pattern,
                        f"member regexMatch pattern is invalid: {err}",
                    )
                )
    return Verdict.deny(fe.aggregate(errs)) if errs else Verdict.allow()


def jobflow(ctx: Ctx) -> Verdict:
    expect_resource(ctx.request, "flow.volcano.sh", "v1alpha1", "jobflows")
    flow = decode(ctx.request.object, JobFlow)
    if ctx.op not in (CREATE, UPDATE):
        return Verdict.deny("expect operation to be 'CREATE' or 'UPDATE'")
    err = flow_dag_error(flow)
    return Verdict.deny(err) if err else Verdict.allow()


def flow_dag_error(flow: JobFlow) -> str:
    # Duplicate flow names: the last one wins, silently.
    graph: dict[str, list[str]] = {}
    for f in flow.spec.flows:
        graph[f.name] = list(f.depends_on.targets) if f.depends_on else []
    for targets in graph.values():
        for target in targets:
            if target not in graph:
                return f"jobflow Flow is not DAG: vertex is not defined: {target}"
    return "" if _acyclic(graph) else "jobflow Flow is not DAG"


def _acyclic(graph: dict[str, list[str]]) -> bool:
    """Iterative three-colour DFS (a self-dependency is a cycle too)."""
    state: dict[str, int] = {}
    for root in graph:
        if state.get(root):
            continue
        stack = [(root, iter(graph[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return False
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(graph[nxt])))
    return True
