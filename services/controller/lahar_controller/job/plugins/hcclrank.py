"""``hcclrank``: annotate each master/worker pod with its HCCL rank (``hccl/rankIndex``) — the
pod's ``RANK`` env when set, else masters by index, then workers after all masters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar_controller.job import names
from lahar_controller.job.plugins.base import Effects, Obj, Plugin, PluginError
from lahar_controller.job.plugins.podedit import containers, task_key
from lahar_controller.job.render import replicas, task_named

RANK_KEY = "hccl/rankIndex"


def _env_rank(pod: Obj) -> str:
    for container in containers(pod):
        for env in container.get("env") or []:
            if isinstance(env, Mapping) and env.get("name") == "RANK":
                return str(env.get("value") or "")
    return ""


class HcclRankPlugin(Plugin):
    name = "hcclrank"
    flags = {"master": "master", "worker": "worker"}

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
        if annotations.get(RANK_KEY):
            return
        rank = _env_rank(pod)
        if rank:
            annotations[RANK_KEY] = rank
            return
        role = task_key(pod)
        if role not in (self.flag_str("master"), self.flag_str("worker")):
            return
        raw = (pod.get("metadata", {}).get("labels") or {}).get(names.TASK_INDEX)
        if raw is None:
            raise PluginError(f"pod {pod['metadata'].get('name')} doesn't have {names.TASK_INDEX} label")
        if not str(raw).lstrip("-").isdigit():
            raise PluginError(f"failed to parse task index for pod {pod['metadata'].get('name')}")
        index = int(raw)
        if role == self.flag_str("worker"):
            master = task_named(job, self.flag_str("master"))
            index += replicas(master) if master is not None else 0
        annotations[RANK_KEY] = str(index)

    def on_job_add(self, job: Mapping[str, Any], effects: Effects) -> None:
        """Nothing to set up (Volcano's hcclrank sets no mark either)."""

    def on_job_delete(self, job: Mapping[str, Any], effects: Effects) -> None:
        """Nothing to clean up."""
