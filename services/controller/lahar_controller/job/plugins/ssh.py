"""``ssh``: password-less ssh between the job's pods.

Set-up makes Secret ``<job>-ssh`` with a key pair (generated unless ``--ssh-private-key`` and
``--ssh-public-key`` are given), ``authorized_keys`` and an ssh ``config`` naming every pod; each
container mounts it at ``--ssh-key-file-path`` (``/root/.ssh``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from lahar_controller.job import names
from lahar_controller.job.plugins.base import Effects, Obj, Plugin, Ref, Write
from lahar_controller.job.plugins.podedit import add_volume, containers, mount
from lahar_controller.job.render import job_name, job_namespace, owner_ref, replicas, tasks, template_spec

ROOT_PATH = "/root/.ssh"
RELATIVE = ".ssh"
KEYS = ("id_rsa", "id_rsa.pub", "authorized_keys", "config")
ROOT_MODE = 0o600
OTHER_MODE = 0o644


def generate_rsa_key() -> tuple[bytes, bytes]:
    """A new 2048-bit RSA key: (PKCS#1 PEM private key, ``ssh-rsa ...`` public line)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public + b"\n"


def ssh_config(job: Mapping[str, Any], port: int) -> str:
    """Host keys are not checked (pods are new each run); one ``Host`` block per pod."""
    lines = ["StrictHostKeyChecking no", "UserKnownHostsFile /dev/null"]
    for task in tasks(job):
        spec = template_spec(task)
        for i in range(replicas(task)):
            host = spec.get("hostname") or names.pod_name(job_name(job), str(task.get("name") or ""), i)
            lines += [f"Host {host}", f"  HostName {host}.{spec.get('subdomain') or job_name(job)}", f"  Port {port}"]
            if spec.get("hostname"):
                break
    return "\n".join(lines) + "\n"


class SshPlugin(Plugin):
    name = "ssh"
    flags = {"ssh-key-file-path": ROOT_PATH, "ssh-private-key": "", "ssh-public-key": "", "ssh-port": 22}

    def secret_name(self, job: Mapping[str, Any]) -> str:
        return f"{job_name(job)}-{self.name}"

    def port(self) -> int:
        port = self.flag_int("ssh-port")
        return port if 0 < port <= 65535 else 22

    def on_pod_create(self, pod: Obj, job: Mapping[str, Any]) -> None:
        name = self.secret_name(job)
        path = self.flag_str("ssh-key-file-path")
        items = [{"key": k, "path": f"{RELATIVE}/{k}"} for k in KEYS]
        mode = ROOT_MODE if path == ROOT_PATH else OTHER_MODE
        add_volume(pod, {"name": name, "secret": {"secretName": name, "items": items, "defaultMode": mode}})
        for container in containers(pod) + containers(pod, init=True):
            mount(container, {"mountPath": path, "subPath": RELATIVE, "name": name})

    def _data(self, job: Mapping[str, Any], effects: Effects) -> dict[str, bytes]:
        private, public = self.flag_str("ssh-private-key"), self.flag_str("ssh-public-key")
        if private:
            private_b, public_b = private.encode(), public.encode()
        else:
            private_b, public_b = (effects.keygen or generate_rsa_key)()
        config = ssh_config(job, self.port()).encode()
        return {"id_rsa": private_b, "id_rsa.pub": public_b, "authorized_keys": public_b, "config": config}

    def on_job_add(self, job: Mapping[str, Any], effects: Effects) -> None:
        if self.marked(effects):
            return
        data = {k: base64.b64encode(v).decode() for k, v in self._data(job, effects).items()}
        meta = {"name": self.secret_name(job), "namespace": job_namespace(job), "ownerReferences": [owner_ref(job)]}
        effects.writes.append(Write({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data}))
        effects.controlled[self.mark] = self.name

    def on_job_delete(self, job: Mapping[str, Any], effects: Effects) -> None:
        if not self.marked(effects):
            return
        effects.deletes.append(Ref("v1", "Secret", job_namespace(job), self.secret_name(job)))
        effects.controlled.pop(self.mark, None)
