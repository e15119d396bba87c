"""``svc``: the job's pods find each other by name.

Set-up makes a headless Service ``<job>`` (so ``<pod>.<job>`` resolves), a ConfigMap
``<job>-svc`` of each task's hosts, and a NetworkPolicy that admits traffic only from the job's
own pods.  Each pod gets hostname/subdomain, the hosts ConfigMap at ``/etc/volcano`` and, unless
``--inject-hosts-env=false``, ``VC_<TASK>_HOSTS``/``VC_<TASK>_NUM`` from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lahar_controller.job import names
from lahar_controller.job.plugins.base import Effects, Obj, Plugin, Ref, Write
from lahar_controller.job.plugins.podedit import add_env, add_volume, all_containers, mount, task_hosts
from lahar_controller.job.render import job_name, job_namespace, owner_ref, tasks

MOUNT_PATH = "/etc/volcano"


def _env_key(task_name: str) -> str:
    return task_name.replace("-", "_")


def hosts_data(job: Mapping[str, Any]) -> dict[str, str]:
    """The hosts ConfigMap's data: per task ``<task>.host`` (one host a line), ``VC_<TASK>_HOSTS``
    (comma-separated) and ``VC_<TASK>_NUM``."""
    data: dict[str, str] = {}
    for task in tasks(job):
        hosts = task_hosts(task, job)
        key = _env_key(str(task.get("name") or ""))
        data[f"{key}.host"] = "\n".join(hosts)
        data[f"VC_{key.upper()}_HOSTS"] = ",".join(hosts)
        data[f"VC_{key.upper()}_NUM"] = str(len(hosts))
    return data


def _job_selector(job: Mapping[str, Any]) -> dict[str, str]:
    return {names.JOB_NAME: job_name(job), names.JOB_NAMESPACE: job_namespace(job)}


def _meta(job: Mapping[str, Any], name: str) -> Obj:
    return {"name": name, "namespace": job_namespace(job), "ownerReferences": [owner_ref(job)]}


class SvcPlugin(Plugin):
    name = "svc"
    flags = {"publish-not-ready-addresses": False, "disable-network-policy": False, "inject-hosts-env": True}

    def config_map_name(self, job: Mapping[str, Any]) -> str:
        return f"{job_name(job)}-{self.name}"

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        spec = pod.setdefault("spec", {})
        if not spec.get("hostname"):
            spec["hostname"] = pod.get("metadata", {}).get("name", "")
        if not spec.get("subdomain"):
            spec["subdomain"] = job_name(job)
        cm = self.config_map_name(job)
        if self.flag_bool("inject-hosts-env"):
            env = []
            for task in tasks(job):
                key = _env_key(str(task.get("name") or "")).upper()
                for var in (f"VC_{key}_HOSTS", f"VC_{key}_NUM"):
                    env.append({"name": var, "valueFrom": {"configMapKeyRef": {"name": cm, "key": var}}})
            for container in all_containers(pod):
                add_env(container, *env)
        add_volume(pod, {"name": cm, "configMap": {"name": cm}})
        for container in all_containers(pod):
            mount(container, {"mountPath": MOUNT_PATH, "name": cm})

    def _config_map(self, job: Mapping[str, Any]) -> Obj:
        meta = _meta(job, self.config_map_name(job))
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": hosts_data(job)}

    def on_job_add(self, job: Mapping[str, Any], effects: Effects) -> None:
        if self.marked(effects):
            return
        effects.writes.append(Write(self._config_map(job), replace=True))
        service_spec = {
            "clusterIP": "None",
            "selector": _job_selector(job),
            "publishNotReadyAddresses": self.flag_bool("publish-not-ready-addresses"),
        }
        service = {"apiVersion": "v1", "kind": "Service", "metadata": _meta(job, job_name(job)), "spec": service_spec}
        effects.writes.append(Write(service))
        if not self.flag_bool("disable-network-policy"):
            effects.writes.append(Write(self._network_policy(job)))
        effects.controlled[self.mark] = self.name

    def _network_policy(self, job: Mapping[str, Any]) -> Obj:
        spec = {
            "podSelector": {"matchLabels": _job_selector(job)},
            "ingress": [{"from": [{"podSelector": {"matchLabels": _job_selector(job)}}]}],
            "policyTypes": ["Ingress"],
        }
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(job, job_name(job)),
            "spec": spec,
        }

    def on_job_update(self, job: Mapping[str, Any], effects: Effects) -> None:
        effects.writes.append(Write(self._config_map(job), replace=True))

    def on_job_delete(self, job: Mapping[str, Any], effects: Effects) -> None:
        if not self.marked(effects):
            return
        ns = job_namespace(job)
        effects.deletes.append(Ref("v1", "ConfigMap", ns, self.config_map_name(job)))
        effects.deletes.append(Ref("v1", "Service", ns, job_name(job)))
        if not self.flag_bool("disable-network-policy"):
            effects.deletes.append(Ref("networking.k8s.io/v1", "NetworkPolicy", ns, job_name(job)))
        effects.controlled.pop(self.mark, None)
