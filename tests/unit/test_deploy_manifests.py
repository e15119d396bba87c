"""deploy/: the Kubernetes manifests agree with the code they run.

Each ``*_problems`` function below reads the parsed manifests and returns what is wrong, one line
per problem; the tests assert the real manifests have none, and the tests at the end show each
check catching a broken copy.  Nothing is started and nothing goes over the network: service
settings are loaded with the services' own parsers, files a container reads are laid out under a
temporary folder from the ConfigMaps and Secrets mounted there, and the admission app is built
(not served) to read its routes.
"""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.metadata
import inspect
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
import yaml

from lahar.adapters.kube import RESOURCES
from lahar.cli.main import build_parser
from lahar.cli.services import SERVICES
from lahar.infra.auth import (
    CREDENTIALS_SECRET,
    NATS_TLS_SECRET,
    VALKEY_ACL_SECRET,
    Credentials,
    kubernetes_secrets,
    password_env,
)
from lahar.infra.certs import CertPair
from lahar.service.settings import ENV_PREFIX, Settings, SettingsError, load_settings
from lahar.wire import access
from lahar_admission import config as admission_config
from lahar_admission.rules import WEBHOOKS

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
NAMESPACE = "lahar-system"
LEADER_ELECTED = ("cache", "scheduler", "controller")
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
}

# The Kubernetes API calls each service's code makes, as (verb, resource).  Read from
# services/*/lahar_*/: the cache lists and watches every kind it mirrors (CacheService(kinds=
# DELTA_KINDS)); the binder binds, evicts, reads a pod after a bind conflict and patches status
# (PodGroups on the object: their CRD has no status subresource); the controller performs what
# its rules return (pods, PodGroups, Jobs and their status, plugin objects, queue states, Events;
# lahar_controller.shell.calls); the scheduler and admission never call the API.
# ``test_the_table_matches_the_calls_in_the_code`` keeps it honest.
API_CALLS: dict[str, set[tuple[str, str]]] = {
    "cache": {
        (verb, kind)
        for verb in ("list", "watch")
        for kind in (
            "nodes",
            "pods",
            "podgroups",
            "queues",
            "jobs",
            "priorityclasses",
            "namespaces",
            "resourcequotas",
            "poddisruptionbudgets",
            "commands",
            "cronjobs",
            "persistentvolumeclaims",
            "replicasets",
            "statefulsets",
            "daemonsets",
            "batchjobs",
            "jobflows",
            "jobtemplates",
            "numatopologies",
            "hypernodes",
        )
    },
    "binder": {
        ("create", "pods/binding"),
        ("create", "pods/eviction"),
        ("get", "pods"),
        ("patch", "pods/status"),
        ("patch", "podgroups"),
        ("patch", "queues/status"),
        ("create", "events"),
        ("patch", "events"),
    },
    "controller": {
        ("create", "pods"),
        ("patch", "pods"),
        ("delete", "pods"),
        ("create", "podgroups"),
        ("update", "podgroups"),
        ("delete", "podgroups"),
        ("get", "jobs"),
        ("create", "jobs"),
        ("update", "jobs"),
        ("update", "jobs/status"),
        ("delete", "jobs"),
        ("update", "cronjobs/status"),
        ("delete", "commands"),
        ("update", "jobflows/status"),
        ("update", "jobtemplates/status"),
        ("create", "queues"),
        ("patch", "queues"),
        ("patch", "queues/status"),
        ("create", "services"),
        ("delete", "services"),
        ("create", "configmaps"),
        ("get", "configmaps"),
        ("update", "configmaps"),
        ("delete", "configmaps"),
        ("create", "secrets"),
        ("delete", "secrets"),
        ("create", "networkpolicies"),
        ("delete", "networkpolicies"),
        ("create", "persistentvolumeclaims"),
        ("create", "events"),
        ("create", "hypernodes"),
        ("get", "hypernodes"),
        ("update", "hypernodes"),
        ("delete", "hypernodes"),
    },
    "scheduler": set(),
    "admission": set(),
}

Obj = dict[str, Any]


# --- loading -------------------------------------------------------------------------------------


