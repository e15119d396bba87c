"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager and
KWOK (simulated kubelets), with Volcano's CRDs and a fleet of KWOK nodes.

Layout of the state folder::

    DIR/kubeconfig            written last, once every node is Ready, and removed on stop
    DIR/kube/pki/             CA, serving pair, service-account keys, static tokens
    DIR/kube/etcd/            etcd's data, new on every start
    DIR/kube/*.log            one log per process
    DIR/kube/audit.log        with ``audit=True``: the API server's audit events of the requests
                              made as one of lahar-system's ServiceAccounts (Lahar's services)
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from lahar.api import safeyaml
from lahar.infra.process import free_port, spawn, stop
from lahar.kube.api import Api, ApiError
from lahar.kube.build import Binaries
from lahar.kube.pki import Pki, make_pki
from lahar.sim.nodes import NodeSpec, build_nodes

Obj = dict[str, Any]
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
HOST = "127.0.0.1"
STOP_TIMEOUT = 10.0
CREATE_THREADS = 8
START_ATTEMPTS = 3  # a port picked as free can be taken before our process binds it


# Metadata (who, what, the answer's code) of every request made as a ServiceAccount of
# lahar-system, and nothing else: the admin, the controller manager and KWOK are not audited.
AUDIT_POLICY: Obj = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts:lahar-system"]},
        {"level": "None"},
    ],
}


class ControlPlaneError(Exception):
    pass


class PortTaken(ControlPlaneError):
    """A process could not bind the free port it was given: someone took it in between."""


@dataclass
class _Proc:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path


def volcano_crds() -> list[Obj]:
    """Volcano's CRD manifests kept in this package (see crds/README.md for their source)."""
    folder = resources.files("lahar.kube") / "crds"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".yaml")), key=lambda f: f.name)
    return [safeyaml.load(f.read_text(), f.name) for f in files]


class ControlPlane:
    def __init__(
        self,
        state_dir: Path,
        specs: Iterable[NodeSpec],
        bins: Binaries,
        progress: Callable[[str], None] = print,
        ready_timeout: float = 180.0,
        node_objects: Iterable[Obj] = (),
        audit: bool = False,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.dir = self.state_dir / "kube"
        self.kubeconfig = self.state_dir / "kubeconfig"
        self.nodes = build_nodes(specs) + list(node_objects)
        for node in self.nodes:
            node["metadata"].setdefault("annotations", {})[KWOK_ANNOTATION] = "fake"
            node["metadata"].setdefault("labels", {})["type"] = "kwok"
        self.bins = bins
        self.progress = progress
        self.ready_timeout = ready_timeout
        self.audit = audit
        self.audit_log = self.dir / "audit.log"
        self.procs: list[_Proc] = []
        self.url = ""
        self._api: Api | None = None
        self._pki: Pki | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start everything and return once DIR/kubeconfig is written; on failure nothing is left running."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                self._start()
                return
            except PortTaken as exc:
                self.stop()
                if attempt == START_ATTEMPTS:
                    raise ControlPlaneError(str(exc)) from None
                self.progress(f"lahar kube: {exc}; starting again on other ports")
            except BaseException:
                self.stop()
                raise

    def stop(self) -> None:
        # A kubeconfig left behind would point at a dead server.
        self.kubeconfig.unlink(missing_ok=True)
        # Reverse order: the API server's clients first, etcd last.
        while self.procs:
            p = self.procs.pop()
            stop(p.proc, STOP_TIMEOUT)

    def refusals(self) -> list[str]:
        """The requests of Lahar's ServiceAccounts the API server refused with 403, as
        "USER VERB URI" (from the audit log; empty unless started with ``audit=True``)."""
        return audit_refusals(self.audit_log) if self.audit else []

    def dead(self) -> list[str]:
        return [f"{p.name} (exit {p.proc.returncode}, log {p.log})" for p in self.procs if p.proc.poll() is not None]

    @property
    def api(self) -> Api:
        assert self._api is not None, "start() first"
        return self._api

    @property
    def admin_token(self) -> str:
        assert self._pki is not None, "start() first"
        return self._pki.admin_token

    # -- steps -----------------------------------------------------------------------------------
    def _start(self) -> None:
        started = time.monotonic()
        self.kubeconfig.unlink(missing_ok=True)
        shutil.rmtree(self.dir / "etcd", ignore_errors=True)
        (self.dir / "pki").mkdir(parents=True, exist_ok=True)
        pki = self._pki = make_pki(self.dir / "pki")
        etcd_url = self._start_etcd()
        self._start_apiserver(pki, etcd_url)
        admin = self.dir / "admin.kubeconfig"
        write_kubeconfig(admin, self.url, pki.ca, pki.admin_token)
        self._start_controller_manager(pki, admin)
        self._start_kwok(admin)
        self._install_crds()
        self._create_nodes()
        self._wait_ready()
        write_kubeconfig(self.kubeconfig, self.url, pki.ca, pki.admin_token)
        self.progress(
            f"lahar kube: ready in {time.monotonic() - started:.0f} s: {len(self.nodes)} nodes; "
            f"KUBECONFIG={self.kubeconfig}"
        )

    def _spawn(self, name: str, argv: list[str]) -> _Proc:
        log = self.dir / f"{name}.log"
        p = _Proc(name, spawn(argv, log), log)
        self.procs.append(p)
        return p

    def _start_etcd(self) -> str:
        client, peer = f"http://{HOST}:{free_port()}", f"http://{HOST}:{free_port()}"
        self._spawn(
            "etcd",
            [
                str(self.bins.etcd),
                "--name=lahar",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=lahar={peer}",
                "--log-level=warn",
                # A throwaway test cluster: durability on power loss is not worth the fsync latency.
                "--unsafe-no-fsync",
                "--quota-backend-bytes=8589934592",
            ],
        )
        self._wait("etcd", lambda: _http_ok(f"{client}/health"), 60)
        return client

    def _start_apiserver(self, pki: Pki, etcd_url: str) -> None:
        port = free_port()
        self.url = f"https://{HOST}:{port}"
        self._spawn(
            "kube-apiserver",
            [
                str(self.bins.apiserver),
                f"--etcd-servers={etcd_url}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={port}",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                f"--tls-cert-file={pki.cert}",
                f"--tls-private-key-file={pki.key}",
                f"--client-ca-file={pki.ca}",
                f"--token-auth-file={pki.tokens}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                "--service-cluster-ip-range=10.96.0.0/16",
                # Endpoints may not hold a loopback address, so the "kubernetes" Service gets none.
                "--endpoint-reconciler-type=none",
                "--profiling=false",
                *self._audit_flags(),
            ],
        )
        self._api = Api(self.url, pki.admin_token, pki.ca)
        self._wait("kube-apiserver", lambda: _api_ok(self.api, "/readyz"), 120)

    def _audit_flags(self) -> list[str]:
        """Tests read the services' requests, refusals (403) above all, from the audit log: a
        service may only log a refusal and retry.  Off by default: it costs a write a request."""
        if not self.audit:
            return []
        policy = self.dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY, sort_keys=False))
        self.audit_log.unlink(missing_ok=True)
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}", "--audit-log-format=json"]

    def _start_controller_manager(self, pki: Pki, kubeconfig: Path) -> None:
        # It takes the not-ready taint off Ready nodes and gives each namespace its "default"
        # ServiceAccount; garbage collection and the namespace lifecycle come with it.
        self._spawn(
            "kube-controller-manager",
            [
                str(self.bins.controller_manager),
                f"--kubeconfig={kubeconfig}",
                f"--bind-address={HOST}",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.dir / 'controller-manager-certs'}",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--node-monitor-period=1s",
                # The default 20 requests/s takes minutes to untaint a thousand new nodes.
                "--kube-api-qps=1000",
                "--kube-api-burst=2000",
                "--profiling=false",
            ],
        )

    def _start_kwok(self, kubeconfig: Path) -> None:
        self._spawn(
            "kwok",
            [
                str(self.bins.kwok),
                f"--kubeconfig={kubeconfig}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
                "--node-ip=10.244.0.1",
                "--cidr=10.244.0.1/16",
                f"--server-address={HOST}:{free_port()}",
            ],
        )

    def _install_crds(self) -> None:
        crds = volcano_crds()
        for crd in crds:
            self.api.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        names = [c["metadata"]["name"] for c in crds]
        self._wait("Volcano's CRDs", lambda: all(self._established(n) for n in names), 60)

    def _established(self, name: str) -> bool:
        crd = self.api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        return any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in crd.get("status", {}).get("conditions", [])
        )

    def _create_nodes(self) -> None:
        started = time.monotonic()
        # A few at a time: one request each, and a thousand in a row would take a while.
        with ThreadPoolExecutor(CREATE_THREADS) as pool:
            list(pool.map(lambda node: self.api.create("/api/v1/nodes", node), self.nodes))
        self.progress(f"lahar kube: created {len(self.nodes)} nodes in {time.monotonic() - started:.1f} s")

    def _wait_ready(self) -> None:
        names = {n["metadata"]["name"] for n in self.nodes}
        self.progress(f"lahar kube: waiting for {len(names)} nodes to be Ready")
        # Each check lists every node: not too often, or the listing itself slows the API server.
        self._wait("the nodes", lambda: names <= self._ready_nodes(), self.ready_timeout, interval=1.0)
        # Pods cannot be created in a namespace before its "default" ServiceAccount exists.
        self._wait(
            "the default ServiceAccount",
            lambda: _exists(self.api, "/api/v1/namespaces/default/serviceaccounts/default"),
            60,
        )

    def _ready_nodes(self) -> set[str]:
        items = self.api.call("GET", "/api/v1/nodes?labelSelector=type%3Dkwok").get("items", [])
        return {n["metadata"]["name"] for n in items if _node_ready(n)}

    def _wait(self, what: str, check: Callable[[], bool], timeout: float, interval: float = 0.2) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if dead := self.dead():
                tail = self._tail()
                error = PortTaken if "address already in use" in tail else ControlPlaneError
                raise error(f"waiting for {what}: exited: {', '.join(dead)}\n{tail}")
            try:
                if check():
                    return
            except (OSError, ApiError):
                pass  # not up yet
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{what} not ready after {timeout:.0f} s; logs in {self.dir}")
            time.sleep(interval)

    def _tail(self) -> str:
        out = []
        for p in self.procs:
            if p.proc.poll() is not None:
                lines = p.log.read_text(errors="replace").splitlines()[-15:]
                out.append(f"--- {p.log}\n" + "\n".join(lines))
        return "\n".join(out)


def audit_refusals(log: Path) -> list[str]:
    """The requests an audit log (``audit=True``) shows refused with 403, as "USER VERB URI"."""
    if not log.exists():
        return []
    refused = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line still being written
        if rbac_refusal(event):
            refused.append(f"{event['user']['username']} {event['verb']} {event['requestURI']}")
    return refused


def rbac_refusal(event: Obj) -> bool:
    """An audit event of a request the authorizer refused.  Not every 403 is one: creating an
    object in a namespace being deleted is a 403 the authorizer allowed (an Event a binder writes
    just after a test deleted its namespace, say)."""
    decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
    return event.get("responseStatus", {}).get("code") == 403 and decision != "allow"


def _node_ready(node: Obj) -> bool:
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in node.get("status", {}).get("conditions", [])
    )
    tainted = any(t.get("key") == NOT_READY_TAINT for t in node.get("spec", {}).get("taints") or [])
    return ready and not tainted


def _http_ok(url: str) -> bool:
    with urllib.request.urlopen(url, timeout=2) as resp:
        return bool(resp.status == 200)


def _api_ok(api: Api, path: str) -> bool:
    api.call("GET", path, timeout=5)
    return True


def _exists(api: Api, path: str) -> bool:
    try:
        api.call("GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def write_kubeconfig(path: Path, url: str, ca: Path, token: str) -> None:
    """A kubeconfig for ``token`` on this control plane (also one per service identity)."""
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "lahar-kube",
                "cluster": {"server": url, "certificate-authority-data": base64.b64encode(ca.read_bytes()).decode()},
            }
        ],
        "users": [{"name": "lahar-admin", "user": {"token": token}}],
        "contexts": [{"name": "lahar-kube", "context": {"cluster": "lahar-kube", "user": "lahar-admin"}}],
        "current-context": "lahar-kube",
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(cfg, sort_keys=False))
    tmp.chmod(0o600)
    tmp.replace(path)  # readers never see half a file; its presence means "ready"
