"""Preparing a dump of real objects for ``lahar simulate``: make it a cluster Volcano would run,
and say what in it the scheduler will not see.

A dump is rarely a clean test case: it lacks the ``default`` Queue (Volcano's controller makes
it, so no one writes it down), holds kinds the scheduler does not read, misspelled kinds, and
references to objects left out of it.  Each is reported in one line per kind of problem, with
counts and a few names, rather than silently changing what is simulated.
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from lahar.api.codec import decode_object
from lahar.api.files import Skipped
from lahar.api.objects import (
    KINDS,
    Job,
    KubeObject,
    Pod,
    PodDisruptionBudget,
    PodGroup,
    Queue,
    ResourceQuota,
    group_of,
)
from lahar_controller.queues import DEFAULT_QUEUE
from lahar_scheduler.framework.snapshot import DEFAULT_SCHEDULER_NAMES
from lahar_scheduler.framework.types import GROUP_NAME_ANNOTATION

SHOWN = 5  # names listed per warning line; the rest are counted
# Groups of older releases whose objects a dump may still hold, with what replaced them.
OLD_GROUPS = {
    "scheduling.incubator.k8s.io": "kube-batch's group",
    "scheduling.sigs.dev": "kube-batch's later group",
}
_GROUP_OF_KIND = {kind: group for group, kind in KINDS}
# Kinds named as one we read, in another group, that are not mistakes (a Kubernetes batch Job).
_NAMESAKES = {("batch", "Job")}


@dataclass
class Dump:
    objects: list[KubeObject]
    warnings: list[str] = field(default_factory=list)


def prepare(
    objects: Iterable[KubeObject],
    skipped: Iterable[Skipped] = (),
    *,
    cluster: bool = True,
    quotas_read: bool = True,
    pdbs_read: bool = True,
) -> Dump:
    """The objects to simulate and the warnings about them.  ``cluster`` is False for a
    conformance case: it reproduces a Volcano unit test's cache, which holds exactly the queues
    it lists, so no ``default`` Queue is added to it.  ``quotas_read`` is False when the
    configuration does not enable the resourcequota plugin (ResourceQuotas are then unused), and
    ``pdbs_read`` when it does not enable the pdb plugin."""
    dump = Dump(list(objects))
    dump.warnings += skipped_lines(list(skipped))
    dump.warnings += unread_lines(dump.objects, quotas_read, pdbs_read)
    note = add_default_queue(dump.objects) if cluster else ""
    if note:
        dump.warnings.append(note)
    dump.warnings += dangling_lines(dump.objects)
    return dump


def some(names: list[str]) -> str:
    """A few names, and how many more."""
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _verb(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def skipped_lines(skipped: list[Skipped]) -> list[str]:
    """Documents of kinds the loader does not read: near-misses of a kind we do read each get a
    line of their own (they are probably meant to be scheduled); the rest share one line."""
    suspects: dict[tuple[str, str, str], list[Skipped]] = defaultdict(list)
    others: Counter[str] = Counter()
    for s in skipped:
        hint = _hint(s.api_version, s.kind)
        if hint:
            suspects[(s.api_version, s.kind, hint)].append(s)
        else:
            others[f"{s.kind} ({s.api_version})"] += 1
    lines = [
        f"ignored {_count(len(items), 'object')} of kind {kind or '(none)'!r} apiVersion {api or '(none)'!r} "
        f"({hint}): {some([i.name for i in items])}, first in {items[0].where}"
        for (api, kind, hint), items in suspects.items()
    ]
    if others:
        kinds = ", ".join(f"{n} {k}" for k, n in others.most_common())
        lines.append(f"ignored {_count(others.total(), 'object')} of kinds the scheduler does not read: {kinds}")
    return lines


def _hint(api_version: str, kind: str) -> str:
    """Why an object that looks meant for the scheduler was not read; empty when it does not."""
    if not api_version or not kind:
        return "no apiVersion or kind"
    group = group_of(api_version)
    if (group, kind) in _NAMESAKES:
        return ""
    if kind in _GROUP_OF_KIND:
        want = _GROUP_OF_KIND[kind] or "v1"
        old = OLD_GROUPS.get(group)
        was = f"{group} is {old}; " if old else ""
        return f"{was}Lahar reads {kind} from {want}"
    close = difflib.get_close_matches(kind, list(_GROUP_OF_KIND), n=1, cutoff=0.8)
    lower = {k.lower(): k for k in _GROUP_OF_KIND}
    match = lower.get(kind.lower()) or (close[0] if close else None)
    if match:
        return f"not a kind Lahar reads: did you mean {match!r}?"
    if group in OLD_GROUPS or group.endswith("volcano.sh"):
        return "not a kind Lahar reads"
    return ""


def unread_lines(objects: list[KubeObject], quotas_read: bool = True, pdbs_read: bool = True) -> list[str]:
    """Kinds the loader decodes but a simulation does not use."""
    jobs = [f"{o.metadata.namespace}/{o.metadata.name}" for o in objects if isinstance(o, Job)]
    quotas = [f"{o.metadata.namespace}/{o.metadata.name}" for o in objects if isinstance(o, ResourceQuota)]
    lines = []
    if jobs:
        lines.append(
            f"ignored {_count(len(jobs), 'Volcano Job')}: simulate does not run the job controller, "
            f"so only the PodGroups and pods in the files are scheduled: {some(jobs)}"
        )
    if quotas and not quotas_read:
        lines.append(
            f"ignored {_count(len(quotas), 'ResourceQuota')}: "
            f"the configuration does not enable the resourcequota plugin: {some(quotas)}"
        )
    pdbs = [f"{o.metadata.namespace}/{o.metadata.name}" for o in objects if isinstance(o, PodDisruptionBudget)]
    if pdbs and not pdbs_read:
        lines.append(
            f"ignored {_count(len(pdbs), 'PodDisruptionBudget')}: "
            f"the configuration does not enable the pdb plugin: {some(pdbs)}"
        )
    return lines


def add_default_queue(objects: list[KubeObject]) -> str:
    """Add Volcano's ``default`` Queue when the files have none, as a Volcano cluster always has
    one (its controller creates it); returns a note saying so, or ''."""
    if any(isinstance(o, Queue) and o.metadata.name == "default" for o in objects):
        return ""
    queue = decode_object(DEFAULT_QUEUE)
    assert queue is not None  # a Queue is a kind the codec reads
    objects.append(queue)
    spec = DEFAULT_QUEUE["spec"]
    return (
        f"no 'default' Queue in the files: added one (weight {spec['weight']}, reclaimable), "
        "as a Volcano cluster always has it"
    )


def _ours(pod: Pod) -> bool:
    return pod.spec.scheduler_name in DEFAULT_SCHEDULER_NAMES


def dangling_lines(objects: list[KubeObject]) -> list[str]:
    """Pods and PodGroups that name objects missing from the files: Volcano does not schedule
    them (its snapshot skips a job without its PodGroup or its queue), and neither does Lahar."""
    queues = {o.metadata.name for o in objects if isinstance(o, Queue)}
    groups = {f"{o.metadata.namespace}/{o.metadata.name}": o for o in objects if isinstance(o, PodGroup)}
    pods = [o for o in objects if isinstance(o, Pod) and _ours(o)]
    lines = []
    missing: Counter[str] = Counter()
    bare = []
    for pod in pods:
        group = pod.metadata.annotations.get(GROUP_NAME_ANNOTATION, "")
        if not group:
            if not pod.spec.node_name:
                bare.append(f"{pod.metadata.namespace}/{pod.metadata.name}")
        elif f"{pod.metadata.namespace}/{group}" not in groups:
            missing[f"{pod.metadata.namespace}/{group}"] += 1
    if missing:
        named = [f"{g} ({_count(n, 'pod')})" for g, n in sorted(missing.items())]
        lines.append(
            f"{_count(missing.total(), 'pod')} {_verb(missing.total(), 'names', 'name')} "
            f"{_count(len(missing), 'PodGroup')} not in the files; "
            f"their jobs are not scheduled: {some(named)}"
        )
    if bare:
        lines.append(
            f"{_count(len(bare), 'pending pod')} of scheduler {'/'.join(sorted(DEFAULT_SCHEDULER_NAMES))} "
            f"{_verb(len(bare), 'names', 'name')} no PodGroup (Volcano's controller would make one each; "
            f"simulate does not), so {_verb(len(bare), 'it is', 'they are')} not scheduled: {some(sorted(bare))}"
        )
    lost: dict[str, list[str]] = defaultdict(list)
    for key, pg in sorted(groups.items()):
        queue = pg.spec.queue or "default"
        if queue not in queues:
            lost[queue].append(key)
    lines += [
        f"queue {q!r} is not in the files: {_count(len(keys), 'PodGroup')} in it "
        f"{_verb(len(keys), 'is', 'are')} not scheduled: {some(keys)}"
        for q, keys in sorted(lost.items())
    ]
    return lines
