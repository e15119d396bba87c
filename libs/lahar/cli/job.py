"""``lahar job run|list|view|suspend|resume|delete``: vcctl's job verbs, with kubectl's output
and errors.

    lahar job run --name train --image busybox --replicas 4 --min 4 --queue research
    lahar job run -f job.yaml
    lahar job list [-A] [--queue Q] [--scheduler S] [--selector SUBSTRING]
    lahar job view NAME            (or --name/-N NAME, as vcctl)
    lahar job suspend NAME         a bus.volcano.sh Command AbortJob, as vcctl
    lahar job resume NAME          a Command ResumeJob
    lahar job delete NAME

The Job made from flags is vcctl's (one task, restartPolicy Never, the ``job.volcano.sh``
template label); its defaults (task name, queue, maxRetry, ...) come from the admission webhook,
as in Volcano.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from lahar.api.quantity import QuantityError, parse_quantity
from lahar.cli import _vc
from lahar.cli._vc import BATCH, JOB, Connection, run_safely
from lahar.cli.kubectl import CliError, load_documents

Obj = dict[str, Any]

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# vcctl's defaults for a Job made from flags.
DEFAULT_IMAGE = "busybox"
DEFAULT_RESOURCES = "cpu=1000m,memory=100Mi"
DEFAULT_SCHEDULER = "volcano"
COLUMNS = [
    "NAME",
    "CREATION",
    "PHASE",
    "JOBTYPE",
    "REPLICAS",
    "MIN",
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "UNKNOWN",
    "RETRYCOUNT",
]
JOB_TYPE_LABEL = "volcano.sh/job-type"


def register(sub: Any) -> None:
    common = _vc.connection_flags()
    common.add_argument("-n", "--namespace", help="the namespace of the job (default: the context's, else default)")
    p = sub.add_parser("job", help="run and manage Volcano Jobs (like vcctl job)")
    verbs = p.add_subparsers(dest="verb", metavar="VERB", required=True)

    r = verbs.add_parser("run", parents=[common], help="create a Job from flags or from a file")
    r.add_argument("-N", "--name", help="the name of the job")
    r.add_argument("-i", "--image", help=f"the container image (default {DEFAULT_IMAGE})")
    r.add_argument("-r", "--replicas", type=int, help="the number of pods (default 1)")
    r.add_argument("-m", "--min", type=int, help="the pods that must run together: minAvailable (default 1)")
    r.add_argument("-R", "--requests", help=f"each pod's requests (default {DEFAULT_RESOURCES})")
    r.add_argument("-L", "--limits", help=f"each pod's limits (default {DEFAULT_RESOURCES})")
    r.add_argument("-S", "--scheduler", help="the scheduler name (default volcano)")
    r.add_argument("-q", "--queue", help="the queue (default: the admission's, default)")
    r.add_argument("-f", "--filename", help="a YAML or JSON file holding one batch.volcano.sh/v1alpha1 Job")
    r.set_defaults(handler=run_safely(run_job))

    ls = verbs.add_parser("list", parents=[common], help="list Jobs with their pod counts")
    ls.add_argument("-A", "--all-namespaces", action="store_true", help="list jobs in all namespaces")
    ls.add_argument("-q", "--queue", help="only jobs in this queue")
    ls.add_argument("-S", "--scheduler", help="only jobs with this scheduler name")
    ls.add_argument("--selector", help="only jobs whose name contains this text (as vcctl)")
    ls.add_argument("-o", "--output", choices=("json", "yaml", "name"), help="output format")
    ls.set_defaults(handler=run_safely(list_jobs))

    for verb, text, handler in (
        ("view", "show a Job: its spec, status and events", view_job),
        ("suspend", "abort a Job through an AbortJob Command (its pods are deleted)", suspend_job),
        ("resume", "resume an aborted Job through a ResumeJob Command", resume_job),
        ("delete", "delete a Job", delete_job),
    ):
        v = verbs.add_parser(verb, parents=[common], help=text)
        v.add_argument("target", nargs="?", metavar="NAME", help="the name of the job")
        v.add_argument("-N", "--name", help="the name of the job (as vcctl)")
        if verb == "view":
            v.add_argument("-o", "--output", choices=("json", "yaml"), help="print the object instead")
        v.set_defaults(handler=run_safely(handler))


# --- run ---------------------------------------------------------------------------------------------


def run_job(args: argparse.Namespace) -> int:
    job = _job_from_file(args) if args.filename else _job_from_flags(args)
    conn = Connection(args)
    namespace = _namespace_for(job, args, conn)
    job["metadata"]["namespace"] = namespace
    created = conn.call(conn.custom.create_namespaced_custom_object, *BATCH, namespace, "jobs", job)
    print(f"{JOB}/{created['metadata']['name']} created")
    return 0


def _job_from_flags(args: argparse.Namespace) -> Obj:
    if not args.name:
        raise CliError("error: --name: required: the name of the job (or give -f FILE)")
    _check_name(args.name)
    image = args.image or DEFAULT_IMAGE
    replicas: int = 1 if args.replicas is None else args.replicas
    minimum: int = 1 if args.min is None else args.min
    if replicas < 0:
        raise CliError(f"error: --replicas: {replicas} must be 0 or more")
    if minimum < 0:
        raise CliError(f"error: --min: {minimum} must be 0 or more")
    if minimum > replicas:
        raise CliError(f"error: --min: {minimum} is more than --replicas {replicas}: the job could never start")
    requests = parse_resources(args.requests or DEFAULT_RESOURCES, "--requests")
    limits = parse_resources(args.limits or DEFAULT_RESOURCES, "--limits")
    _check_requests_within_limits(requests, limits)
    container = {
        "name": args.name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": limits, "requests": requests},
    }
    spec: Obj = {
        "minAvailable": minimum,
        "schedulerName": args.scheduler or DEFAULT_SCHEDULER,
        "tasks": [
            {
                "replicas": replicas,
                "template": {
                    "metadata": {"name": args.name, "labels": {"job.volcano.sh": args.name}},
                    "spec": {"restartPolicy": "Never", "containers": [container]},
                },
            }
        ],
    }
    if args.queue:
        spec["queue"] = args.queue
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": args.name}, "spec": spec}


def _check_name(name: str) -> None:
    if len(name) > 63 or not _LABEL.match(name):
        raise CliError(
            f"error: --name: {name!r} is not a valid job name: it names the job's pods and services, so it "
            "must be a lowercase RFC 1123 label (at most 63 characters: a-z, 0-9 and '-', starting and "
            "ending with a letter or digit)"
        )


def parse_resources(text: str, flag: str) -> dict[str, str]:
    """vcctl's ``cpu=1000m,memory=100Mi``: each item RESOURCE=QUANTITY."""
    out: dict[str, str] = {}
    for item in text.split(","):
        name, sep, amount = item.partition("=")
        name, amount = name.strip(), amount.strip()
        if not sep or not name or not amount:
            raise CliError(f"error: {flag}: {item!r} is not RESOURCE=QUANTITY (e.g. cpu=500m,memory=1Gi)")
        try:
            parse_quantity(amount)
        except QuantityError:
            raise CliError(f"error: {flag}: {name}: {amount!r} is not a quantity (e.g. 500m, 2, 1Gi)") from None
        out[name] = amount
    return out


