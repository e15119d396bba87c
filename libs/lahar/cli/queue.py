"""``lahar queue create|list|get|operate|delete``: vcctl's queue verbs, with kubectl's output and
errors.

    lahar queue create --name research --weight 4 [--parent root]
    lahar queue list
    lahar queue get research          (or --name/-n research, as vcctl)
    lahar queue operate research --action close     a Command CloseQueue, as vcctl
    lahar queue operate research --action open      a Command OpenQueue
    lahar queue operate research --action update --weight 8   patches spec.weight
    lahar queue delete research

As in vcctl, ``-n`` is the queue's name (queues have no namespace); the counts of ``list`` and
``get`` are the queue's PodGroups by phase.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lahar.cli import _vc
from lahar.cli._vc import QUEUE, SCHEDULING, Connection, run_safely
from lahar.cli.kubectl import CliError

Obj = dict[str, Any]

COLUMNS = ["NAME", "WEIGHT", "STATE", "PARENT", "INQUEUE", "PENDING", "RUNNING", "UNKNOWN", "COMPLETED"]
_PHASES = ("Inqueue", "Pending", "Running", "Unknown", "Completed")
# vcctl creates queue Commands in this namespace (queues themselves have none).
COMMAND_NAMESPACE = "default"
ACTIONS = {"open": "OpenQueue", "close": "CloseQueue"}


def register(sub: Any) -> None:
    common = _vc.connection_flags()
    p = sub.add_parser("queue", help="create and manage Volcano Queues (like vcctl queue)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    c = verbs.add_parser("create", parents=[common], help="create a Queue")
    _name_args(c)
    c.add_argument("-w", "--weight", type=int, default=1, help="the queue's weight (default 1)")
    c.add_argument("-p", "--parent", help="the parent queue (hierarchical queues)")
    c.add_argument(
        "-S",
        "--state",
        choices=("Open", "Closed"),
        default="Open",
        help="Closed: close it at once (a CloseQueue Command)",
    )
    c.set_defaults(handler=run_safely(create_queue))

    ls = verbs.add_parser("list", parents=[common], help="list Queues with their PodGroup counts")
    ls.add_argument("-o", "--output", choices=("json", "yaml", "name"), help="output format")
    ls.set_defaults(handler=run_safely(list_queues))

    g = verbs.add_parser("get", parents=[common], help="show one Queue with its PodGroup counts")
    _name_args(g)
    g.add_argument("-o", "--output", choices=("json", "yaml"), help="print the object instead")
    g.set_defaults(handler=run_safely(get_queue))

    o = verbs.add_parser("operate", parents=[common], help="open or close a Queue (Commands), or update its weight")
    _name_args(o)
    o.add_argument("-a", "--action", help="open, close or update")
    o.add_argument("-w", "--weight", type=int, help="the new weight (with --action update)")
    o.set_defaults(handler=run_safely(operate_queue))

    d = verbs.add_parser("delete", parents=[common], help="delete a Queue")
    _name_args(d)
    d.set_defaults(handler=run_safely(delete_queue))


def _name_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="NAME", help="the name of the queue")
    parser.add_argument("-n", "--name", help="the name of the queue (as vcctl)")


# --- create, delete ----------------------------------------------------------------------------------


def create_queue(args: argparse.Namespace) -> int:
    name = _vc.name_of(args, "queue")
    if args.weight < 1:
        raise CliError(f"error: --weight: {args.weight} must be 1 or more: a queue's share is proportional to it")
    spec: Obj = {"weight": args.weight}
    if args.parent:
        spec["parent"] = args.parent
    body = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
    conn = Connection(args)
    queue = conn.call(conn.custom.create_cluster_custom_object, *SCHEDULING, "queues", body)
    print(f"{QUEUE}/{name} created")
    if args.state == "Closed":
        _command(conn, queue, "CloseQueue", "close")
    return 0


def delete_queue(args: argparse.Namespace) -> int:
    name = _vc.name_of(args, "queue")
    conn = Connection(args)
    conn.call(conn.custom.delete_cluster_custom_object, *SCHEDULING, "queues", name)
    print(f'{QUEUE} "{name}" deleted')
    return 0


# --- list, get ---------------------------------------------------------------------------------------


def list_queues(args: argparse.Namespace) -> int:
    conn = Connection(args)
    queues = conn.call(conn.custom.list_cluster_custom_object, *SCHEDULING, "queues").get("items") or []
    if not queues:
        print("No resources found", file=sys.stderr)
        return 0
    if args.output == "name":
        for queue in queues:
            print(f"{QUEUE}/{queue['metadata']['name']}")
        return 0
    if args.output:
        _vc.print_doc(
            {"apiVersion": "v1", "kind": "List", "items": queues, "metadata": {"resourceVersion": ""}}, args.output
        )
        return 0
    counts = podgroup_counts(_podgroups(conn))
    _vc.print_table(COLUMNS, [queue_row(q, counts.get(q["metadata"]["name"], {})) for q in queues])
    return 0


def get_queue(args: argparse.Namespace) -> int:
    name = _vc.name_of(args, "queue")
    conn = Connection(args)
    queue = conn.call(conn.custom.get_cluster_custom_object, *SCHEDULING, "queues", name)
    if args.output:
        _vc.print_doc(queue, args.output)
        return 0
    counts = podgroup_counts(_podgroups(conn)).get(name, {})
    _vc.print_table(COLUMNS, [queue_row(queue, counts)])
    return 0


def _podgroups(conn: Connection) -> list[Obj]:
    listed = conn.call(conn.custom.list_cluster_custom_object, *SCHEDULING, "podgroups")
    items: list[Obj] = listed.get("items") or []
    return items


def podgroup_counts(podgroups: list[Obj]) -> dict[str, dict[str, int]]:
    """PodGroups per queue by phase, as vcctl's ``StatPodGroupCountsForQueue``."""
    counts: dict[str, dict[str, int]] = {}
    for pg in podgroups:
        queue = (pg.get("spec") or {}).get("queue") or ""
        phase = (pg.get("status") or {}).get("phase") or ""
        if phase in _PHASES:
            per = counts.setdefault(queue, {})
            per[phase] = per.get(phase, 0) + 1
    return counts


