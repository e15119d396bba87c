"""``mpi``: the master learns its workers (``MPI_HOST``), every container opens the ssh port
(``--port``, 22) that ``mpirun`` reaches workers through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar_controller.job.plugins.base import Obj, Plugin
from lahar_controller.job.plugins.podedit import add_env, add_port, containers, task_hosts, task_key
from lahar_controller.job.render import task_named


class MpiPlugin(Plugin):
    name = "mpi"
    flags = {"master": "master", "worker": "worker", "port": 22}

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        env: Obj | None = None
        if task_key(pod) == self.flag_str("master"):
            worker = task_named(job, self.flag_str("worker"))
            if worker is None:
                return  # a master without workers has nobody to reach
            env = {"name": "MPI_HOST", "value": ",".join(task_hosts(worker, job))}
        for container in containers(pod, init=True) + containers(pod):
            add_port(container, "mpijob-port", self.flag_int("port"))
            if env is not None:
                add_env(container, env)
