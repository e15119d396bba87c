"""``lahar apply``, ``lahar get`` and ``lahar delete``: the kubectl commands a Lahar user needs,
against any kubeconfig (``--kubeconfig``, ``KUBECONFIG``, ``~/.kube/config``), the emulator's
included.  Built on the official client's dynamic client, with kubectl's output conventions
(``pod/x created``, tabular ``get``, ``Error from server (NotFound): ...``).

``apply`` is client-side apply with a JSON merge patch computed from the
``kubectl.kubernetes.io/last-applied-configuration`` annotation (lists are replaced whole,
where kubectl would merge some of them strategically).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import yaml

from lahar.api import safeyaml

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
Obj = dict[str, Any]


class CliError(Exception):
    """An error to print as is, with exit code 1."""


def register(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    common.add_argument("--context", help="the kubeconfig context to use")
    common.add_argument("-n", "--namespace", help="the namespace (default: the context's, else default)")

    p = sub.add_parser("apply", parents=[common], help="create or update objects from files (like kubectl apply)")
    p.add_argument("-f", "--filename", action="append", required=True, metavar="FILE", help="YAML/JSON file, or -")
    p.set_defaults(handler=run_apply)

    p = sub.add_parser("get", parents=[common], help="show objects (like kubectl get)")
    p.add_argument("kind", metavar="KIND", help="resource: plural, singular, kind or short name (pods, pg, queue...)")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="list across all namespaces")
    p.add_argument("-l", "--selector", help="label selector, e.g. app=x,tier!=db")
    p.add_argument("--field-selector", help="field selector, e.g. spec.nodeName=")
    p.add_argument("-o", "--output", choices=("wide", "yaml", "json", "name"), help="output format")
    p.set_defaults(handler=run_get)

    p = sub.add_parser(
        "delete", parents=[common], help="delete objects by file or by kind and name (like kubectl delete)"
    )
    p.add_argument("kind", nargs="?", metavar="KIND")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-f", "--filename", action="append", default=[], metavar="FILE", help="YAML/JSON file, or -")
    p.add_argument("--grace-period", type=int, default=None, help="seconds to give the object to terminate")
    p.set_defaults(handler=run_delete)


# --- connection and resource lookup ------------------------------------------------------------------


class Cluster:
    def __init__(self, args: argparse.Namespace) -> None:
        from kubernetes import config, dynamic
        from kubernetes.config.config_exception import ConfigException

        # The kubeconfig helpers are untyped; hold them as Any.
        new_client: Any = config.new_client_from_config
        list_contexts: Any = config.list_kube_config_contexts
        dynamic_client: Any = dynamic.DynamicClient
        try:
            api_client = new_client(config_file=args.kubeconfig, context=args.context)
            contexts, active = list_contexts(config_file=args.kubeconfig)
        except (ConfigException, OSError) as exc:
            raise CliError(f"error: cannot load kubeconfig: {exc}") from None
        if args.context:
            active = next((c for c in contexts if c["name"] == args.context), active)
        self.default_namespace = args.namespace or (active.get("context") or {}).get("namespace") or "default"
        self.host = api_client.configuration.host
        # A discovery cache of our own: the client's default is one file per server URL in the
        # shared temp dir, which an earlier server on the same port (an emulator) left stale.
        self._discovery_dir = tempfile.TemporaryDirectory(prefix="lahar-discovery-")
        try:
            self.dyn = dynamic_client(api_client, cache_file=os.path.join(self._discovery_dir.name, "cache.json"))
        except Exception as exc:
            raise self.connection_error(exc) from None

    def connection_error(self, exc: Exception) -> CliError:
        host = self.host.split("://", 1)[-1]
        return CliError(
            f"The connection to the server {host} was refused - did you specify the right host or port? "
            f"({type(exc).__name__})"
        )

    def resource(self, name: str) -> Any:
        """A resource by plural, singular, kind, short name or ``plural.group``."""
        wanted = name.lower()
        plural, _, group = wanted.partition(".")
        matches = []
        for res in self._all():
            if "/" in res.name or (group and res.group != group):
                continue
            names = {res.name, (res.singular_name or "").lower(), res.kind.lower(), *(res.short_names or [])}
            if plural in names:
                matches.append(res)
        if not matches:
            raise CliError(f'error: the server doesn\'t have a resource type "{name}"')
        matches.sort(key=lambda r: (r.group != "", r.group))
        return matches[0]

    def _all(self) -> Iterator[Any]:
        from kubernetes.dynamic.resource import ResourceList

        # update=True: discovery is lazy, so the groups found at start hold no resources yet.
        groups = self.dyn.resources.parse_api_groups(request_resources=True, update=True)
        for prefix in ("api", "apis"):
            for group, versions in groups[prefix].items():
                del group
                for version in versions.values():
                    for entries in version.resources.values():
                        for res in entries:
                            if not isinstance(res, ResourceList):
                                yield res

    def resource_for(self, api_version: str, kind: str) -> Any:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            return self.dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            raise CliError(
                f'error: resource mapping not found for kind "{kind}" in version "{api_version}"; '
                "ensure CRDs are installed first"
            ) from None


def display_name(res: Any) -> str:
    singular = res.kind.lower()
    return f"{singular}.{res.group}" if res.group else singular


def server_error(exc: Any, context: str = "") -> CliError:
    """kubectl's ``Error from server (Reason): message``."""
    try:
        body = json.loads(exc.body)
        reason, message = body.get("reason") or "Unknown", body.get("message") or str(exc)
    except (TypeError, ValueError, AttributeError):
        reason, message = getattr(exc, "reason", "Unknown"), str(exc)
    return CliError(f"Error from server ({reason}): {context}{message}")


