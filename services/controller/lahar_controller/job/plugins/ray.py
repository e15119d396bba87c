"""``ray``: a Ray cluster — the head task runs ``ray start --head`` with its GCS, dashboard and
client ports open and a Service ``<job>-head-svc`` in front; workers join the head."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar_controller.job import names
from lahar_controller.job.plugins.base import Effects, Obj, Plugin, PluginError, Ref, Write
from lahar_controller.job.plugins.podedit import add_port, containers, host_of, task_key
from lahar_controller.job.render import job_name, job_namespace, owner_ref, task_named


class RayPlugin(Plugin):
    name = "ray"
    flags = {
        "head": "head",
        "headContainer": "head",
        "worker": "worker",
        "workerContainer": "worker",
        "port": 6379,
        "dashboardPort": 8265,
        "clientPort": 10001,
    }

    def _ports(self) -> list[tuple[str, int]]:
        return [
            ("gcs", self.flag_int("port")),
            ("dashboard", self.flag_int("dashboardPort")),
            ("client-server", self.flag_int("clientPort")),
        ]

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        head = task_named(job, self.flag_str("head"))
        if head is None:
            raise PluginError(f"job {job_name(job)} doesn't have head task {self.flag_str('head')}")
        role = task_key(pod)
        for container in containers(pod):
            if role == self.flag_str("head") and container.get("name") == self.flag_str("headContainer"):
                for port_name, port in self._ports():
                    add_port(container, port_name, port)
                command = (
                    f"ray start --head --block --dashboard-host=0.0.0.0 --port={self.flag_int('port')} "
                    f"--dashboard-port={self.flag_int('dashboardPort')} "
                    f"--ray-client-server-port={self.flag_int('clientPort')}"
                )
                container["command"] = ["sh", "-c", command]
            if role == self.flag_str("worker") and container.get("name") == self.flag_str("workerContainer"):
                address = f"{host_of(head, job, 0)}:{self.flag_int('port')}"
                container["command"] = ["sh", "-c", f"ray start --block --address={address}"]

    def service_name(self, job: Mapping[str, Any]) -> str:
        return f"{job_name(job)}-head-svc"

    def on_job_add(self, job: Mapping[str, Any], effects: Effects) -> None:
        if self.marked(effects):
            return
        selector = {
            names.JOB_NAME: job_name(job),
            names.JOB_NAMESPACE: job_namespace(job),
            names.TASK_SPEC: self.flag_str("head"),
        }
        ports = [{"name": n, "port": p, "targetPort": n, "protocol": "TCP"} for n, p in self._ports()]
        meta = {"name": self.service_name(job), "namespace": job_namespace(job), "ownerReferences": [owner_ref(job)]}
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"selector": selector, "ports": ports},
        }
        effects.writes.append(Write(service))
        effects.controlled[self.mark] = self.name

    def on_job_delete(self, job: Mapping[str, Any], effects: Effects) -> None:
        if not self.marked(effects):
            return
        effects.deletes.append(Ref("v1", "Service", job_namespace(job), self.service_name(job)))
        effects.controlled.pop(self.mark, None)
