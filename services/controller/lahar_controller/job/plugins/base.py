"""What a job plugin is, and what its job-level hooks hand back.

A plugin is built from its arguments (``job.spec.plugins[name]``) for each call, as in Volcano.
Its hooks are pure: the pod-create hook edits the pod dict it is given; the job hooks add the
objects to write or delete to ``Effects`` and update the job's ``status.controlledResources``
there, and the service shell performs them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lahar_controller.job import names
from lahar_controller.job.plugins.flags import FlagValue, parse_flags

Obj = dict[str, Any]
# (private key PEM, public key in authorized_keys form), both bytes
KeyGen = Callable[[], tuple[bytes, bytes]]


class PluginError(Exception):
    """A plugin hook failed; the message is Volcano's (e.g. ``failed to get plugin new``)."""


@dataclass(frozen=True)
class Write:
    """An object a plugin needs.  ``replace``: create it, or overwrite the existing one's data
    (hosts files follow the job's size); otherwise create it only when it is missing."""

    object: Obj
    replace: bool = False


@dataclass(frozen=True)
class Ref:
    """An object to delete (NotFound counts as done)."""

    api_version: str
    kind: str
    namespace: str
    name: str


@dataclass
class Effects:
    """What the job-level hooks want done, and the job's ``status.controlledResources`` after them."""

    controlled: dict[str, str]
    writes: list[Write] = field(default_factory=list)
    deletes: list[Ref] = field(default_factory=list)
    keygen: KeyGen | None = None


class Plugin:
    """A Volcano job plugin.  Subclasses set ``name`` and ``flags`` (name -> default; the
    default's type is the flag's type) and override the hooks they need."""

    name: ClassVar[str] = ""
    flags: ClassVar[Mapping[str, FlagValue]] = {}

    def __init__(self, args: Sequence[str]) -> None:
        self.args = list(args)
        # Like Volcano, a bad argument is not fatal: it is reported and the defaults stay.
        self.values, self.flag_error = parse_flags(self.args, self.flags)

    def flag_str(self, name: str) -> str:
        return str(self.values[name])

    def flag_int(self, name: str) -> int:
        value = self.values[name]
        return value if isinstance(value, int) else 0

    def flag_bool(self, name: str) -> bool:
        return self.values[name] is True

    @property
    def mark(self) -> str:
        return names.plugin_mark(self.name)

    def marked(self, effects: Effects) -> bool:
        return effects.controlled.get(self.mark) == self.name

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        """Edit a new pod of the job before it is created."""

    def on_job_add(self, job: Mapping[str, Any], effects: Effects) -> None:
        """Set the job up (once: the mark in controlledResources says it is done)."""
        effects.controlled[self.mark] = self.name

    def on_job_update(self, job: Mapping[str, Any], effects: Effects) -> None:
        """Follow a change of the job (e.g. its size)."""

    def on_job_delete(self, job: Mapping[str, Any], effects: Effects) -> None:
        """Clean up what the set-up made (only when it was made: the mark)."""
        effects.controlled.pop(self.mark, None)
