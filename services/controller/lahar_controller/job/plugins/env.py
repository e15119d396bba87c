"""``env``: every container learns its pod's index in the task (``VC_TASK_INDEX``, and
``VK_TASK_INDEX`` for jobs written for Volcano's old name)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar_controller.job.plugins.base import Obj, Plugin
from lahar_controller.job.plugins.podedit import add_env, all_containers, pod_index


class EnvPlugin(Plugin):
    name = "env"

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        index = pod_index(pod)
        for container in all_containers(pod):
            add_env(container, {"name": "VK_TASK_INDEX", "value": index}, {"name": "VC_TASK_INDEX", "value": index})
