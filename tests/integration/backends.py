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
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lahar.adapters.kube import KubeClient, KubeConfig, NotFound
from lahar.kube import identity
from lahar.kube.control_plane import (
    KWOK_ANNOTATION,
    NOT_READY_TAINT,
    ControlPlane,
    rbac_refusal,
    write_kubeconfig,
)
from lahar.sim import Emulator
from lahar.sim.nodes import build_nodes, parse_spec

from .services import poll

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SYSTEM_NAMESPACE = "lahar-system"  # where deploy/ puts the ServiceAccounts
# Every role the services run as; "admin" is the test itself (a user with every right).
ROLES = ("cache", "scheduler", "binder", "controller", "admission")
BACKENDS = ("sim", "kube")
READY_TIMEOUT = 60.0


@dataclass
class Identities:
    """A kubeconfig per role for one cluster: what each service process would be given."""

    url: str
    kubeconfigs: dict[str, Path]
    audit_log: Path | None = None  # the API server's audit of the services' requests

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
    return Identities(plane.url, paths, plane.audit_log if plane.audit else None)


@dataclass
class Cluster:
    """One test's view of a backend: clients per role, its namespace, the nodes it added."""

    backend: str
    ids: Identities
    ns: str = ""
    _clients: list[KubeClient] = field(default_factory=list)
    _nodes: list[str] = field(default_factory=list)
    admin: KubeClient = field(init=False)

    _audit_from: int = 0

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
        self._audit_from = self._audit_size()
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

    def new_denials(self) -> list[str]:
        """The requests of a service that the API server refused with 403 since the test began,
        as "USER VERB PATH" (kube only; from its audit log).  A service may only log a refusal
        and retry, so the fixture fails the test on any: a permission deploy/ lacks."""
        log = self.ids.audit_log
        if log is None or not log.exists():
            return []
        with log.open("rb") as f:
            f.seek(self._audit_from)
            lines = f.read().splitlines()
        refused = []
        for line in lines:
            event = json.loads(line)
            if rbac_refusal(event):
                refused.append(f"{event['user']['username']} {event['verb']} {event['requestURI']}")
        return refused

    def expect_denials(self) -> list[str]:
        """The refusals so far, which the test meant to cause: the fixture does not fail on them."""
        found = self.new_denials()
        self._audit_from = self._audit_size()
        return found

    def _audit_size(self) -> int:
        log = self.ids.audit_log
        return log.stat().st_size if log is not None and log.exists() else 0

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
