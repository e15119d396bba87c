"""``lahar up --control-plane kube``: the stack on a real Kubernetes control plane
(``lahar.kube``) instead of the emulator, each service with its own ServiceAccount.

The RBAC objects are deploy/'s, applied as they are; every service then gets a kubeconfig with a
token of its ServiceAccount (from the TokenRequest API), so a permission the code needs and
deploy/ lacks fails here, on Kubernetes itself, as it would in a cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import lahar
from lahar.kube import build, identity
from lahar.kube.control_plane import ControlPlane, ControlPlaneError, write_kubeconfig
from lahar.sim.nodes import parse_spec

NAMESPACE = "lahar-system"
# The role of each child (its name in the stack) and the ServiceAccount deploy/ gives it.
SERVICE_ACCOUNTS = {
    "admission": "lahar-admission",
    "binder": "lahar-binder",
    "cache": "lahar-cache",
    "controller": "lahar-controller",
    "scheduler": "lahar-scheduler",
}


class KubeBackendError(RuntimeError):
    pass


def deploy_dir() -> Path:
    """deploy/ of the source checkout this package runs from (``pip install -e``)."""
    folder = Path(lahar.__file__).resolve().parents[2] / "deploy"
    if not (folder / "kustomization.yaml").exists():
        raise KubeBackendError(
            f"--control-plane kube applies the RBAC of deploy/, which is not at {folder}: "
            "run Lahar from a source checkout (pip install -e .)"
        )
    return folder


class KubeBackend:
    """A ControlPlane with deploy/'s identities; ``kubeconfigs`` maps a role to its kubeconfig."""

    def __init__(
        self,
        state_dir: Path,
        nodes: Iterable[str],
        progress: Callable[[str], None],
        jobs: int = 1,
        audit: bool = False,
    ) -> None:
        self.state_dir = state_dir
        self.node_specs = [parse_spec(spec) for spec in nodes]
        self.progress = progress
        self.jobs = jobs
        self.audit = audit  # record the services' requests, to find RBAC refusals (tests)
        self.plane: ControlPlane | None = None
        self.kubeconfigs: dict[str, str] = {}

    def start(self) -> str:
        """Start the control plane and return the admin kubeconfig (DIR/kubeconfig)."""
        access = identity.access_objects(deploy_dir())  # before minutes of building, fail fast
        try:
            bins = build.ensure(self.progress, jobs=self.jobs)
        except build.KubeBuildError as exc:
            raise KubeBackendError(str(exc)) from None
        self.plane = ControlPlane(self.state_dir, self.node_specs, bins, self.progress, audit=self.audit)
        try:
            self.plane.start()
        except ControlPlaneError as exc:
            raise KubeBackendError(f"the control plane did not start: {exc}") from None
        identity.apply(self.plane.api, access)
        folder = self.plane.dir / "identities"
        folder.mkdir(exist_ok=True)
        ca = self.plane.api.ca
        for role, account in SERVICE_ACCOUNTS.items():
            path = folder / f"{role}.kubeconfig"
            write_kubeconfig(path, self.plane.url, ca, identity.token(self.plane.api, NAMESPACE, account))
            self.kubeconfigs[role] = str(path)
        return str(self.plane.kubeconfig)

    def dead(self) -> list[str]:
        return self.plane.dead() if self.plane else []

    def refusals(self) -> list[str]:
        """Requests of the services refused with 403 (needs ``audit``): a permission deploy/ lacks."""
        return self.plane.refusals() if self.plane else []

    def stop(self) -> None:
        if self.plane is not None:
            self.plane.stop()
            self.plane = None
