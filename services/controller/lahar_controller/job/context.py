"""What a job step reads besides the job and its pods, what it returns, and the render hooks.

Rendering pods and PodGroups and running the job plugins (env, svc, ssh, mpi, ...) live in
``job.render`` and ``job.plugins``; the state machine reaches them only through ``Render``, so the
lifecycle can be tested on its own.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from lahar_controller.job.effects import Effect
from lahar_controller.job.view import Obj

# A phase rule: given the recomputed status, change it in place; True when the phase moved.
UpdateFn = Callable[[Obj], bool]


class Render(Protocol):
    def pod(self, job: Obj, task: Obj, index: int, *, forwarding: bool, podgroup: Obj | None) -> Obj:
        """Replica ``index`` of ``task`` (``<job>-<task>-<index>``), before plugins."""
        ...

    def podgroup(self, job: Obj, existing: Obj | None) -> Obj | None:
        """The job's PodGroup to create (``existing`` None), the updated one, or None if unchanged."""
        ...

    def on_job_add(self, job: Obj) -> list[Effect]:
        """Plugins' job set-up; may write marks into ``job.status.controlledResources``."""
        ...

    def on_job_update(self, job: Obj) -> list[Effect]: ...

    def on_job_delete(self, job: Obj) -> list[Effect]:
        """Plugins' clean-up; removes their marks from ``job.status.controlledResources``."""
        ...

    def on_pod_create(self, job: Obj, pod: Obj) -> None:
        """Plugins' pod hooks, editing ``pod`` in place."""
        ...


def random_suffix(n: int = 12) -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(n))


@dataclass
class Context:
    now: datetime
    render: Render
    queue: Obj | None = None  # the job's Queue, None when it does not exist
    podgroup: Obj | None = None  # the job's PodGroup (``<job>-<uid>``, else legacy ``<job>``)
    pvcs: frozenset[str] = frozenset()  # PVC names in the job's namespace
    # pods of the job's namespace by name, for dependsOn; None: the job's own pods
    pods_by_name: Mapping[str, Obj] | None = None
    new_suffix: Callable[[], str] = field(default=random_suffix)


@dataclass
class Outcome:
    job: Obj  # the job as the step leaves it (status included)
    effects: list[Effect] = field(default_factory=list)
    error: str = ""  # non-empty: the step failed part-way; run the effects so far, then retry