def load_documents(paths: list[str]) -> Iterator[tuple[str, Obj]]:
    for path in paths:
        try:
            docs = safeyaml.documents(safeyaml.load_all(_read(path), path))
        except OSError as exc:
            raise CliError(f'error: the path "{path}" cannot be read: {exc.strerror}') from None
        except safeyaml.YamlError as exc:
            raise CliError(f"error: error parsing {exc}") from None
        except UnicodeDecodeError as exc:
            raise CliError(f"error: error parsing {path}: not UTF-8 text: {exc.reason}") from None
        for index, doc in docs:
            if not isinstance(doc, dict):
                raise CliError(f"error: {path}: document {index}: not an object")
            items = doc.get("items") if str(doc.get("kind", "")).endswith("List") and "items" in doc else [doc]
            for item in items or []:
                if not isinstance(item, dict) or not item.get("apiVersion") or not item.get("kind"):
                    raise CliError(f"error: {path}: document {index}: apiVersion and kind are required")
                if not (item.get("metadata") or {}).get("name"):
                    raise CliError(f"error: {path}: document {index}: metadata.name is required")
                yield path, item


def _read(path: str) -> str:
    if path == "-":
        return safeyaml.read(sys.stdin, path)
    with open(path, encoding="utf-8") as handle:
        return safeyaml.read(handle, path)


def _namespace(res: Any, obj: Obj, cluster: Cluster) -> str | None:
    if not res.namespaced:
        return None
    return str((obj.get("metadata") or {}).get("namespace") or cluster.default_namespace)


def _run(handler: Any, args: argparse.Namespace) -> int:
    try:
        return int(handler(args))
    except CliError as exc:
        print(exc, file=sys.stderr)
        return 1


# --- apply -------------------------------------------------------------------------------------------


def run_apply(args: argparse.Namespace) -> int:
    return _run(_apply, args)