def _check_requests_within_limits(requests: dict[str, str], limits: dict[str, str]) -> None:
    for name, amount in requests.items():
        if name in limits and parse_quantity(amount) > parse_quantity(limits[name]):
            raise CliError(
                f"error: --requests: {name}={amount} is more than --limits {name}={limits[name]}: "
                "a pod may not request more than its limit"
            )


def _job_from_file(args: argparse.Namespace) -> Obj:
    given = [f"--{flag}" for flag in ("name", "image", "replicas", "min", "requests", "limits", "scheduler", "queue")]
    mixed = [flag for flag in given if getattr(args, flag[2:]) is not None]
    if mixed:
        raise CliError(f"error: {', '.join(mixed)}: cannot be combined with -f; the file describes the whole job")
    docs = [obj for _, obj in load_documents([args.filename])]
    if len(docs) != 1:
        raise CliError(f"error: {args.filename}: holds {len(docs)} objects; give one Job")
    job = docs[0]
    if job.get("apiVersion") != "batch.volcano.sh/v1alpha1" or job.get("kind") != "Job":
        raise CliError(
            f"error: {args.filename}: apiVersion/kind: {job.get('apiVersion')}/{job.get('kind')} "
            "is not a Volcano Job (batch.volcano.sh/v1alpha1 Job)"
        )
    return job


