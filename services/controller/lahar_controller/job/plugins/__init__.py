"""Volcano's job plugins (``job.spec.plugins``: name -> arguments), as pure hooks.

* ``on_pod_create(job, pod)`` edits a pod about to be created (env, ports, volumes, ...).
* ``on_job_add(job)`` / ``on_job_update(job)`` / ``on_job_delete(job)`` return ``Effects``:
  objects to write (``Write``: Service, ConfigMap, Secret, NetworkPolicy), objects to delete
  (``Ref``), and the job's ``status.controlledResources`` afterwards (the plugins' marks), which
  the caller persists.

Plugins run in the order the job lists them.  An unknown name fails every hook with Volcano's
message ``failed to get plugin <name>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lahar_controller.job.plugins.base import Effects, KeyGen, Obj, Plugin, PluginError, Ref, Write
from lahar_controller.job.plugins.env import EnvPlugin
from lahar_controller.job.plugins.hcclrank import HcclRankPlugin
from lahar_controller.job.plugins.mpi import MpiPlugin
from lahar_controller.job.plugins.pytorch import PytorchPlugin
from lahar_controller.job.plugins.ray import RayPlugin
from lahar_controller.job.plugins.ssh import SshPlugin
from lahar_controller.job.plugins.svc import SvcPlugin
from lahar_controller.job.plugins.tensorflow import TensorflowPlugin

__all__ = [
    "REGISTRY",
    "Effects",
    "KeyGen",
    "Plugin",
    "PluginError",
    "Ref",
    "Write",
    "build",
    "job_plugins",
    "on_job_add",
    "on_job_delete",
    "on_job_update",
    "on_pod_create",
]


def _registry(*classes: type[Plugin]) -> dict[str, type[Plugin]]:
    out: dict[str, type[Plugin]] = {}
    for cls in classes:
        if cls.name in out:
            raise ValueError(f"plugin {cls.name} registered twice")
        out[cls.name] = cls
    return out


REGISTRY: dict[str, type[Plugin]] = _registry(
    EnvPlugin, SvcPlugin, SshPlugin, MpiPlugin, PytorchPlugin, TensorflowPlugin, RayPlugin, HcclRankPlugin
)

PluginArgs = Mapping[str, Sequence[str] | None]


def job_plugins(job: Mapping[str, Any]) -> dict[str, list[str]]:
    """``job.spec.plugins`` as name -> argument list."""
    spec = job.get("spec")
    raw = spec.get("plugins") if isinstance(spec, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    return {str(name): [str(a) for a in args] if isinstance(args, list) else [] for name, args in raw.items()}


def build(name: str, args: Sequence[str] | None) -> Plugin:
    cls = REGISTRY.get(name)
    if cls is None:
        raise PluginError(f"failed to get plugin {name}")
    return cls(list(args or []))


def _built(job: Mapping[str, Any], plugins: PluginArgs | None) -> list[Plugin]:
    chosen = job_plugins(job) if plugins is None else plugins
    return [build(name, args) for name, args in chosen.items()]


def on_pod_create(job: Mapping[str, Any], pod: Obj, plugins: PluginArgs | None = None) -> Obj:
    """Run the pod-create hooks on ``pod`` (edited in place, and returned).
    ``plugins`` overrides ``job.spec.plugins``."""
    for plugin in _built(job, plugins):
        plugin.on_pod_create(pod, job)
    return pod


def _controlled(job: Mapping[str, Any]) -> dict[str, str]:
    status = job.get("status")
    raw = status.get("controlledResources") if isinstance(status, Mapping) else None
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}


def on_job_add(job: Mapping[str, Any], plugins: PluginArgs | None = None, *, keygen: KeyGen | None = None) -> Effects:
    """The job's set-up: objects to create and the plugins' marks.  Idempotent: a plugin whose
    mark is already in ``status.controlledResources`` does nothing.  ``keygen`` replaces the ssh
    plugin's RSA key generation (tests)."""
    effects = Effects(controlled=_controlled(job), keygen=keygen)
    for plugin in _built(job, plugins):
        plugin.on_job_add(job, effects)
    return effects


def on_job_update(job: Mapping[str, Any], plugins: PluginArgs | None = None) -> Effects:
    """What follows a change of the job (the svc hosts ConfigMap follows its size)."""
    effects = Effects(controlled=_controlled(job))
    for plugin in _built(job, plugins):
        plugin.on_job_update(job, effects)
    return effects


def on_job_delete(job: Mapping[str, Any], plugins: PluginArgs | None = None) -> Effects:
    """The clean-up when the job is killed: objects to delete, marks removed."""
    effects = Effects(controlled=_controlled(job))
    for plugin in _built(job, plugins):
        plugin.on_job_delete(job, effects)
    return effects