def _apply(args: argparse.Namespace) -> int:
    from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError

    objects = list(load_documents(args.filename))  # a bad file fails before any call is made
    cluster = Cluster(args)
    failed = False
    for path, obj in objects:
        res = cluster.resource_for(obj["apiVersion"], obj["kind"])
        namespace = _namespace(res, obj, cluster)
        name = obj["metadata"]["name"]
        applied = json.dumps(obj, sort_keys=True, separators=(",", ":"))
        body = copy.deepcopy(obj)
        body["metadata"].setdefault("annotations", {})[LAST_APPLIED] = applied
        label = f"{display_name(res)}/{name}"
        try:
            try:
                current = res.get(name=name, namespace=namespace).to_dict()
            except NotFoundError:
                res.create(body=body, namespace=namespace)
                print(f"{label} created")
                continue
            previous = ((current.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
            if previous == applied:
                print(f"{label} unchanged")
                continue
            patch = merge_patch_between(json.loads(previous) if previous else {}, body)
            res.patch(body=patch, name=name, namespace=namespace, content_type="application/merge-patch+json")
            print(f"{label} configured")
        except DynamicApiError as exc:
            print(server_error(exc, f'error when applying "{path}": '), file=sys.stderr)
            failed = True
    return 1 if failed else 0


def merge_patch_between(previous: Any, desired: Any) -> Any:
    """A JSON merge patch that turns what was last applied into ``desired``: fields dropped
    from the file are set to null, the rest is ``desired``."""
    if not isinstance(desired, dict):
        return desired
    patch: Obj = {}
    prev = previous if isinstance(previous, dict) else {}
    for key in prev:
        if key not in desired:
            patch[key] = None
    for key, value in desired.items():
        patch[key] = merge_patch_between(prev.get(key), value) if isinstance(value, dict) else value
    return patch


# --- delete ------------------------------------------------------------------------------------------


def run_delete(args: argparse.Namespace) -> int:
    return _run(_delete, args)


def _delete(args: argparse.Namespace) -> int:
    from kubernetes.dynamic.exceptions import DynamicApiError

    if not args.filename and not (args.kind and args.names):
        raise CliError("error: give -f FILE, or KIND and NAME")
    objects = list(load_documents(args.filename))
    cluster = Cluster(args)
    targets: list[tuple[str, Any, str, str | None]] = []
    for path, obj in objects:
        res = cluster.resource_for(obj["apiVersion"], obj["kind"])
        targets.append((f'error when deleting "{path}": ', res, obj["metadata"]["name"], _namespace(res, obj, cluster)))
    if args.kind:
        res = cluster.resource(args.kind)
        for name in args.names:
            targets.append(("", res, name, cluster.default_namespace if res.namespaced else None))
    failed = False
    options = {} if args.grace_period is None else {"grace_period_seconds": args.grace_period}
    for context, res, name, namespace in targets:
        try:
            res.delete(name=name, namespace=namespace, **options)
            print(f'{display_name(res)} "{name}" deleted')
        except DynamicApiError as exc:
            print(server_error(exc, context), file=sys.stderr)
            failed = True
    return 1 if failed else 0


# --- get ---------------------------------------------------------------------------------------------


def run_get(args: argparse.Namespace) -> int:
    return _run(_get, args)


def _get(args: argparse.Namespace) -> int:
    from kubernetes.dynamic.exceptions import DynamicApiError

    cluster = Cluster(args)
    res = cluster.resource(args.kind)
    namespace = None if args.all_namespaces or not res.namespaced else cluster.default_namespace
    items: list[Obj] = []
    failed = False
    try:
        if args.names:
            for name in args.names:
                try:
                    items.append(res.get(name=name, namespace=namespace).to_dict())
                except DynamicApiError as exc:
                    print(server_error(exc), file=sys.stderr)
                    failed = True
        else:
            listed = res.get(
                namespace=namespace,
                label_selector=args.selector or None,
                field_selector=args.field_selector or None,
            )
            items = listed.to_dict().get("items") or []
    except DynamicApiError as exc:
        raise server_error(exc) from None
    if not items and not args.names:
        where = "" if not res.namespaced or args.all_namespaces else f" in {namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    if items:
        print_objects(res, items, args.output, single=len(args.names) == 1, all_namespaces=args.all_namespaces)
    return 1 if failed else 0


def print_objects(res: Any, items: list[Obj], output: str | None, single: bool, all_namespaces: bool) -> None:
    if output in ("json", "yaml"):
        doc: Any = (
            items[0]
            if single and items
            else {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}
        )
        print(
            json.dumps(doc, indent=4) if output == "json" else yaml.safe_dump(doc, sort_keys=False),
            end="\n" if output == "json" else "",
        )
        return
    if output == "name":
        for item in items:
            print(f"{display_name(res)}/{item['metadata']['name']}")
        return
    header, rows = table(res, items, wide=output == "wide")
    if all_namespaces and res.namespaced:
        header = ["NAMESPACE", *header]
        rows = [[item["metadata"].get("namespace", ""), *row] for item, row in zip(items, rows, strict=True)]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print("   ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def table(res: Any, items: list[Obj], wide: bool) -> tuple[list[str], list[list[str]]]:
    kind = res.kind if not res.group else ""
    if kind == "Pod":
        header = ["NAME", "READY", "STATUS", "RESTARTS", "AGE"] + (["IP", "NODE"] if wide else [])
        return header, [_pod_row(p, wide) for p in items]
    if kind == "Node":
        header = ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] + (["INTERNAL-IP"] if wide else [])
        return header, [_node_row(n, wide) for n in items]
    if kind == "Namespace":
        return ["NAME", "STATUS", "AGE"], [
            [n["metadata"]["name"], (n.get("status") or {}).get("phase", ""), age(n)] for n in items
        ]
    columns = _printer_columns(res, wide)
    header = ["NAME"] + [c["name"].upper() for c in columns]
    rows = [[item["metadata"]["name"]] + [_column(item, c) for c in columns] for item in items]
    if not any(c["name"].upper() == "AGE" for c in columns):
        header.append("AGE")
        rows = [[*row, age(item)] for row, item in zip(rows, items, strict=True)]
    return header, rows


def _printer_columns(res: Any, wide: bool) -> list[Obj]:
    """additionalPrinterColumns of the resource's CRD, when it has one (read from the cluster)."""
    if not res.group or res.group.endswith("k8s.io"):
        return []
    try:
        crds = res.client.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
        crd = crds.get(name=f"{res.name}.{res.group}").to_dict()
    except Exception:
        return []
    for version in crd["spec"].get("versions") or []:
        if version.get("name") == res.api_version:
            return [c for c in version.get("additionalPrinterColumns") or [] if wide or not c.get("priority")]
    return []


def _column(item: Obj, column: Obj) -> str:
    value: Any = item
    for key in str(column.get("jsonPath", "")).lstrip(".").split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        return "<none>" if column.get("type") != "date" else ""
    if column.get("type") == "date":
        return age({"metadata": {"creationTimestamp": value}})
    return str(value)


def _pod_row(pod: Obj, wide: bool) -> list[str]:
    status, spec = pod.get("status") or {}, pod.get("spec") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    phase = "Terminating" if pod["metadata"].get("deletionTimestamp") else status.get("phase", "Unknown")
    terminated = [((c.get("state") or {}).get("terminated") or {}).get("reason") for c in statuses]
    if phase in ("Succeeded", "Failed") and terminated and terminated[0]:
        phase = terminated[0]
    row = [
        pod["metadata"]["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        phase,
        str(sum(int(c.get("restartCount") or 0) for c in statuses)),
        age(pod),
    ]
    if wide:
        row += [status.get("podIP") or "<none>", spec.get("nodeName") or "<none>"]
    return row


def _node_row(node: Obj, wide: bool) -> list[str]:
    status = node.get("status") or {}
    ready: Obj = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    state = "Ready" if ready.get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = node["metadata"].get("labels") or {}
    roles = ",".join(sorted(k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/"))) or "<none>"
    row = [
        node["metadata"]["name"],
        state,
        roles,
        age(node),
        (status.get("nodeInfo") or {}).get("kubeletVersion", ""),
    ]
    if wide:
        row.append(
            next(
                (a["address"] for a in status.get("addresses") or [] if a.get("type") == "InternalIP"),
                "<none>",
            )
        )
    return row


def age(obj: Obj, now: float | None = None) -> str:
    """kubectl's short human duration since creationTimestamp."""
    from lahar.sim.clock import parse_iso

    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    seconds = int((now or time.time()) - parse_iso(str(stamp)))
    seconds = max(seconds, 0)
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d"