def _namespace_for(job: Obj, args: argparse.Namespace, conn: Connection) -> str:
    in_file = (job.get("metadata") or {}).get("namespace")
    if in_file and args.namespace and in_file != args.namespace:
        raise CliError(
            f'error: the namespace from the provided object "{in_file}" does not match the namespace '
            f"\"{args.namespace}\". You must pass '--namespace={in_file}' to perform this operation."
        )
    return str(in_file or conn.default_namespace)


# --- list --------------------------------------------------------------------------------------------


def list_jobs(args: argparse.Namespace) -> int:
    conn = Connection(args)
    if args.all_namespaces:
        listed = conn.call(conn.custom.list_cluster_custom_object, *BATCH, "jobs")
    else:
        listed = conn.call(conn.custom.list_namespaced_custom_object, *BATCH, conn.default_namespace, "jobs")
    jobs = [job for job in listed.get("items") or [] if _selected(job, args)]
    if not jobs:
        where = "" if args.all_namespaces else f" in {conn.default_namespace} namespace"
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    if args.output == "name":
        for job in jobs:
            print(f"{JOB}/{job['metadata']['name']}")
    elif args.output:
        _vc.print_doc(
            {"apiVersion": "v1", "kind": "List", "items": jobs, "metadata": {"resourceVersion": ""}}, args.output
        )
    else:
        header = ["NAMESPACE", *COLUMNS] if args.all_namespaces else COLUMNS
        rows = [job_row(job, with_namespace=args.all_namespaces) for job in jobs]
        _vc.print_table(header, rows)
    return 0


def _selected(job: Obj, args: argparse.Namespace) -> bool:
    spec = job.get("spec") or {}
    if args.queue and spec.get("queue") != args.queue:
        return False
    if args.scheduler and spec.get("schedulerName") != args.scheduler:
        return False
    return not args.selector or args.selector in job["metadata"]["name"]


def job_row(job: Obj, with_namespace: bool = False) -> list[str]:
    """vcctl's columns: replicas summed over tasks, the counts from status, JOBTYPE from the
    ``volcano.sh/job-type`` label (Batch when absent), CREATION as a date."""
    meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
    replicas = sum(int(task.get("replicas") or 0) for task in spec.get("tasks") or [])
    counts = [int(status.get(key) or 0) for key in ("pending", "running", "succeeded", "failed", "unknown")]
    row = [
        meta["name"],
        str(meta.get("creationTimestamp") or "")[:10],
        (status.get("state") or {}).get("phase") or "",
        (meta.get("labels") or {}).get(JOB_TYPE_LABEL) or "Batch",
        str(replicas),
        str(int(status.get("minAvailable") or 0)),
        *(str(c) for c in counts),
        str(int(status.get("retryCount") or 0)),
    ]
    return [meta.get("namespace", ""), *row] if with_namespace else row


# --- view, suspend, resume, delete --------------------------------------------------------------------


def _get_job(conn: Connection, name: str) -> Obj:
    job: Obj = conn.call(conn.custom.get_namespaced_custom_object, *BATCH, conn.default_namespace, "jobs", name)
    return job


def view_job(args: argparse.Namespace) -> int:
    from lahar.cli import jobview

    name = _vc.name_of(args, "job")
    conn = Connection(args)
    job = _get_job(conn, name)
    if args.output:
        _vc.print_doc(job, args.output)
        return 0
    print(jobview.describe(job, jobview.events_of(conn, job)), end="")
    return 0


def suspend_job(args: argparse.Namespace) -> int:
    return _command(args, "AbortJob", "suspend")


def resume_job(args: argparse.Namespace) -> int:
    return _command(args, "ResumeJob", "resume")


def _command(args: argparse.Namespace, action: str, verb: str) -> int:
    name = _vc.name_of(args, "job")
    conn = Connection(args)
    job = _get_job(conn, name)
    command = _vc.create_command(conn, job, action, job["metadata"]["namespace"])
    print(f"{JOB}/{name} {verb} requested: {_vc.COMMAND}/{command['metadata']['name']} ({action}) created")
    return 0


def delete_job(args: argparse.Namespace) -> int:
    name = _vc.name_of(args, "job")
    conn = Connection(args)
    conn.call(conn.custom.delete_namespaced_custom_object, *BATCH, conn.default_namespace, "jobs", name)
    print(f'{JOB} "{name}" deleted')
    return 0
