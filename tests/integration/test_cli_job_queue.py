"""``lahar job`` and ``lahar queue`` against the emulator: the objects vcctl would create (Jobs,
Queues, bus.volcano.sh Commands), vcctl's columns, and errors that name the flag and why."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from lahar.cli.main import build_parser

BATCH = ("batch.volcano.sh", "v1alpha1")
SCHED = ("scheduling.volcano.sh", "v1beta1")
BUS = ("bus.volcano.sh", "v1alpha1")
JOB_COLUMNS = [
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
QUEUE_COLUMNS = ["NAME", "WEIGHT", "STATE", "PARENT", "INQUEUE", "PENDING", "RUNNING", "UNKNOWN", "COMPLETED"]


@pytest.fixture
def lahar(sim, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """Run one ``lahar`` command in this process: (exit code, stdout, stderr)."""
    kubeconfig = str(sim.write_kubeconfig(tmp_path / "kubeconfig"))

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        args = build_parser().parse_args([*argv, "--kubeconfig", kubeconfig])
        code = args.handler(args)
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def commands(custom: client.CustomObjectsApi, ns: str) -> list[dict[str, Any]]:
    return custom.list_namespaced_custom_object(*BUS, ns, "commands")["items"]


# --- job run -----------------------------------------------------------------------------------------


def test_run_from_flags_creates_vcctls_job(lahar, custom: client.CustomObjectsApi, ns: str) -> None:
    code, out, err = lahar(
        "job", "run", "-n", ns, "--name", "train", "--image", "nginx:1", "--replicas", "3", "--min", "2",
        "--requests", "cpu=500m,memory=1Gi", "--limits", "cpu=1,memory=1Gi", "--queue", "research",
    )  # fmt: skip
    assert (code, out, err) == (0, "job.batch.volcano.sh/train created\n", "")
    job = custom.get_namespaced_custom_object(*BATCH, ns, "jobs", "train")
    assert job["spec"] == {
        "maxRetry": 3,  # not sent: the default of Volcano's CRD schema, filled in by the API server
        "minAvailable": 2,
        "schedulerName": "volcano",
        "queue": "research",
        "tasks": [
            {
                "replicas": 3,
                "template": {
                    "metadata": {"name": "train", "labels": {"job.volcano.sh": "train"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "train",
                                "image": "nginx:1",
                                "imagePullPolicy": "IfNotPresent",
                                "resources": {
                                    "limits": {"cpu": "1", "memory": "1Gi"},
                                    "requests": {"cpu": "500m", "memory": "1Gi"},
                                },
                            }
                        ],
                    },
                },
            }
        ],
    }


def test_run_defaults_are_vcctls(lahar, custom: client.CustomObjectsApi, ns: str) -> None:
    assert lahar("job", "run", "-n", ns, "-N", "plain")[0] == 0
    spec = custom.get_namespaced_custom_object(*BATCH, ns, "jobs", "plain")["spec"]
    container = spec["tasks"][0]["template"]["spec"]["containers"][0]
    assert (spec["minAvailable"], spec["tasks"][0]["replicas"], spec["schedulerName"]) == (1, 1, "volcano")
    assert container["image"] == "busybox" and spec["queue"] == "default"  # none sent: the CRD's default
    assert container["resources"]["requests"] == {"cpu": "1000m", "memory": "100Mi"}


def test_run_from_file(lahar, custom: client.CustomObjectsApi, ns: str, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: from-file}\n"
        "spec:\n  minAvailable: 1\n  tasks:\n  - name: worker\n    replicas: 1\n"
        "    template: {spec: {restartPolicy: Never, containers: [{name: c, image: busybox}]}}\n"
    )
    assert lahar("job", "run", "-n", ns, "-f", str(path)) == (0, "job.batch.volcano.sh/from-file created\n", "")
    assert custom.get_namespaced_custom_object(*BATCH, ns, "jobs", "from-file")["spec"]["tasks"][0]["name"] == "worker"
    code, _, err = lahar("job", "run", "-n", ns, "-f", str(path), "--image", "x")
    assert code == 1 and err.startswith("error: --image: cannot be combined with -f")
    other = tmp_path / "ns.yaml"
    other.write_text(path.read_text().replace("{name: from-file}", "{name: elsewhere, namespace: other}"))
    code, _, err = lahar("job", "run", "-n", ns, "-f", str(other))
    assert code == 1 and 'the namespace from the provided object "other" does not match' in err
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    code, _, err = lahar("job", "run", "-n", ns, "-f", str(pod))
    assert code == 1 and "apiVersion/kind: v1/Pod is not a Volcano Job" in err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ((), "error: --name: required: the name of the job (or give -f FILE)"),
        (("--name", "Big_Job"), "error: --name: 'Big_Job' is not a valid job name"),
        (("--name", "j", "--replicas", "2", "--min", "3"), "error: --min: 3 is more than --replicas 2"),
        (("--name", "j", "--requests", "cpu"), "error: --requests: 'cpu' is not RESOURCE=QUANTITY"),
        (("--name", "j", "--limits", "memory=lots"), "error: --limits: memory: 'lots' is not a quantity"),
        (
            ("--name", "j", "--requests", "cpu=2", "--limits", "cpu=1"),
            "error: --requests: cpu=2 is more than --limits cpu=1",
        ),
    ],
)
def test_run_errors_name_the_flag(
    lahar, custom: client.CustomObjectsApi, ns: str, flags: tuple[str, ...], message: str
) -> None:
    code, out, err = lahar("job", "run", "-n", ns, *flags)
    assert code == 1 and out == "" and err.startswith(message), err
    assert custom.list_namespaced_custom_object(*BATCH, ns, "jobs")["items"] == []


def test_run_existing_job_is_kubectls_server_error(lahar, ns: str) -> None:
    assert lahar("job", "run", "-n", ns, "-N", "twice")[0] == 0
    code, _, err = lahar("job", "run", "-n", ns, "-N", "twice")
    assert code == 1 and err == 'Error from server (AlreadyExists): jobs.batch.volcano.sh "twice" already exists\n'


# --- suspend, resume, delete -------------------------------------------------------------------------


def test_suspend_and_resume_create_vcctls_commands(lahar, custom: client.CustomObjectsApi, ns: str) -> None:
    lahar("job", "run", "-n", ns, "-N", "j")
    job = custom.get_namespaced_custom_object(*BATCH, ns, "jobs", "j")
    code, out, _ = lahar("job", "suspend", "-n", ns, "j")
    assert code == 0 and out.startswith("job.batch.volcano.sh/j suspend requested: command.bus.volcano.sh/j-abortjob-")
    assert lahar("job", "resume", "-n", ns, "-N", "j")[0] == 0
    ref = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": "j",
        "uid": job["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    made = commands(custom, ns)
    assert sorted(c["action"] for c in made) == ["AbortJob", "ResumeJob"]
    for command in made:
        prefix = f"j-{command['action'].lower()}-"
        assert command["metadata"]["generateName"] == prefix and command["metadata"]["name"].startswith(prefix)
        assert command["metadata"]["ownerReferences"] == [ref] and command["target"] == ref
    abort = next(c for c in made if c["action"] == "AbortJob")
    command_name = abort["metadata"]["name"]
    assert (
        out == f"job.batch.volcano.sh/j suspend requested: command.bus.volcano.sh/{command_name} (AbortJob) created\n"
    )


def test_suspend_a_missing_job_creates_nothing(lahar, custom: client.CustomObjectsApi, ns: str) -> None:
    code, _, err = lahar("job", "suspend", "-n", ns, "nope")
    assert code == 1 and err == 'Error from server (NotFound): jobs.batch.volcano.sh "nope" not found\n'
    assert commands(custom, ns) == []
    code, _, err = lahar("job", "resume", "-n", ns)
    assert code == 1 and err.startswith("error: --name: required: the name of the job")
    code, _, err = lahar("job", "resume", "-n", ns, "a", "--name", "b")
    assert code == 1 and "differ" in err


def test_delete(lahar, custom: client.CustomObjectsApi, ns: str) -> None:
    lahar("job", "run", "-n", ns, "-N", "gone")
    assert lahar("job", "delete", "-n", ns, "gone") == (0, 'job.batch.volcano.sh "gone" deleted\n', "")
    assert custom.list_namespaced_custom_object(*BATCH, ns, "jobs")["items"] == []
    code, _, err = lahar("job", "delete", "-n", ns, "gone")
    assert code == 1 and "(NotFound)" in err


# --- list, view --------------------------------------------------------------------------------------


def test_list_shows_vcctls_columns(lahar, custom: client.CustomObjectsApi, ns: str) -> None:
    code, _, err = lahar("job", "list", "-n", ns)
    assert code == 0 and err == f"No resources found in {ns} namespace.\n"
    lahar("job", "run", "-n", ns, "-N", "a-long-job-name", "--replicas", "4", "--min", "3", "--queue", "q1")
    lahar("job", "run", "-n", ns, "-N", "b", "--queue", "q2")
    custom.patch_namespaced_custom_object(
        *BATCH, ns, "jobs", "b", {"metadata": {"labels": {"volcano.sh/job-type": "MPI"}}}
    )
    status = {"state": {"phase": "Running"}, "minAvailable": 1, "pending": 1, "running": 2, "succeeded": 3, "failed": 4}
    custom.patch_namespaced_custom_object_status(
        *BATCH, ns, "jobs", "b", {"status": {**status, "unknown": 5, "retryCount": 6}}
    )
    code, out, _ = lahar("job", "list", "-n", ns)
    table = rows(out)
    assert code == 0 and table[0] == JOB_COLUMNS
    created = custom.get_namespaced_custom_object(*BATCH, ns, "jobs", "b")["metadata"]["creationTimestamp"][:10]
    assert table[1] == ["a-long-job-name", created, "Batch", "4", "0", "0", "0", "0", "0", "0", "0"]  # no phase yet
    assert table[2] == ["b", created, "Running", "MPI", "1", "1", "1", "2", "3", "4", "5", "6"]
    assert out.splitlines()[0].index("CREATION") == len("a-long-job-name") + 3  # columns aligned
    assert [r[0] for r in rows(lahar("job", "list", "-n", ns, "--queue", "q2")[1])[1:]] == ["b"]
    assert [r[0] for r in rows(lahar("job", "list", "-n", ns, "--selector", "long")[1])[1:]] == ["a-long-job-name"]
    everywhere = rows(lahar("job", "list", "-A")[1])
    assert everywhere[0] == ["NAMESPACE", *JOB_COLUMNS] and [ns, "b"] in [r[:2] for r in everywhere]
    assert lahar("job", "list", "-n", ns, "-o", "name")[1].split() == [
        "job.batch.volcano.sh/a-long-job-name",
        "job.batch.volcano.sh/b",
    ]


def test_view_shows_spec_status_and_both_kinds_of_events(
    lahar, sim, custom: client.CustomObjectsApi, core: client.CoreV1Api, ns: str
) -> None:
    import httpx

    lahar("job", "run", "-n", ns, "-N", "v", "--replicas", "2", "--min", "2", "--queue", "research")
    job = custom.get_namespaced_custom_object(*BATCH, ns, "jobs", "v")
    custom.patch_namespaced_custom_object_status(
        *BATCH, ns, "jobs", "v", {"status": {"state": {"phase": "Running"}, "running": 2}}
    )
    involved = {"kind": "Job", "apiVersion": "batch.volcano.sh/v1alpha1", "name": "v", "namespace": ns}
    uid = job["metadata"]["uid"]
    core.create_namespaced_event(
        ns,
        {
            "metadata": {"name": "v.1"},
            "involvedObject": {**involved, "uid": uid},
            "reason": "PodGroupPending",
            "message": "waiting",
            "type": "Normal",
            "source": {"component": "vc-controller-manager"},
            "lastTimestamp": "2026-01-01T00:00:00Z",
            "count": 3,
        },
    )
    stale = {"metadata": {"name": "v.0"}, "involvedObject": {**involved, "uid": "an-earlier-job"}, "reason": "Stale"}
    core.create_namespaced_event(ns, stale)
    modern = {
        "metadata": {"name": "v.2"},
        "eventTime": "2026-01-01T00:00:01.000000Z",
        "reportingController": "lahar.io/controller",
        "reportingInstance": "c-0",
        "action": "Sync",
        "reason": "ExecuteAction",
        "type": "Normal",
        "regarding": {**involved, "uid": uid},
        "note": "Start to execute action SyncJob",
    }
    with httpx.Client(base_url=sim.url, trust_env=False) as http:
        assert http.post(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", json=modern).status_code == 201
    code, out, _ = lahar("job", "view", "-n", ns, "v")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["Name:", "v"] and lines[1].split() == ["Namespace:", ns]
    for expected in (
        ["Queue:", "research"],
        ["Replicas:", "2"],
        ["Phase:", "Running"],
        ["Running:", "2"],
        ["Image:", "busybox"],
    ):
        assert expected in [line.split() for line in lines], expected
    events = lines[lines.index("Events:") + 1 :]
    assert events[0].split() == ["Type", "Reason", "Age", "From", "Message"]
    assert [e.split()[1] for e in events[2:]] == ["PodGroupPending", "ExecuteAction"]  # oldest first; Stale left out
    assert "(x3)" in events[2] and "vc-controller-manager" in events[2] and events[2].endswith("waiting")
    assert "lahar.io/controller" in events[3] and events[3].endswith("Start to execute action SyncJob")
    code, _, err = lahar("job", "view", "-n", ns, "missing")
    assert code == 1 and err == 'Error from server (NotFound): jobs.batch.volcano.sh "missing" not found\n'


# --- queue -------------------------------------------------------------------------------------------


@pytest.fixture
def queue_name(custom: client.CustomObjectsApi):
    name = f"q-{uuid.uuid4().hex[:8]}"
    yield name
    with contextlib.suppress(client.ApiException):
        custom.delete_cluster_custom_object(*SCHED, "queues", name)


def test_queue_create_list_get_count_podgroups_by_phase(
    lahar, custom: client.CustomObjectsApi, ns: str, queue_name: str
) -> None:
    assert lahar("queue", "create", "-n", queue_name, "-w", "3") == (
        0,
        f"queue.scheduling.volcano.sh/{queue_name} created\n",
        "",
    )
    # dequeueStrategy is not sent: it is the default of Volcano's CRD schema, filled in by the API server.
    assert custom.get_cluster_custom_object(*SCHED, "queues", queue_name)["spec"] == {
        "weight": 3,
        "dequeueStrategy": "traverse",
    }
    custom.patch_cluster_custom_object_status(*SCHED, "queues", queue_name, {"status": {"state": "Open"}})
    for i, phase in enumerate(["Running", "Running", "Inqueue", "Pending", "Completed", "Unknown", "Running"]):
        body = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": f"pg{i}"},
            "spec": {"queue": queue_name if i < 6 else "elsewhere", "minMember": 1},
            "status": {"phase": phase},
        }
        custom.create_namespaced_custom_object(*SCHED, ns, "podgroups", body)
    expected = [queue_name, "3", "Open", "1", "1", "2", "1", "1"]  # no PARENT: an empty cell
    code, out, _ = lahar("queue", "list")
    table = rows(out)
    assert code == 0 and table[0] == QUEUE_COLUMNS
    assert expected in table[1:]
    code, out, _ = lahar("queue", "get", queue_name)
    assert code == 0 and rows(out) == [QUEUE_COLUMNS, expected]
    assert rows(lahar("queue", "get", "-n", queue_name)[1]) == [QUEUE_COLUMNS, expected]
    code, _, err = lahar("queue", "create", "-n", queue_name)
    assert (
        code == 1
        and err == f'Error from server (AlreadyExists): queues.scheduling.volcano.sh "{queue_name}" already exists\n'
    )
    code, _, err = lahar("queue", "create", "-n", "q-zero", "-w", "0")
    assert code == 1 and err.startswith("error: --weight: 0 must be 1 or more")


def test_queue_create_with_parent_and_delete(lahar, custom: client.CustomObjectsApi, queue_name: str) -> None:
    assert lahar("queue", "create", queue_name, "--parent", "root")[0] == 0
    spec = custom.get_cluster_custom_object(*SCHED, "queues", queue_name)["spec"]
    assert spec == {"weight": 1, "parent": "root", "dequeueStrategy": "traverse"}  # the last: the CRD's default
    assert [queue_name, "1", "root"] in [r[:3] for r in rows(lahar("queue", "list")[1])]
    assert lahar("queue", "delete", queue_name) == (0, f'queue.scheduling.volcano.sh "{queue_name}" deleted\n', "")


def test_queue_operate_open_close_make_vcctls_commands(lahar, custom: client.CustomObjectsApi, queue_name: str) -> None:
    lahar("queue", "create", "-n", queue_name)
    queue = custom.get_cluster_custom_object(*SCHED, "queues", queue_name)
    code, out, _ = lahar("queue", "operate", "-n", queue_name, "--action", "close")
    prefix = f"{queue_name}-closequeue-"
    assert code == 0 and out.startswith(
        f"queue.scheduling.volcano.sh/{queue_name} close requested: command.bus.volcano.sh/{prefix}"
    )
    assert lahar("queue", "operate", queue_name, "-a", "open")[0] == 0
    ref = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "name": queue_name,
        "uid": queue["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    mine = [c for c in commands(custom, "default") if c["target"]["name"] == queue_name]
    assert sorted(c["action"] for c in mine) == ["CloseQueue", "OpenQueue"]
    for command in mine:
        assert command["metadata"]["generateName"] == f"{queue_name}-{command['action'].lower()}-"
        assert command["metadata"]["ownerReferences"] == [ref] and command["target"] == ref
        custom.delete_namespaced_custom_object(*BUS, "default", "commands", command["metadata"]["name"])


def test_queue_operate_update_patches_the_weight(lahar, custom: client.CustomObjectsApi, queue_name: str) -> None:
    lahar("queue", "create", "-n", queue_name, "-w", "2")
    assert lahar("queue", "operate", "-n", queue_name, "-a", "update", "-w", "7") == (
        0,
        f"queue.scheduling.volcano.sh/{queue_name} patched\n",
        "",
    )
    assert custom.get_cluster_custom_object(*SCHED, "queues", queue_name)["spec"]["weight"] == 7


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ((), "error: --action: required: open, close or update"),
        (("-a", "shut"), "error: --action: 'shut' is not one of open, close, update"),
        (("-a", "update"), "error: --weight: missing: --action update needs a weight of 1 or more"),
        (("-a", "update", "-w", "-1"), "error: --weight: -1: --action update needs a weight of 1 or more"),
        (("-a", "open", "-w", "3"), "error: --weight: only with --action update, not open"),
    ],
)
def test_queue_operate_errors_name_the_flag(lahar, queue_name: str, flags: tuple[str, ...], message: str) -> None:
    lahar("queue", "create", "-n", queue_name)
    code, out, err = lahar("queue", "operate", "-n", queue_name, *flags)
    assert (code, out, err) == (1, "", message + "\n")


def test_queue_operate_on_a_missing_queue(lahar) -> None:
    code, _, err = lahar("queue", "operate", "-n", "no-such-queue", "-a", "close")
    assert code == 1 and err == 'Error from server (NotFound): queues.scheduling.volcano.sh "no-such-queue" not found\n'


# --- the console command -----------------------------------------------------------------------------


def test_console_command_and_unreachable_server(sim, ns: str, tmp_path: Path) -> None:
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    run = subprocess.run(
        [sys.executable, "-m", "lahar", "job", "run", "-n", ns, "-N", "console"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert run.returncode == 0 and run.stdout == "job.batch.volcano.sh/console created\n", run.stderr
    listed = subprocess.run(
        [sys.executable, "-m", "lahar", "job", "list", "-n", ns], capture_output=True, text=True, env=env, timeout=60
    )
    assert rows(listed.stdout)[0] == JOB_COLUMNS and rows(listed.stdout)[1][0] == "console"
    down = subprocess.run(
        [sys.executable, "-m", "lahar", "queue", "list", "--server", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert down.returncode == 1 and down.stderr.startswith("The connection to the server 127.0.0.1:9 was refused")