def queue_row(queue: Obj, counts: dict[str, int]) -> list[str]:
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    return [
        queue["metadata"]["name"],
        str(spec.get("weight", 0)),
        status.get("state") or "",
        spec.get("parent") or "",
        *(str(counts.get(phase, 0)) for phase in _PHASES),
    ]


# --- operate -----------------------------------------------------------------------------------------


def operate_queue(args: argparse.Namespace) -> int:
    name = _vc.name_of(args, "queue")
    action = (args.action or "").lower()
    if not action:
        raise CliError("error: --action: required: open, close or update")
    if action not in (*ACTIONS, "update"):
        raise CliError(f"error: --action: {args.action!r} is not one of open, close, update")
    if action != "update" and args.weight is not None:
        raise CliError(f"error: --weight: only with --action update, not {action}")
    conn = Connection(args)
    if action == "update":
        return _update_weight(conn, name, args.weight)
    queue = conn.call(conn.custom.get_cluster_custom_object, *SCHEDULING, "queues", name)
    _command(conn, queue, ACTIONS[action], action)
    return 0


def _update_weight(conn: Connection, name: str, weight: int | None) -> int:
    if weight is None or weight < 1:
        shown = "missing" if weight is None else f"{weight}"
        raise CliError(f"error: --weight: {shown}: --action update needs a weight of 1 or more")
    conn.call(conn.custom.patch_cluster_custom_object, *SCHEDULING, "queues", name, {"spec": {"weight": weight}})
    print(f"{QUEUE}/{name} patched")
    return 0


def _command(conn: Connection, queue: Obj, action: str, verb: str) -> None:
    command = _vc.create_command(conn, queue, action, COMMAND_NAMESPACE)
    name = queue["metadata"]["name"]
    print(f"{QUEUE}/{name} {verb} requested: {_vc.COMMAND}/{command['metadata']['name']} ({action}) created")
