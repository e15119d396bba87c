"""Two clusters behind one interface, so the tests of the distributed services run on both:
Lahar's API emulator (``sim``) and a real control plane (``kube``: kube-apiserver, etcd,
kube-controller-manager and KWOK's simulated kubelets).

On ``kube`` every service talks with the token of its own ServiceAccount from deploy/ (the RBAC
objects applied as they are), so a permission missing from deploy/ fails the test with a 403;
the test itself acts as a cluster admin.  On ``sim`` nobody authenticates.

Each test gets a fresh namespace (deleted afterwards) and may add nodes of its own (deleted
afterwards), e.g. a node only its pods tolerate, so what other tests left on the shared cluster
cannot change its outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lahar.adapters.kube import KubeClient, KubeConfig, NotFound
from lahar.kube import identity
from lahar.kube.control_plane import KWOK_ANNOTATION, NOT_READY_TAINT, ControlPlane, write_kubeconfig
from lahar.sim import Emulator
from lahar.sim.nodes import build_nodes, parse_spec

from .services import poll

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SYSTEM_NAMESPACE = "lahar-system"  # where deploy/ puts the ServiceAccounts
# Every role the services run as; "admin" is the test itself (a user with every right).
ROLES = ("cache", "scheduler", "binder", "controller", "admission")
BACKENDS = ("sim", "kube")
READY_TIMEOUT = 60.0
_REQUESTS = re.compile(r"^apiserver_request_total(\{[^}]*\}) (\S+)$", re.M)


@dataclass
class Identities:
    """A kubeconfig per role for one cluster: what each service process would be given."""

    url: str
    kubeconfigs: dict[str, Path]

    def client(self, role: str) -> KubeClient:
        if role not in self.kubeconfigs:
            raise ValueError(f"role {role!r}: not one of {sorted(self.kubeconfigs)}")
        return KubeClient(KubeConfig.load(str(self.kubeconfigs[role])))


def sim_identities(sim: Emulator, folder: Path) -> Identities:
    """The emulator does not authenticate: every role gets the same plain-http kubeconfig."""
    path = Path(sim.write_kubeconfig(folder / "sim.kubeconfig"))
    return Identities(sim.url, {role: path for role in (*ROLES, "admin")})


def kube_identities(plane: ControlPlane, folder: Path) -> Identities:
    """deploy/'s ServiceAccounts and RBAC applied, and a kubeconfig with each one's token."""
    admin = plane.api
    identity.apply(admin, identity.access_objects(DEPLOY))
    paths = {"admin": plane.kubeconfig}
    for role in ROLES:
        path = folder / f"{role}.kubeconfig"
        write_kubeconfig(path, plane.url, admin.ca, identity.token(admin, SYSTEM_NAMESPACE, f"lahar-{role}"))
        paths[role] = path
    return Identities(plane.url, paths)


@dataclass
class Cluster:
    """One test's view of a backend: clients per role, its namespace, the nodes it added."""

    backend: str
    ids: Identities
    ns: str = ""
    _clients: list[KubeClient] = field(default_factory=list)
    _nodes: list[str] = field(default_factory=list)
    admin: KubeClient = field(init=False)

    _denied_before: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.admin = self.client("admin")

    @property
    def url(self) -> str:
        return self.ids.url

    def client(self, role: str) -> KubeClient:
        """A new client acting as ``role`` (a service name, or "admin"); closed after the test."""
        kube = self.ids.client(role)
        self._clients.append(kube)
        return kube

    def kubeconfig(self, role: str) -> str:
        return str(self.ids.kubeconfigs[role])

    async def start(self) -> None:
        self._denied_before = await self.denied()
        self.ns = f"t-{uuid.uuid4().hex[:10]}"
        await self.admin.create(
            "namespaces", "", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.ns}}
        )
        if self.backend == "kube":
            # The ServiceAccount admission plugin refuses pods until kube-controller-manager has
            # given the namespace its "default" ServiceAccount.
            await poll(self._has_default_account, timeout=READY_TIMEOUT, interval=0.1)

    async def _has_default_account(self) -> bool:
        try:
            # ServiceAccounts are no kind of the services' client: a raw GET, as the admin.
            await self.admin._request("GET", f"/api/v1/namespaces/{self.ns}/serviceaccounts/default")
        except NotFound:
            return False
        return True

    async def add_nodes(self, spec: str) -> list[str]:
        """Nodes from a ``COUNT:key=value,...`` spec (name them with a ``name=PREFIX`` of the
        test's own), returned once Ready and schedulable; deleted after the test."""
        nodes = build_nodes([parse_spec(spec)])
        for node in nodes:
            if self.backend == "kube":
                # Only nodes with this annotation get a simulated kubelet from KWOK.
                node["metadata"].setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
            await self.admin.create("nodes", "", node)
            self._nodes.append(node["metadata"]["name"])
        names = [n["metadata"]["name"] for n in nodes]
        await poll(lambda: self._ready(names), timeout=READY_TIMEOUT, interval=0.2)
        return names

    async def _ready(self, names: list[str]) -> bool:
        for name in names:
            node = json.loads(await self.admin.get("nodes", "", name))
            if not node_ready(node):
                return False
        return True

    async def denied(self) -> dict[str, float]:
        """The API server's count of requests it refused with 403, by verb and resource (kube
        only).  The test acts as admin, so every 403 during a test is a service's: a permission
        its deploy/ ClusterRole lacks, which the service may only log and retry."""
        if self.backend != "kube":
            return {}
        text = (await self.admin._request("GET", "/metrics")).decode()
        return {m[0]: float(m[1]) for m in _REQUESTS.findall(text) if 'code="403"' in m[0]}

    async def new_denials(self) -> dict[str, float]:
        now = await self.denied()
        return {k: v - self._denied_before.get(k, 0.0) for k, v in now.items() if v > self._denied_before.get(k, 0.0)}

    async def expect_denials(self) -> dict[str, float]:
        """The 403s so far, which the test meant to cause: the fixture then does not fail on them."""
        found = await self.new_denials()
        self._denied_before = await self.denied()
        return found

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.admin.delete("namespaces", "", self.ns)
        for name in self._nodes:
            with contextlib.suppress(Exception):
                await self.admin.delete("nodes", "", name)
        for kube in self._clients:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(kube.close(), 10)


def node_ready(node: dict[str, Any]) -> bool:
    """Ready, and without the not-ready taint kube-controller-manager puts on every new node."""
    conditions = node.get("status", {}).get("conditions", [])
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return ready and not any(t.get("key") == NOT_READY_TAINT for t in node.get("spec", {}).get("taints") or [])


KubeFactory = Callable[[str], KubeClient]
