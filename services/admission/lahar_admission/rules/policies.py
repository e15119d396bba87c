"""Lifecycle-policy rules (Volcano's validatePolicies), shared by job- and task-level lists."""

from __future__ import annotations

from lahar_admission.fielderr import invalid
from lahar_admission.types import LifecyclePolicy

# Events and actions a user may write; the internal ones exist but are refused.
ALLOWED_EVENTS = (
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "Unknown",
    "TaskCompleted",
    "TaskFailed",
    "JobUpdated",
)
ALLOWED_ACTIONS = (
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
)


def _events_of(policy: LifecyclePolicy) -> list[str]:
    """``events`` then ``event``, de-duplicated in order."""
    seen: list[str] = []
    for e in [*policy.events, *([policy.event] if policy.event else [])]:
        if e not in seen:
            seen.append(e)
    return seen


def _check_events(policy: LifecyclePolicy, path: str, used: set[str]) -> str | None:
    for event in _events_of(policy):
        if event not in ALLOWED_EVENTS:
            return str(invalid(path, event, "invalid policy event"))
        if policy.action not in ALLOWED_ACTIONS:
            return str(invalid(path, policy.action, "invalid policy action"))
        if event in used:
            return f"duplicate event {event}  across different policy"
        used.add(event)
    return None


def policy_errors(policies: list[LifecyclePolicy], path: str) -> list[str]:
    """The errors of one policy list; checking stops at the first failing policy."""
    errs: list[str] = []
    events: set[str] = set()
    codes: set[int] = set()
    for policy in policies:
        has_event = bool(policy.event) or bool(policy.events)
        if has_event and policy.exit_code is not None:
            errs.append("must not specify event and exitCode simultaneously")
            break
        if not has_event and policy.exit_code is None:
            errs.append("either event and exitCode should be specified")
            break
        if has_event:
            err = _check_events(policy, path, events)
            if err:
                errs.append(err)
                break
            continue
        code = policy.exit_code
        assert code is not None
        if code == 0:
            errs.append("0 is not a valid error code")
            break
        if code in codes:
            errs.append(f"duplicate exitCode {code}")
            break
        codes.add(code)
    if "*" in events and len(events) > 1:
        errs.append("if there's * here, no other policy should be here")
    return errs


def multierror(errs: list[str]) -> str:
    """hashicorp/go-multierror's text."""
    noun = "error" if len(errs) == 1 else "errors"
    body = "\n\t".join(f"* {e}" for e in errs)
    return f"{len(errs)} {noun} occurred:\n\t{body}\n\n"


def go_list(items: tuple[str, ...]) -> str:
    return "[" + " ".join(items) + "]"


def policy_fragment(policies: list[LifecyclePolicy], path: str) -> str:
    """The text Volcano appends for a failing list (empty when the list is valid)."""
    errs = policy_errors(policies, path)
    if not errs:
        return ""
    return (
        multierror(errs) + f" valid events are {go_list(ALLOWED_EVENTS)}, valid actions are {go_list(ALLOWED_ACTIONS)};"
    )
