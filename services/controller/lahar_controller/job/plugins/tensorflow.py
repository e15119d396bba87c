"""``tensorflow``: ``TF_CONFIG`` (the cluster's ps/worker/chief/evaluator addresses and this
pod's role and index), as TensorFlow's distribution strategies read it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lahar_controller.job.plugins.base import Obj, Plugin, PluginError
from lahar_controller.job.plugins.podedit import add_env, containers, host_of, pod_index, task_key
from lahar_controller.job.render import replicas, tasks

ROLES = ("ps", "worker", "chief", "evaluator")


class TensorflowPlugin(Plugin):
    name = "tensorflow"
    flags = {"ps": "ps", "worker": "worker", "chief": "chief", "evaluator": "evaluator", "port": 2222}

    def _role_of(self, task_name: str) -> str | None:
        return next((role for role in ROLES if self.flag_str(role) == task_name), None)

    def tf_config(self, pod: Obj, job: Mapping[str, Any]) -> str:
        index = pod_index(pod)
        if not index.lstrip("-").isdigit():
            raise PluginError(f'strconv.Atoi: parsing "{index}": invalid syntax')
        cluster: dict[str, list[str]] = {}
        for task in tasks(job):
            role = self._role_of(str(task.get("name") or ""))
            if role is not None:
                port = self.flag_int("port")
                cluster[role] = [f"{host_of(task, job, i)}:{port}" for i in range(replicas(task))]
        # Go's encoder: roles in declaration order, empty ones omitted, no spaces
        ordered = {role: cluster[role] for role in ROLES if cluster.get(role)}
        key = task_key(pod)
        spec = {"cluster": ordered, "task": {"type": self._role_of(key) or key, "index": int(index)}}
        return json.dumps(spec, separators=(",", ":"))

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        all_tasks = tasks(job)
        if len(all_tasks) == 1 and replicas(all_tasks[0]) == 1:
            return  # a stand-alone trainer needs no cluster description
        value = self.tf_config(pod, job)
        for container in containers(pod):
            add_env(container, {"name": "TF_CONFIG", "value": value})
