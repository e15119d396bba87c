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
from collections.abc import Iterator
from typing import Any

from lahar.api import safeyaml
from lahar.cli._printing import display_name, output_format, print_objects

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

    p = sub.add_parser(
        "create", parents=[common], help="create objects from files; generateName allowed (like kubectl create)"
    )
    p.add_argument("-f", "--filename", action="append", required=True, metavar="FILE", help="YAML/JSON file, or -")
    p.set_defaults(handler=run_create)

    p = sub.add_parser("get", parents=[common], help="show objects (like kubectl get)")
    p.add_argument("kind", metavar="KIND", help="resource: plural, singular, kind or short name (pods, pg, queue...)")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="list across all namespaces")
    p.add_argument("-l", "--selector", help="label selector, e.g. app=x,tier!=db")
    p.add_argument("--field-selector", help="field selector, e.g. spec.nodeName=")
    p.add_argument("-w", "--watch", action="store_true", help="after listing, print each change (Ctrl-C ends)")
    p.add_argument(
        "-o", "--output", type=output_format, help="output format: wide, yaml, json, name or jsonpath=TEMPLATE"
    )
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


def server_error(exc: Any, context: str = "") -> CliError:
    """kubectl's ``Error from server (Reason): message``."""
    try:
        body = json.loads(exc.body)
        reason, message = body.get("reason") or "", body.get("message") or str(exc)
    except (TypeError, ValueError, AttributeError):
        reason, message = getattr(exc, "reason", ""), str(exc)
    # kubectl names the reason only when the Status has one (a webhook's denial often has none).
    return CliError(f"Error from server{f' ({reason})' if reason else ''}: {context}{message}")


def load_documents(paths: list[str], generate_name: str = "") -> Iterator[tuple[str, Obj]]:
    """Each object of the files.  ``generate_name``: what to do with an object that has
    ``metadata.generateName`` and no name: "" refuses it as nameless, "allow" keeps it (create),
    or the command's name, which refuses it as kubectl does ("cannot use generate name with …")."""
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
                _check_name(item.get("metadata") or {}, f"{path}: document {index}", generate_name)
                yield path, item


def _check_name(meta: Obj, where: str, generate_name: str) -> None:
    if meta.get("name") or (meta.get("generateName") and generate_name == "allow"):
        return
    if meta.get("generateName") and generate_name:
        raise CliError(f"error: from {meta['generateName']}: cannot use generate name with {generate_name}")
    raise CliError(f"error: {where}: metadata.name is required")


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

    objects = list(load_documents(args.filename, "apply"))  # a bad file fails before any call is made
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


def run_create(args: argparse.Namespace) -> int:
    return _run(_create, args)


def _create(args: argparse.Namespace) -> int:
    from kubernetes.dynamic.exceptions import DynamicApiError

    objects = list(load_documents(args.filename, "allow"))
    cluster = Cluster(args)
    failed = False
    for path, obj in objects:
        res = cluster.resource_for(obj["apiVersion"], obj["kind"])
        try:
            created = res.create(body=obj, namespace=_namespace(res, obj, cluster)).to_dict()
            print(f"{display_name(res)}/{created['metadata']['name']} created")
        except DynamicApiError as exc:
            print(server_error(exc, f'error when creating "{path}": '), file=sys.stderr)
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
    version = ""
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
            listed_dict = listed.to_dict()
            items = listed_dict.get("items") or []
            version = (listed_dict.get("metadata") or {}).get("resourceVersion") or ""
    except DynamicApiError as exc:
        raise server_error(exc) from None
    if not items and not args.names:
        where = "" if not res.namespaced or args.all_namespaces else f" in {namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
    elif items:
        print_objects(res, items, args.output, single=len(args.names) == 1, all_namespaces=args.all_namespaces)
    if args.watch:
        return _watch(res, namespace, version, args)
    return 1 if failed else 0


def _watch(res: Any, namespace: str | None, version: str, args: argparse.Namespace) -> int:
    """``get -w``: one line (or document) per change after the listing, until Ctrl-C."""
    from kubernetes.dynamic.exceptions import DynamicApiError

    names = set(args.names)
    try:
        for event in res.watch(
            namespace=namespace,
            resource_version=version or None,
            label_selector=args.selector or None,
            field_selector=args.field_selector or None,
        ):
            obj = event["raw_object"]
            if names and obj.get("metadata", {}).get("name") not in names:
                continue
            print_objects(res, [obj], args.output, single=True, all_namespaces=args.all_namespaces, show_header=False)
            sys.stdout.flush()
    except KeyboardInterrupt:
        return 0
    except DynamicApiError as exc:
        raise server_error(exc) from None
    return 0
