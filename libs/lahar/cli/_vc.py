"""What ``lahar job`` and ``lahar queue`` share: the connection (kubeconfig, vcctl's flags),
kubectl's error and table conventions, and the bus.volcano.sh Commands that vcctl creates for
suspend, resume, open and close."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from lahar.cli.kubectl import CliError, server_error

Obj = dict[str, Any]

BATCH = ("batch.volcano.sh", "v1alpha1")
BUS = ("bus.volcano.sh", "v1alpha1")
SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
JOB = "job.batch.volcano.sh"
QUEUE = "queue.scheduling.volcano.sh"
COMMAND = "command.bus.volcano.sh"


def connection_flags() -> argparse.ArgumentParser:
    """vcctl's ``--kubeconfig/-k`` and ``--master/-s``, with kubectl's ``--server`` and ``--context``."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-k", "--kubeconfig", help="path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)"
    )
    common.add_argument("--context", help="the kubeconfig context to use")
    common.add_argument("-s", "--master", "--server", dest="server", help="the address of the API server")
    return common


class Connection:
    """The official client for one kubeconfig context (or a bare ``--server``)."""

    def __init__(self, args: argparse.Namespace) -> None:
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        context_namespace = ""
        try:
            if args.server and not args.kubeconfig:
                configuration = client.Configuration()
                configuration.host = args.server
                self.api: Any = client.ApiClient(configuration)
            else:
                new_client: Any = config.new_client_from_config
                list_contexts: Any = config.list_kube_config_contexts
                self.api = new_client(config_file=args.kubeconfig, context=args.context)
                contexts, active = list_contexts(config_file=args.kubeconfig)
                if args.context:
                    active = next((c for c in contexts if c["name"] == args.context), active)
                context_namespace = (active.get("context") or {}).get("namespace") or ""
                if args.server:
                    self.api.configuration.host = args.server
        except (ConfigException, OSError) as exc:
            raise CliError(f"error: cannot load kubeconfig: {exc}") from None
        self.default_namespace = getattr(args, "namespace", None) or context_namespace or "default"
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)

    def call(self, fn: Callable[..., Any], *args: Any, context: str = "", **kwargs: Any) -> Any:
        """Run one API call; server errors become kubectl's, a dead server kubectl's refusal."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            raise server_error(exc, context) from None
        except HTTPError as exc:
            host = str(self.api.configuration.host).split("://", 1)[-1]
            raise CliError(
                f"The connection to the server {host} was refused - did you specify the right host or port? "
                f"({type(exc).__name__})"
            ) from None


def run_safely(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except CliError as exc:
            print(exc, file=sys.stderr)
            return 1

    return run


def name_of(args: argparse.Namespace, what: str, flag: str = "--name") -> str:
    """The object's name, from the positional NAME or vcctl's ``--name`` (they must agree)."""
    positional, named = getattr(args, "target", None), getattr(args, "name", None)
    if positional and named and positional != named:
        raise CliError(f"error: {flag}: {named!r} and the NAME argument {positional!r} differ; give one")
    name = positional or named
    if not name:
        raise CliError(f"error: {flag}: required: the name of the {what} (or give it as NAME)")
    return str(name)


def print_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """kubectl's layout: left-aligned columns three spaces apart."""
    cells = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        print("   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def print_doc(doc: Any, output: str) -> None:
    import yaml

    if output == "json":
        print(json.dumps(doc, indent=4))
    else:
        print(yaml.safe_dump(doc, sort_keys=False), end="")


def controller_ref(obj: Obj) -> Obj:
    """``metav1.NewControllerRef``: what vcctl puts in a Command's owner references and target."""
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def create_command(conn: Connection, target: Obj, action: str, namespace: str) -> Obj:
    """A Command as vcctl makes it: ``<name>-<action>-`` generated name, owned by and targeting
    ``target``; the controller runs it once and deletes it."""
    ref = controller_ref(target)
    command = {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "generateName": f"{ref['name']}-{action.lower()}-",
            "namespace": namespace,
            "ownerReferences": [ref],
        },
        "target": ref,
        "action": action,
    }
    created: Obj = conn.call(conn.custom.create_namespaced_custom_object, *BUS, namespace, "commands", command)
    return created