def _parse_all() -> list[tuple[str, Obj]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


_PARSED = _parse_all()


class Manifests:
    """The objects ``kubectl apply -k deploy/`` applies (the files the kustomization lists), plus
    the example files, which are parsed but never applied."""

    def __init__(self, docs: list[tuple[str, Obj]]) -> None:
        self.all = docs
        kustomization = next(d for f, d in docs if f == "kustomization.yaml")
        listed = set(kustomization.get("resources", []))
        self.kustomization = kustomization
        self.applied = [d for f, d in docs if f in listed]
        self.examples = [d for f, d in docs if f.endswith(".example.yaml")]

    def of(self, kind: str) -> list[Obj]:
        return [d for d in self.applied if d.get("kind") == kind]

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        for d in self.of(kind):
            meta = d.get("metadata", {})
            if meta.get("name") == name and (namespace is None or meta.get("namespace") == namespace):
                return d
        return None

    def workloads(self) -> list[Obj]:
        return self.of("Deployment") + self.of("StatefulSet")

    def lahar_deployments(self) -> Iterator[tuple[str, Obj, Obj]]:
        """(service, Deployment, its container) for every Deployment that runs a Lahar service."""
        for dep in self.of("Deployment"):
            for c in dep["spec"]["template"]["spec"]["containers"]:
                service = service_of(c)
                if service:
                    yield service, dep, c


@pytest.fixture
def manifests() -> Manifests:
    """A fresh copy for every test, so a test may break it."""
    return Manifests(copy.deepcopy(_PARSED))


def service_of(container: Obj) -> str:
    """The Lahar service a container runs: ``lahar cache ...`` → cache, ``lahar admission serve``
    → admission; "" for a container that does not run the lahar image."""
    if container.get("image", "").split(":")[0] != "lahar":
        return ""
    args = container.get("args") or []
    if args[:2] == ["admission", "serve"]:
        return "admission"
    return args[0] if args and args[0] in SERVICES else "?"


def _labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _pod_labels(workload: Obj) -> dict[str, str]:
    return dict(workload["spec"]["template"]["metadata"].get("labels") or {})


# --- what a container sees: environment and files ---------------------------------------------------


def container_env(m: Manifests, workload: Obj, container: Obj) -> dict[str, str]:
    """The environment Kubernetes gives the container: envFrom ConfigMaps, then env in order,
    with ``$(VAR)`` expanded from what is defined before it, as the kubelet does."""
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        ref = source.get("configMapRef") or {}
        cm = m.get("ConfigMap", ref.get("name", ""), workload["metadata"]["namespace"])
        if cm is None:
            raise LookupError(f"envFrom: ConfigMap {ref.get('name')!r} is not in the manifests")
        env.update({k: str(v) for k, v in (cm.get("data") or {}).items()})
    field_values = {
        "metadata.name": f"{workload['metadata']['name']}-0",
        "metadata.namespace": workload["metadata"]["namespace"],
    }
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = re.sub(
                r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda g: env.get(g.group(1), g.group(0)), str(item["value"])
            )
        elif "secretKeyRef" in item["valueFrom"]:
            env[item["name"]] = secret_placeholder(item["valueFrom"]["secretKeyRef"])
        else:
            env[item["name"]] = field_values[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def deploy_script(name: str) -> Any:
    """One of deploy/'s render_*.py scripts, imported."""
    spec = importlib.util.spec_from_file_location(name, DEPLOY / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def secret_placeholder(ref: Obj) -> str:
    """What stands for a Secret's value in a container's environment: it names the key, so a
    check can tell whose password a URL carries."""
    return f"secret-{ref['name']}-{ref['key']}"


def lay_out_mounts(m: Manifests, workload: Obj, container: Obj, root: Path) -> dict[str, Path]:
    """Write the files of every volume the container mounts under ``root``; returns mount path →
    local folder.  ConfigMaps come from the manifests, Secrets from the example files (or the
    volume's ``items``), persistent and empty volumes are empty folders."""
    pod = workload["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    claims = {t["metadata"]["name"] for t in workload["spec"].get("volumeClaimTemplates") or []}
    namespace = workload["metadata"]["namespace"]
    local: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        folder = root / mount["mountPath"].lstrip("/")
        folder.mkdir(parents=True, exist_ok=True)
        local[mount["mountPath"].rstrip("/")] = folder
        volume = volumes.get(mount["name"])
        if volume is None:
            if mount["name"] not in claims:
                raise LookupError(f"volumeMount {mount['name']!r}: no such volume or volumeClaimTemplate")
            continue
        files: dict[str, str] = {}
        if "configMap" in volume:
            cm = m.get("ConfigMap", volume["configMap"]["name"], namespace)
            data = (cm or {}).get("data") or {}
            files = {k: str(v) for k, v in data.items()}
        elif "secret" in volume:
            example: Obj = next(
                (s for s in m.examples if s["metadata"]["name"] == volume["secret"]["secretName"]),
                {"data": {}},
            )
            files = dict.fromkeys(example.get("data") or {}, "placeholder\n")
        items = (volume.get("configMap") or volume.get("secret") or {}).get("items")
        if items is not None:
            given = files if "configMap" in volume else {i["key"]: "placeholder\n" for i in items}
            files = {i["path"]: given[i["key"]] for i in items if i["key"] in given}
        for name, text in files.items():
            (folder / name).write_text(text)
    return local


def localize(value: str, mounts: dict[str, Path]) -> str:
    """``value`` with each path under a mount moved to its local folder (one pass, so a local
    folder under /tmp is not moved again by a /tmp mount)."""
    if not mounts:
        return value
    pattern = "|".join(re.escape(p) + "/" for p in sorted(mounts, key=len, reverse=True))
    return re.sub(f"(?<![^=,:\\s])(?:{pattern})", lambda g: f"{mounts[g.group(0)[:-1]]}/", value)


def service_settings(m: Manifests, dep: Obj, container: Obj, tmp_path: Path) -> Any:
    """The container's settings, parsed by the service's own code from its args and environment.
    Raises SettingsError (or SystemExit from argparse) as the service would at start-up."""
    service = service_of(container)
    if service != "admission" and service not in SERVICES:
        raise SettingsError([f"args {container.get('args')} run no Lahar service"])
    mounts = lay_out_mounts(m, dep, container, tmp_path / dep["metadata"]["name"])
    args = [localize(a, mounts) for a in container.get("args") or []]
    env = {k: localize(v, mounts) for k, v in container_env(m, dep, container).items()}
    if service == "admission":
        parsed = build_parser().parse_args(args)
        from lahar.cli.admission import run_serve

        assert parsed.handler is run_serve, f"{args}: not `lahar admission serve`"
        flags = {name: getattr(parsed, name, None) for name in admission_config.PARSERS}
        return admission_config.load_settings(flags, env)
    # `lahar <service> ...` hands everything after the name to the service's settings loader.
    cls = importlib.import_module(SERVICES[service][0]).SETTINGS
    return load_settings(cls, args[1:], env, prog=f"lahar {service}")


def env_names(service: str) -> set[str]:
    if service == "admission":
        return {admission_config.env_of(name) for name in admission_config.PARSERS}
    cls: type[Settings] = importlib.import_module(SERVICES[service][0]).SETTINGS
    return {ENV_PREFIX + f.name.upper() for f in msgspec.structs.fields(cls)}


def _resolve_port(container: Obj, port: int | str) -> int | None:
    if isinstance(port, int):
        return port
    return next((p["containerPort"] for p in container.get("ports") or [] if p.get("name") == port), None)


# --- checks ----------------------------------------------------------------------------------------


def command_problems(m: Manifests, tmp_path: Path) -> list[str]:
    problems = []
    known = set().union(*(env_names(s) for s in API_CALLS))
    config = m.get("ConfigMap", "lahar-config", NAMESPACE)
    for name in (config or {}).get("data", {}):
        if name.startswith(ENV_PREFIX) and name not in known:
            problems.append(f"ConfigMap lahar-config: {name} is no service's setting")
    seen = set()
    for service, dep, c in m.lahar_deployments():
        where = f"Deployment {dep['metadata']['name']}"
        seen.add(service)
        if service == "?":
            problems.append(f"{where}: args {c.get('args')} run no Lahar service")
            continue
        if c.get("command"):
            problems.append(f"{where}: sets command; the image's entrypoint `lahar` must run")
        try:
            service_settings(m, dep, c, tmp_path)
        except SettingsError as err:
            problems.append(f"{where}: {err}")
        except admission_config.SettingsError as err:
            problems.append(f"{where}: {err}")
        except SystemExit:
            problems.append(f"{where}: `lahar {' '.join(c.get('args') or [])}` does not parse")
        own = env_names(service)
        for item in c.get("env") or []:
            if item["name"].startswith(ENV_PREFIX) and item["name"] not in own:
                problems.append(f"{where}: env {item['name']} is not a setting of lahar {service}")
    for service in API_CALLS:
        if service not in seen:
            problems.append(f"no Deployment runs lahar {service}")
    return problems


def probe_problems(m: Manifests, tmp_path: Path) -> list[str]:
    problems = []
    for service, dep, c in m.lahar_deployments():
        where = f"Deployment {dep['metadata']['name']}"
        try:
            s = service_settings(m, dep, c, tmp_path)
        except (SettingsError, admission_config.SettingsError, SystemExit):
            problems.append(f"{where}: settings do not load (see command_problems)")
            continue
        https = service == "admission"
        port, host = (s.port, s.host) if https else (s.http_port, s.http_host)
        if host in ("127.0.0.1", "localhost", "::1"):
            problems.append(f"{where}: the service listens on {host}, which the kubelet cannot reach")
        for kind, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
            get = (c.get(kind) or {}).get("httpGet")
            if get is None:
                problems.append(f"{where}: no {kind} httpGet")
                continue
            if get.get("path") != path:
                problems.append(f"{where}: {kind} path {get.get('path')!r}, expected {path}")
            if _resolve_port(c, get.get("port")) != port:
                problems.append(f"{where}: {kind} port {get.get('port')!r} is not the service's port {port}")
            if get.get("scheme", "HTTP") != ("HTTPS" if https else "HTTP"):
                problems.append(f"{where}: {kind} scheme {get.get('scheme', 'HTTP')}")
        notes = dep["spec"]["template"]["metadata"].get("annotations") or {}
        expected = {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}
        if https:
            expected["prometheus.io/scheme"] = "https"
        for key, value in expected.items():
            if notes.get(key) != value:
                problems.append(f"{where}: annotation {key}={notes.get(key)!r}, expected {value!r}")
    return problems


def _group(resource: str) -> str:
    return RESOURCES[resource.split("/")[0]].group


def _rbac_resource(resource: str) -> str:
    """Our name for a resource (``batchjobs/status``) as RBAC spells it (``jobs/status``)."""
    kind, slash, sub = resource.partition("/")
    return RESOURCES[kind].resource + slash + sub


def rbac_problems(m: Manifests) -> list[str]:
    problems = []
    for service, dep, _ in m.lahar_deployments():
        if service not in API_CALLS:
            continue
        pod = dep["spec"]["template"]["spec"]
        ns = dep["metadata"]["namespace"]
        sa_name = pod.get("serviceAccountName", "default")
        sa = m.get("ServiceAccount", sa_name, ns)
        where = f"Deployment {dep['metadata']['name']} (ServiceAccount {sa_name})"
        if sa is None:
            problems.append(f"{where}: no such ServiceAccount in {ns}")
            continue
        bindings = [
            b
            for b in m.of("ClusterRoleBinding") + m.of("RoleBinding")
            if any(
                s.get("kind") == "ServiceAccount" and s.get("name") == sa_name and s.get("namespace", ns) == ns
                for s in b.get("subjects") or []
            )
        ]
        granted: set[tuple[str, str, str]] = set()
        for b in bindings:
            ref = b["roleRef"]
            role = m.get(ref["kind"], ref["name"])
            if b["kind"] == "RoleBinding" or ref["kind"] != "ClusterRole" or role is None:
                problems.append(f"{where}: binding {b['metadata']['name']} is not to a ClusterRole in the manifests")
                continue
            for rule in role.get("rules") or []:
                if rule.get("resourceNames") or rule.get("nonResourceURLs"):
                    problems.append(f"{where}: ClusterRole {ref['name']} has a rule this check does not model")
                for g in rule.get("apiGroups") or []:
                    for r in rule.get("resources") or []:
                        for v in rule.get("verbs") or []:
                            granted.add((g, r, v))
        needed = {(_group(r), _rbac_resource(r), v) for v, r in API_CALLS[service]}
        for g, r, v in sorted(needed - granted):
            problems.append(f"{where}: may not {v} {r} (group {g!r}), which lahar {service} does")
        for g, r, v in sorted(granted - needed):
            problems.append(f"{where}: may {v} {r} (group {g!r}), which lahar {service} never does")
        if not needed:
            mounted = pod.get("automountServiceAccountToken", sa.get("automountServiceAccountToken", True))
            if mounted is not False:
                problems.append(f"{where}: makes no API calls but mounts a service-account token")
        elif not bindings:
            problems.append(f"{where}: no ClusterRoleBinding")
    return problems


def _routes_served(enabled: tuple[str, ...]) -> set[str]:
    from starlette.routing import Route

    from lahar_admission.server import AppConfig, create_app
    from lahar_admission.settings import RuleSettings
    from lahar_admission.view import InMemoryView

    app = create_app(AppConfig(rules=RuleSettings(), view=InMemoryView(), enabled=enabled))
    routes = [r for r in app.routes if isinstance(r, Route)]
    return {r.path for r in routes if "POST" in (r.methods or ()) and "{" not in r.path}


def admission_problems(m: Manifests, tmp_path: Path) -> list[str]:
    problems = []
    found = [(dep, c) for service, dep, c in m.lahar_deployments() if service == "admission"]
    if len(found) != 1:
        return [f"expected one admission Deployment, found {len(found)}"]
    dep, c = found[0]
    try:
        s = service_settings(m, dep, c, tmp_path)
    except (admission_config.SettingsError, SystemExit) as err:
        return [f"admission settings do not load: {err}"]
    services = [
        svc
        for svc in m.of("Service")
        if svc["metadata"]["namespace"] == dep["metadata"]["namespace"]
        and _labels_match(svc["spec"].get("selector") or {}, _pod_labels(dep))
    ]
    if len(services) != 1:
        return [f"expected one Service selecting the admission pods, found {len(services)}"]
    svc = services[0]
    ports = {p["port"]: p for p in svc["spec"]["ports"]}
    if 443 not in ports:
        problems.append(f"Service {svc['metadata']['name']}: no port 443")
    for p in ports.values():
        if _resolve_port(c, p.get("targetPort", p["port"])) != s.port:
            problems.append(f"Service port {p['port']}: targetPort {p.get('targetPort')!r} is not {s.port}")
    served = _routes_served(s.enabled_admission)
    registered = set()
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for cfg in m.of(kind):
            for hook in cfg.get("webhooks") or []:
                where = f"{kind} {cfg['metadata']['name']} webhook {hook['name']}"
                ref = (hook.get("clientConfig") or {}).get("service")
                if ref is None:
                    problems.append(f"{where}: clientConfig has no service reference")
                    continue
                if (ref.get("name"), ref.get("namespace")) != (svc["metadata"]["name"], svc["metadata"]["namespace"]):
                    problems.append(f"{where}: points at Service {ref.get('namespace')}/{ref.get('name')}")
                if ref.get("port", 443) not in ports:
                    problems.append(f"{where}: Service port {ref.get('port', 443)} does not exist")
                path = ref.get("path", "")
                registered.add(path)
                if path not in served:
                    problems.append(f"{where}: the admission app does not serve {path}")
                w = WEBHOOKS.get(path)
                if w is None:
                    continue
                if (kind == "MutatingWebhookConfiguration") != w.mutating:
                    problems.append(f"{where}: {path} is {'' if w.mutating else 'not '}a mutating webhook")
                expected_rule = {
                    "operations": list(w.operations),
                    "apiGroups": [w.group],
                    "apiVersions": [w.version],
                    "resources": [w.resource],
                }
                rules = [{k: r.get(k) for k in expected_rule} for r in hook.get("rules") or []]
                if rules != [expected_rule]:
                    problems.append(f"{where}: rules {rules} are not {path}'s {expected_rule}")
    for path in sorted(set(s.enabled_admission) - registered):
        problems.append(f"admission serves {path} but no webhook configuration sends reviews to it")
    return problems


def kustomization_problems(kustomization: Obj, files: set[str], images: set[str]) -> list[str]:
    problems = []
    listed = kustomization.get("resources") or []
    expected = {f for f in files if f != "kustomization.yaml" and not f.endswith(".example.yaml")}
    for f in sorted(expected - set(listed)):
        problems.append(f"kustomization.yaml does not list {f}")
    for f in sorted(set(listed) - files):
        problems.append(f"kustomization.yaml lists {f}, which does not exist")
    if len(listed) != len(set(listed)):
        problems.append("kustomization.yaml lists a file twice")
    entries = {i["name"]: i for i in kustomization.get("images") or []}
    for image in sorted(images):
        if image not in entries:
            problems.append(f"kustomization.yaml has no images entry for {image}")
        elif entries[image].get("newTag") != importlib.metadata.version("lahar"):
            problems.append(f"images {image}: newTag {entries[image].get('newTag')} is not lahar's version")
    return problems


def wiring_problems(m: Manifests, tmp_path: Path) -> list[str]:
    """NATS and Redis URLs reach the StatefulSets; every service agrees on them and the prefix."""
    problems = []
    bus: dict[str, set[str]] = {"nats": set(), "redis": set(), "prefix": set()}
    for service, dep, c in m.lahar_deployments():
        try:
            s = service_settings(m, dep, c, tmp_path)
        except (SettingsError, admission_config.SettingsError, SystemExit):
            problems.append(f"Deployment {dep['metadata']['name']}: settings do not load")
            continue
        bus["redis"].add(_without_user(s.redis_url))
        bus["prefix"].add(s.prefix)
        if service != "admission":
            bus["nats"].add(_without_user(s.nats_url))
    for key, values in bus.items():
        if len(values) != 1:
            problems.append(f"services disagree on {key}: {sorted(values)}")
    for url in bus["nats"] | bus["redis"]:
        parts = urlsplit(url)
        host = (parts.hostname or "").split(".")
        ns = host[1] if len(host) > 1 else NAMESPACE
        svc = m.get("Service", host[0], ns)
        if svc is None:
            problems.append(f"{url}: no Service {ns}/{host[0]}")
            continue
        port = next((p for p in svc["spec"]["ports"] if p["port"] == parts.port), None)
        backends = [w for w in m.workloads() if _labels_match(svc["spec"].get("selector") or {}, _pod_labels(w))]
        if port is None or len(backends) != 1:
            problems.append(f"{url}: Service {host[0]} has no port {parts.port} or does not select one workload")
            continue
        containers = backends[0]["spec"]["template"]["spec"]["containers"]
        if not any(_resolve_port(c, port.get("targetPort", port["port"])) is not None for c in containers):
            problems.append(f"{url}: targetPort {port.get('targetPort')!r} is no container port")
    return problems


def _without_user(url: str) -> str:
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]).geturl()


def credential_problems(m: Manifests, tmp_path: Path) -> list[str]:
    """Each service logs in to NATS and Valkey as its own user (lahar.wire.access), with that
    user's password from the credentials Secret, verifies NATS against the CA it mounts, and a
    role without a user on a server carries no credentials for it."""
    problems = []
    for service, dep, c in m.lahar_deployments():
        where = f"Deployment {dep['metadata']['name']}"
        try:
            s = service_settings(m, dep, c, tmp_path)
        except (SettingsError, admission_config.SettingsError, SystemExit):
            problems.append(f"{where}: settings do not load")
            continue
        urls = {"redis": s.redis_url} if service == "admission" else {"nats": s.nats_url, "redis": s.redis_url}
        for server, url in urls.items():
            roles = access.NATS_ROLES if server == "nats" else access.REDIS_ROLES
            parts = urlsplit(url)
            expected = (service, secret_placeholder({"name": CREDENTIALS_SECRET, "key": f"{server}-{service}"}))
            if service not in roles:
                if parts.username or parts.password:
                    problems.append(f"{where}: lahar {service} has no {server} user but its URL logs in")
            elif (parts.username, parts.password) != expected:
                problems.append(
                    f"{where}: {server} URL logs in as {parts.username!r} with {parts.password!r}, not {expected}"
                )
        # service_settings has laid out the mounts, so nats_ca names a local file.
        insecure = service != "admission" and (parts_scheme(s.nats_url) != "tls" or not Path(s.nats_ca).is_file())
        if insecure:
            problems.append(f"{where}: NATS without TLS, or its CA {s.nats_ca!r} is not a mounted file")
    return problems


def parts_scheme(url: str) -> str:
    return urlsplit(url).scheme


def nats_server_problems(m: Manifests, tmp_path: Path) -> list[str]:
    """NATS runs the configuration rendered from the access table, gets every user's password,
    requires TLS and serves no monitoring port; Valkey loads the ACL file and keeps protected mode."""
    problems = []
    sts = {s["spec"]["template"]["spec"]["containers"][0]["name"]: s for s in m.of("StatefulSet")}
    nats, valkey = sts["nats"], sts["valkey"]
    c = nats["spec"]["template"]["spec"]["containers"][0]
    args = " ".join(c.get("args") or []).replace("=", " ").split()
    if any(a in args for a in ("-m", "--http_port", "--https_port", "-ms")):
        problems.append("NATS serves its monitoring port")
    for svc in m.of("Service"):
        if svc["spec"]["selector"].get("app.kubernetes.io/name") == "nats":
            for p in svc["spec"]["ports"]:
                if p["port"] != 4222:
                    problems.append(f"Service {svc['metadata']['name']} exposes port {p['port']}")
    mounts = lay_out_mounts(m, nats, c, tmp_path / "nats")
    conf = Path(localize(args[args.index("--config") + 1], mounts)) if "--config" in args else None
    if conf is None or not conf.is_file():
        return [*problems, "NATS runs without a mounted --config"]
    if conf.read_text() != deploy_script("render_access").config_map()["data"]["nats.conf"]:
        problems.append("NATS's nats.conf is not what lahar.wire.access renders")
    env = container_env(m, nats, c)
    for role in access.NATS_ROLES:
        want = secret_placeholder({"name": CREDENTIALS_SECRET, "key": f"nats-{role}"})
        if env.get(password_env(role)) != want:
            problems.append(f"NATS: {password_env(role)} is not the Secret's nats-{role}")
    for path in re.findall(r'(?:cert|key)_file: "([^"]+)"', conf.read_text()):
        if not Path(localize(path, mounts)).is_file():
            problems.append(f"NATS: TLS file {path} is not mounted")
    v = valkey["spec"]["template"]["spec"]["containers"][0]
    vargs = [str(a) for a in v.get("args") or []]
    if "--protected-mode" in vargs and vargs[vargs.index("--protected-mode") + 1] == "no":
        problems.append("Valkey runs with protected mode off")
    vmounts = lay_out_mounts(m, valkey, v, tmp_path / "valkey")
    acl = vargs[vargs.index("--aclfile") + 1] if "--aclfile" in vargs else ""
    if not acl or not Path(localize(acl, vmounts)).is_file():
        problems.append("Valkey runs without a mounted --aclfile (its default user would be open)")
    return problems


def _policy_for(m: Manifests, labels: dict[str, str]) -> list[Obj]:
    return [p for p in m.of("NetworkPolicy") if _labels_match(p["spec"]["podSelector"]["matchLabels"], labels)]


def _peers(rules: list[Obj], key: str) -> list[dict[str, str]]:
    return [p["podSelector"]["matchLabels"] for r in rules for p in r.get(key, []) if "podSelector" in p]


def network_problems(m: Manifests) -> list[str]:
    """NATS admits exactly the services with a NATS user, Valkey those with a Valkey user; each
    service has its own policy, and reaches NATS, Valkey or the API server only if it needs to."""
    problems = []
    servers = {"nats": access.NATS_ROLES, "valkey": access.REDIS_ROLES}
    deployments = {service: dep for service, dep, _ in m.lahar_deployments()}
    for name, roles in servers.items():
        labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "lahar"}
        policies = _policy_for(m, labels)
        sources = [s for p in policies for s in _peers(p["spec"].get("ingress") or [], "from")]
        for service, dep in deployments.items():
            admitted = any(_labels_match(s, _pod_labels(dep)) for s in sources)
            if admitted != (service in roles):
                problems.append(f"{name} {'admits' if admitted else 'shuts out'} lahar {service}")
        if not policies or any(not r.get("from") for p in policies for r in p["spec"].get("ingress") or []):
            problems.append(f"{name}: a policy must guard it and name every source")
    for service, dep in deployments.items():
        policies = _policy_for(m, _pod_labels(dep))
        if len(policies) != 1 or "Egress" not in policies[0]["spec"]["policyTypes"]:
            problems.append(f"lahar {service}: expected one policy of its own, with egress rules")
            continue
        egress = policies[0]["spec"].get("egress") or []
        reached = {s.get("app.kubernetes.io/name") for s in _peers(egress, "to")}
        ports = {p.get("port") for r in egress for p in r.get("ports") or []}
        wants = {"nats": service in access.NATS_ROLES, "valkey": service in access.REDIS_ROLES}
        for name, wanted in wants.items():
            if (name in reached) != wanted:
                problems.append(f"lahar {service} {'cannot reach' if wanted else 'may reach'} {name}")
        if bool(ports & {443, 6443}) != bool(API_CALLS.get(service)):
            problems.append(f"lahar {service}: API server egress does not match its API calls")
        unknown = ports - {53, 4222, 6379, 443, 6443, 4318}
        if unknown or (service == "admission" and ports - {53, 6379}):
            problems.append(f"lahar {service} may reach ports {sorted(ports)}")
    return problems


def storage_problems(m: Manifests) -> list[str]:
    """NATS keeps JetStream, and Valkey its append-only file, on a persistent volume."""
    problems = []
    wanted = {"nats": ("--store_dir", "nats:"), "valkey": ("--dir", "valkey/valkey:")}
    for sts in m.of("StatefulSet"):
        c = sts["spec"]["template"]["spec"]["containers"][0]
        name = c["name"]
        flag, image = wanted.get(name, ("", ""))
        if not flag:
            problems.append(f"StatefulSet {sts['metadata']['name']}: unexpected container {name}")
            continue
        args = " ".join(c.get("args") or []).replace("=", " ").split()
        if not c["image"].startswith(image):
            problems.append(f"StatefulSet {sts['metadata']['name']}: image {c['image']} is not {image}*")
        if name == "nats" and "--jetstream" not in args and "-js" not in args:
            problems.append("NATS runs without --jetstream")
        if name == "valkey" and args[args.index("--appendonly") + 1 : args.index("--appendonly") + 2] != ["yes"]:
            problems.append("Valkey runs without --appendonly yes")
        if flag not in args:
            problems.append(f"{name}: no {flag}")
            continue
        data_dir = args[args.index(flag) + 1]
        claims = {t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates") or []}
        if not any(
            mt["name"] in claims and (data_dir + "/").startswith(mt["mountPath"].rstrip("/") + "/")
            for mt in c.get("volumeMounts") or []
        ):
            problems.append(f"{name}: {flag} {data_dir} is not on a volumeClaimTemplate volume")
    if {c["spec"]["template"]["spec"]["containers"][0]["name"] for c in m.of("StatefulSet")} != set(wanted):
        problems.append("expected one NATS and one Valkey StatefulSet")
    return problems


def scaling_problems(m: Manifests, tmp_path: Path) -> list[str]:
    problems = []
    hpas = m.of("HorizontalPodAutoscaler")
    for service, dep, c in m.lahar_deployments():
        name = dep["metadata"]["name"]
        targets = [h for h in hpas if h["spec"]["scaleTargetRef"]["name"] == name]
        if service in LEADER_ELECTED and dep["spec"].get("replicas", 1) < 2:
            problems.append(f"Deployment {name}: one replica leaves no standby for leader election")
        if service == "binder":
            if len(targets) != 1 or targets[0]["spec"]["scaleTargetRef"]["kind"] != "Deployment":
                problems.append(f"Deployment {name}: expected one HorizontalPodAutoscaler")
            elif "replicas" in dep["spec"]:
                problems.append(f"Deployment {name}: sets replicas, which every apply would force on the HPA")
            if not (c.get("resources") or {}).get("requests", {}).get("cpu"):
                problems.append(f"Deployment {name}: a CPU-utilisation HPA needs a CPU request")
        try:
            s = service_settings(m, dep, c, tmp_path)
        except (SettingsError, admission_config.SettingsError, SystemExit):
            continue
        grace = dep["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        timeout = getattr(s, "shutdown_timeout", 0)
        if grace <= timeout:
            problems.append(f"Deployment {name}: grace period {grace}s is not longer than --shutdown-timeout {timeout}")
        if service == "binder" and s.shutdown_timeout < s.ack_wait:
            problems.append(f"Deployment {name}: --shutdown-timeout is shorter than --ack-wait")
    for pdb in m.of("PodDisruptionBudget"):
        sel = pdb["spec"]["selector"]["matchLabels"]
        if sum(_labels_match(sel, _pod_labels(w)) for w in m.workloads()) != 1:
            problems.append(f"PodDisruptionBudget {pdb['metadata']['name']}: does not select exactly one workload")
    return problems


def pod_security_problems(m: Manifests) -> list[str]:
    """The namespace enforces the restricted Pod Security Standard; every pod must meet it."""
    problems = []
    ns = m.get("Namespace", NAMESPACE)
    if ns is None or ns["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce") != "restricted":
        problems.append(f"Namespace {NAMESPACE} does not enforce the restricted profile")
    allowed_volumes = {"configMap", "secret", "emptyDir", "persistentVolumeClaim", "projected", "downwardAPI"}
    for w in m.workloads():
        where = f"{w['kind']} {w['metadata']['name']}"
        pod = w["spec"]["template"]["spec"]
        psc = pod.get("securityContext") or {}
        if any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")):
            problems.append(f"{where}: uses host namespaces")
        for v in pod.get("volumes") or []:
            if not set(v) - {"name"} <= allowed_volumes:
                problems.append(f"{where}: volume {v['name']} has a type the restricted profile forbids")
        for c in pod["containers"]:
            csc = c.get("securityContext") or {}
            if not csc.get("runAsNonRoot", psc.get("runAsNonRoot")):
                problems.append(f"{where}/{c['name']}: runAsNonRoot is not set")
            if csc.get("runAsUser", psc.get("runAsUser")) == 0:
                problems.append(f"{where}/{c['name']}: runs as root")
            if csc.get("allowPrivilegeEscalation") is not False:
                problems.append(f"{where}/{c['name']}: allowPrivilegeEscalation is not false")
            if "ALL" not in (csc.get("capabilities") or {}).get("drop", []):
                problems.append(f"{where}/{c['name']}: does not drop ALL capabilities")
            seccomp = (csc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type")
            if seccomp not in ("RuntimeDefault", "Localhost"):
                problems.append(f"{where}/{c['name']}: no RuntimeDefault seccomp profile")
    return problems


# --- what the code calls ----------------------------------------------------------------------------

_KUBE_METHODS = {"list", "watch", "get", "create", "patch", "delete", "bind", "evict", "replace"}
_VERBS = {"replace": "update"}  # KubeClient's method -> the RBAC verb


def kube_calls(source: str, variable_kinds: tuple[str, ...] = (), *, declared: bool = False) -> set[tuple[str, str]]:
    """(verb, resource) of every ``kube.<method>(...)`` / ``self.kube.<method>(...)`` call in
    ``source``.  A kind given as a variable stands for ``variable_kinds``; with ``declared`` such
    calls are skipped (the service checks each against its declared table before making it)."""
    calls: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        target = node.func.value
        is_kube = (isinstance(target, ast.Name) and target.id == "kube") or (
            isinstance(target, ast.Attribute) and target.attr == "kube"
        )
        if not is_kube or node.func.attr not in _KUBE_METHODS:
            continue
        method = node.func.attr
        if method == "bind":
            calls.add(("create", "pods/binding"))
            continue
        if method == "evict":
            calls.add(("create", "pods/eviction"))
            continue
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            kinds: tuple[str, ...] = (first.value,)
        elif declared:
            continue
        elif variable_kinds:
            kinds = variable_kinds
        else:
            raise ValueError(f"line {node.lineno}: kube.{method} on a kind this scan cannot tell")
        sub = ""
        for kw in node.keywords:
            if kw.arg == "sub" and isinstance(kw.value, ast.Constant):
                sub = str(kw.value.value)
        if method == "patch" and len(node.args) > 4 and isinstance(node.args[4], ast.Constant):
            sub = str(node.args[4].value)
        for kind in kinds:
            calls.add((_VERBS.get(method, method), f"{kind}/{sub}" if sub else kind))
    return calls


def calls_of_service(service: str) -> set[tuple[str, str]]:
    package = "lahar_admission" if service == "admission" else SERVICES[service][0].split(".")[0]
    folder = Path(importlib.import_module(package).__path__[0])
    variable_kinds: tuple[str, ...] = ()
    calls: set[tuple[str, str]] = set()
    if service == "cache":
        from lahar_cache.service import CacheService

        variable_kinds = tuple(inspect.signature(CacheService.__init__).parameters["kinds"].default)
    declared = service == "controller"
    if declared:
        # The controller performs the rules' effects on whatever kind they name, each call
        # checked against its declared table first (lahar_controller.shell.calls.check).
        from lahar_controller.shell.calls import CALLS

        calls |= CALLS
    for path in sorted(folder.rglob("*.py")):
        calls |= kube_calls(path.read_text(), variable_kinds, declared=declared)
    return calls


# --- the tests -------------------------------------------------------------------------------------


def test_every_yaml_file_parses_and_every_object_has_kind_and_name() -> None:
    assert _PARSED, "no manifests found in deploy/"
    for file, doc in _PARSED:
        assert isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"), file
        if doc["kind"] != "Kustomization":
            assert doc.get("metadata", {}).get("name"), f"{file}: {doc.get('kind')} without a name"


def test_namespaced_objects_are_in_lahar_system(manifests: Manifests) -> None:
    assert manifests.get("Namespace", NAMESPACE) is not None
    for doc in manifests.applied:
        ns = doc["metadata"].get("namespace")
        if doc["kind"] in CLUSTER_SCOPED:
            assert ns is None, f"{doc['kind']} {doc['metadata']['name']} is cluster-scoped"
        else:
            assert ns == NAMESPACE, f"{doc['kind']} {doc['metadata']['name']} is in {ns!r}"


def test_the_kustomization_lists_every_file_and_the_image(manifests: Manifests) -> None:
    files = {p.name for p in DEPLOY.glob("*.yaml")}
    images = {c["image"] for _, _, c in manifests.lahar_deployments()}
    assert images == {"lahar"}, "Lahar containers name the image `lahar`; kustomize sets registry and tag"
    assert kustomization_problems(manifests.kustomization, files, images) == []


def test_every_container_command_is_accepted_by_the_real_cli(manifests: Manifests, tmp_path: Path) -> None:
    assert command_problems(manifests, tmp_path) == []


def test_probes_and_scrape_annotations_use_the_port_the_service_listens_on(
    manifests: Manifests, tmp_path: Path
) -> None:
    assert probe_problems(manifests, tmp_path) == []


def test_the_table_matches_the_calls_in_the_code() -> None:
    for service, expected in API_CALLS.items():
        assert calls_of_service(service) == expected, f"lahar {service}: update API_CALLS and its ClusterRole"


def test_each_cluster_role_grants_exactly_the_calls_its_service_makes(manifests: Manifests) -> None:
    assert rbac_problems(manifests) == []


def test_admission_service_and_webhooks_reach_paths_the_app_serves(manifests: Manifests, tmp_path: Path) -> None:
    assert admission_problems(manifests, tmp_path) == []


def test_the_webhook_file_is_what_render_webhooks_writes() -> None:
    spec = importlib.util.spec_from_file_location("render_webhooks", DEPLOY / "render_webhooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (DEPLOY / "admission-webhooks.yaml").read_text() == module.render(), (
        "deploy/admission-webhooks.yaml is out of date: run python deploy/render_webhooks.py"
    )


def test_services_share_nats_redis_and_prefix_and_reach_the_statefulsets(manifests: Manifests, tmp_path: Path) -> None:
    assert wiring_problems(manifests, tmp_path) == []


def test_nats_and_valkey_keep_their_data_on_volumes(manifests: Manifests) -> None:
    assert storage_problems(manifests) == []


def test_replicas_autoscaling_disruption_budgets_and_shutdown(manifests: Manifests, tmp_path: Path) -> None:
    assert scaling_problems(manifests, tmp_path) == []


def test_every_pod_meets_the_restricted_pod_security_standard(manifests: Manifests) -> None:
    assert pod_security_problems(manifests) == []


def test_services_select_their_pods_and_target_their_ports(manifests: Manifests) -> None:
    for svc in manifests.of("Service"):
        backends = [w for w in manifests.workloads() if _labels_match(svc["spec"]["selector"], _pod_labels(w))]
        assert len(backends) == 1, f"Service {svc['metadata']['name']} selects {len(backends)} workloads"
        containers = backends[0]["spec"]["template"]["spec"]["containers"]
        for p in svc["spec"]["ports"]:
            target = p.get("targetPort", p["port"])
            assert any(_resolve_port(c, target) for c in containers), f"{svc['metadata']['name']}: {target}"
    for w in manifests.workloads():
        assert _labels_match(w["spec"]["selector"]["matchLabels"], _pod_labels(w)), w["metadata"]["name"]


def test_network_policies_follow_the_access_table(manifests: Manifests) -> None:
    for policy in manifests.of("NetworkPolicy"):
        guarded = [
            w
            for w in manifests.workloads()
            if _labels_match(policy["spec"]["podSelector"]["matchLabels"], _pod_labels(w))
        ]
        assert guarded, f"{policy['metadata']['name']} guards no workload"
    assert network_problems(manifests) == []


def test_each_service_logs_in_as_its_own_user(manifests: Manifests, tmp_path: Path) -> None:
    assert credential_problems(manifests, tmp_path) == []


def test_nats_and_valkey_run_the_access_table_with_tls_and_no_monitor_port(
    manifests: Manifests, tmp_path: Path
) -> None:
    assert nats_server_problems(manifests, tmp_path) == []


def test_the_nats_config_file_is_what_render_access_writes() -> None:
    assert (DEPLOY / "nats-config.yaml").read_text() == deploy_script("render_access").render(), (
        "deploy/nats-config.yaml is out of date: run python deploy/render_access.py"
    )


def test_the_secrets_command_makes_what_the_manifests_mount(manifests: Manifests) -> None:
    certs = CertPair(b"ca", b"cert", b"key")
    made = {s["metadata"]["name"]: s for s in kubernetes_secrets("lahar", Credentials(), certs, NAMESPACE)}
    for example in manifests.examples:
        if example["kind"] == "Secret" and example["metadata"]["name"] in made:
            assert set(made[example["metadata"]["name"]]["stringData"]) == set(example["data"]), example["metadata"]
    assert {CREDENTIALS_SECRET, VALKEY_ACL_SECRET, NATS_TLS_SECRET} <= {
        e["metadata"]["name"] for e in manifests.examples
    }


def test_tracing_goes_to_an_otlp_endpoint(manifests: Manifests, tmp_path: Path) -> None:
    for service, dep, c in manifests.lahar_deployments():
        if service == "admission":
            continue  # the admission service does not trace
        assert service_settings(manifests, dep, c, tmp_path).otel_exporter == "otlp", service
        endpoint = container_env(manifests, dep, c).get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        assert urlsplit(endpoint).scheme in ("http", "https"), f"{service}: OTEL_EXPORTER_OTLP_ENDPOINT={endpoint!r}"


def test_the_scheduler_reads_the_default_conf_from_its_configmap(manifests: Manifests, tmp_path: Path) -> None:
    from lahar_scheduler.core import load_conf

    ((dep, c),) = [(d, c) for s, d, c in manifests.lahar_deployments() if s == "scheduler"]
    settings = service_settings(manifests, dep, c, tmp_path)
    path = Path(settings.conf)
    assert path.is_file(), f"--conf {c['args']} is not a file the ConfigMap mount provides"
    conf, default = load_conf(path.read_text()), load_conf(None)

    def shape(x: Any) -> Any:
        return x.actions, [[(p.name, p.flags, p.raw_arguments) for p in t.plugins] for t in x.tiers], x.configurations

    assert shape(conf) == shape(default), "the deployed conf is not the core's DEFAULT_CONF"
    assert not any(m.get("subPath") for m in c["volumeMounts"]), "a subPath mount never sees ConfigMap updates"


def test_dockerfile_builds_one_python_image_run_as_the_pods_user(manifests: Manifests) -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert [ln for ln in lines if ln.startswith("FROM ")] == ["FROM python:3.11-slim"]
    assert 'ENTRYPOINT ["lahar"]' in lines
    assert any(re.fullmatch(r"RUN pip install \.( .*)?", ln) for ln in lines)
    assert not re.search(r"apt-get|apk |rustup|cargo|go install|npm", text), "the build needs only Python"
    (user,) = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    uid = int(user.split(":")[0])
    assert uid != 0
    for _, dep, _c in manifests.lahar_deployments():
        assert dep["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid, dep["metadata"]["name"]


def _readme_commands() -> list[list[str]]:
    text = (DEPLOY / "README.md").read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip():
                commands.append(shlex.split(line))
    return commands


def test_readme_commands_fit_the_manifests(manifests: Manifests) -> None:
    commands = _readme_commands()
    admission = manifests.get("Service", "lahar-admission", NAMESPACE)
    assert admission is not None
    dns = f"{admission['metadata']['name']}.{admission['metadata']['namespace']}.svc"
    lahar_lines = [cmd for cmd in commands if cmd[0] == "lahar"]
    assert lahar_lines, "README shows no lahar command"
    for cmd in lahar_lines:
        args = build_parser().parse_args(cmd[1:])  # exits (fails the test) if the CLI refuses it
        if cmd[1:3] == ["admission", "certs"]:
            assert dns in args.dns, f"the serving certificate must be valid for {dns}"
    ((secret,),) = [
        [v["secret"]["secretName"] for v in d["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        for s, d, _ in manifests.lahar_deployments()
        if s == "admission"
    ]
    assert any(cmd[:6] == ["kubectl", "-n", NAMESPACE, "create", "secret", "tls"] and secret in cmd for cmd in commands)
    assert ["kubectl", "apply", "-k", "deploy/"] in commands
    text = (DEPLOY / "README.md").read_text()
    assert "schedulerName: volcano" in text
    for crd in ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh", "jobs.batch.volcano.sh"):
        assert crd in text


# --- the checks catch what they are for ----------------------------------------------------------


def _deployment(m: Manifests, service: str) -> tuple[Obj, Obj]:
    return next((d, c) for s, d, c in m.lahar_deployments() if s == service)


def test_an_unknown_flag_or_a_mistyped_variable_is_caught(manifests: Manifests, tmp_path: Path) -> None:
    _, cache = _deployment(manifests, "cache")
    cache["args"].append("--http-prot=8080")
    _, binder = _deployment(manifests, "binder")
    binder["env"].append({"name": "LAHAR_MAX_INFLIGHT", "value": "8"})
    _, admission = _deployment(manifests, "admission")
    admission["args"].append("--no-such-flag")
    problems = command_problems(manifests, tmp_path)
    assert any("lahar-cache" in p and "--http-prot" in p for p in problems), problems
    assert any("LAHAR_MAX_INFLIGHT" in p for p in problems), problems
    assert any("lahar-admission" in p and "does not parse" in p for p in problems), problems


def test_a_missing_certificate_file_is_caught(manifests: Manifests, tmp_path: Path) -> None:
    dep, _ = _deployment(manifests, "admission")
    (tls,) = [v for v in dep["spec"]["template"]["spec"]["volumes"] if "secret" in v]
    tls["secret"]["items"] = [i for i in tls["secret"]["items"] if i["key"] != "tls.key"]
    assert any("--key-file" in p for p in command_problems(manifests, tmp_path))


def test_a_probe_on_another_port_is_caught(manifests: Manifests, tmp_path: Path) -> None:
    _, scheduler = _deployment(manifests, "scheduler")
    scheduler["args"] = [a.replace("--http-port=8080", "--http-port=9090") for a in scheduler["args"]]
    problems = probe_problems(manifests, tmp_path)
    assert any("livenessProbe port" in p and "9090" in p for p in problems), problems
    assert any("prometheus.io/port" in p for p in problems), problems


def test_a_missing_or_extra_permission_is_caught(manifests: Manifests) -> None:
    role = manifests.get("ClusterRole", "lahar-binder")
    assert role is not None
    role["rules"] = [r for r in role["rules"] if "pods/binding" not in r["resources"]]
    role["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]})
    problems = rbac_problems(manifests)
    assert any("may not create pods/binding" in p for p in problems), problems
    assert any("may delete pods" in p for p in problems), problems


def test_a_token_mounted_without_need_is_caught(manifests: Manifests) -> None:
    dep, _ = _deployment(manifests, "scheduler")
    dep["spec"]["template"]["spec"]["automountServiceAccountToken"] = True
    assert any("mounts a service-account token" in p for p in rbac_problems(manifests))


def test_a_webhook_on_a_path_not_served_is_caught(manifests: Manifests, tmp_path: Path) -> None:
    _, admission = _deployment(manifests, "admission")
    (enabled,) = [e for e in admission["env"] if e["name"] == "LAHAR_ADMISSION_ENABLED_ADMISSION"]
    enabled["value"] = enabled["value"].replace("/jobs/mutate,", "")
    svc = manifests.get("Service", "lahar-admission", NAMESPACE)
    assert svc is not None
    svc["spec"]["ports"][0]["targetPort"] = 9443
    problems = admission_problems(manifests, tmp_path)
    assert any("does not serve /jobs/mutate" in p for p in problems), problems
    assert any("targetPort 9443" in p for p in problems), problems


def test_an_unlisted_file_and_a_stale_tag_are_caught(manifests: Manifests) -> None:
    kustomization = copy.deepcopy(manifests.kustomization)
    kustomization["resources"].remove("binder.yaml")
    kustomization["images"][0]["newTag"] = "0.0.0"
    problems = kustomization_problems(kustomization, {p.name for p in DEPLOY.glob("*.yaml")}, {"lahar"})
    assert "kustomization.yaml does not list binder.yaml" in problems
    assert any("newTag 0.0.0" in p for p in problems)


def test_disagreeing_urls_and_a_short_grace_period_are_caught(manifests: Manifests, tmp_path: Path) -> None:
    _, admission = _deployment(manifests, "admission")
    (url,) = [e for e in admission["env"] if e["name"] == "LAHAR_ADMISSION_REDIS_URL"]
    url["value"] = url["value"].replace("lahar-valkey", "elsewhere")
    dep, _ = _deployment(manifests, "binder")
    dep["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 10
    assert any("disagree on redis" in p for p in wiring_problems(manifests, tmp_path))
    assert any("grace period 10s" in p for p in scaling_problems(manifests, tmp_path))


def test_a_borrowed_user_an_open_monitor_or_a_wide_policy_is_caught(manifests: Manifests, tmp_path: Path) -> None:
    _, binder = _deployment(manifests, "binder")
    for item in binder["env"]:
        if item["name"] == "LAHAR_NATS_URL":
            item["value"] = item["value"].replace("tls://binder:", "tls://scheduler:")
    nats = next(s for s in manifests.of("StatefulSet") if s["metadata"]["name"] == "lahar-nats")
    nats["spec"]["template"]["spec"]["containers"][0]["args"].append("--http_port=8222")
    admission = manifests.get("NetworkPolicy", "lahar-admission", NAMESPACE)
    assert admission is not None
    admission["spec"]["egress"].append({"to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "nats"}}}]})
    assert any("lahar-binder" in p and "'scheduler'" in p for p in credential_problems(manifests, tmp_path))
    assert "NATS serves its monitoring port" in nats_server_problems(manifests, tmp_path)
    assert "lahar admission may reach nats" in network_problems(manifests)


def test_the_call_scan_sees_new_calls() -> None:
    source = """
async def f(self, kube, kind):
    await self.kube.delete("pods", ns, name)
    await kube.patch("podgroups", ns, name, body, "status")
    await self.kube.watch(kind, rv)
    await self.other.create("queues", "", q)
"""
    assert kube_calls(source, ("nodes",)) == {("delete", "pods"), ("patch", "podgroups/status"), ("watch", "nodes")}
    with pytest.raises(ValueError, match="cannot tell"):
        kube_calls(source)
