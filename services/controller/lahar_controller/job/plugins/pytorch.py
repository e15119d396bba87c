"""``pytorch``: torch.distributed's environment (``MASTER_ADDR``, ``MASTER_PORT``,
``WORLD_SIZE``, ``RANK``) and its port; with ``--wait-master-enabled`` workers wait in an init
container until the master's port answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar_controller.job.plugins.base import Obj, Plugin, PluginError
from lahar_controller.job.plugins.podedit import add_env, add_port, containers, host_of, pod_index, task_key
from lahar_controller.job.render import replicas, task_named, tasks

WAIT_CONTAINER = "wait-for-master"

_WAIT_SCRIPT = """echo "Waiting for master node {addr}:{port} to be ready..."
TIMEOUT={timeout}
ELAPSED=0
until {{ nc -z {addr} {port} || echo > /dev/tcp/{addr}/{port}; }} 2>/dev/null; do
  if [ $ELAPSED -ge $TIMEOUT ]; then
    echo "Timeout waiting for master after ${{TIMEOUT}} seconds"
    exit 1
  fi
  echo "Master not ready yet, retrying in 2 seconds... (elapsed: ${{ELAPSED}}s)"
  sleep 2
  ELAPSED=$((ELAPSED + 2))
done
echo "Master node is ready!\""""


class PytorchPlugin(Plugin):
    name = "pytorch"
    flags = {
        "master": "master",
        "worker": "worker",
        "port": 23456,
        "wait-master-enabled": False,
        "wait-master-timeout": 300,
        "wait-master-image": "busybox:1.36.1",
    }

    def _world_size(self, job: Mapping[str, Any]) -> int:
        roles = (self.flag_str("master"), self.flag_str("worker"))
        return sum(replicas(t) for t in tasks(job) if t.get("name") in roles)

    def _rank(self, pod: Obj) -> str | None:
        role = task_key(pod)
        if role == self.flag_str("worker"):
            index = pod_index(pod)
            if not index.lstrip("-").isdigit():
                raise PluginError(f'strconv.Atoi: parsing "{index}": invalid syntax')
            return str(int(index) + 1)
        return "0" if role == self.flag_str("master") else None

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        master = task_named(job, self.flag_str("master"))
        if master is None:
            return  # without a master there is no rendezvous to describe
        addr, port = host_of(master, job, 0), self.flag_int("port")
        rank = self._rank(pod)
        if task_key(pod) == self.flag_str("worker"):
            self._wait_for_master(pod, addr)
        env = [
            {"name": "MASTER_ADDR", "value": addr},
            {"name": "MASTER_PORT", "value": str(port)},
            {"name": "WORLD_SIZE", "value": str(self._world_size(job))},
        ]
        if rank is not None:
            env.append({"name": "RANK", "value": rank})
        for container in containers(pod):
            add_port(container, "pytorchjob-port", port)
            add_env(container, *env)

    def _wait_for_master(self, pod: Obj, addr: str) -> None:
        if not self.flag_bool("wait-master-enabled"):
            return
        if any(c.get("name") == WAIT_CONTAINER for c in containers(pod, init=True)):
            return
        script = _WAIT_SCRIPT.format(
            addr=addr, port=self.flag_int("port"), timeout=self.flag_int("wait-master-timeout")
        )
        init = {"name": WAIT_CONTAINER, "image": self.flag_str("wait-master-image"), "command": ["sh", "-c", script]}
        pod.setdefault("spec", {}).setdefault("initContainers", []).append(init)
