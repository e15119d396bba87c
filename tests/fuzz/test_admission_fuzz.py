"""Fuzzing the admission service: generated Jobs and Queues (well-formed and not) and raw bytes.

Whatever arrives, the service answers a well-formed AdmissionReview (uid echoed, ``allowed`` a
bool, a reason when denied, a base64 JSON-patch list when patching) or a 400 with a message,
and no rule ever fails internally.  ``LAHAR_FUZZ_EXAMPLES`` sets the number of examples per
test (``make fuzz`` uses 10000; the default keeps ``make test`` short).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lahar_admission.conformance import settings as rule_settings
from lahar_admission.live import LiveServer, start_live
from lahar_admission.review import decode_review
from lahar_admission.rules import admit
from lahar_admission.server import AppConfig
from lahar_admission.view import view_from_objects

EXAMPLES = int(os.environ.get("LAHAR_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
CLUSTER = [
    {
        "kind": "Queue",
        "metadata": {"name": n},
        "spec": {"weight": 1, "parent": p, "capability": {"cpu": "10"}, "deserved": {"cpu": "5"}},
        "status": {"state": s},
    }
    for n, p, s in (
        ("default", "", "Open"),
        ("root", "", "Open"),
        ("eng", "root", "Open"),
        ("dev", "eng", "Closed"),
    )
]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
json_value = st.recursive(
    json_leaf,
    lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=8), c, max_size=3)),
    max_leaves=12,
)


def maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the well-formed value, sometimes anything at all."""
    return st.one_of(good, good, good, json_value)


names = st.one_of(
    st.sampled_from(["a", "task-1", "master", "worker", "default", "eng", "dev", "root", "x" * 70]),
    st.text(max_size=20),
)
quantity = st.one_of(st.sampled_from(["1", "500m", "-1", "2Gi", "1.5", "0", "1e3", "abc", ""]), st.integers(-10, 10))
resources = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "hugepages-2Mi", "bad name"]),
    quantity,
    max_size=3,
)
container = st.fixed_dictionaries(
    {"name": maybe(names), "image": maybe(st.sampled_from(["busybox", "", " x"]))},
    optional={
        "resources": maybe(
            st.fixed_dictionaries({}, optional={"requests": maybe(resources), "limits": maybe(resources)})
        ),
        "ports": maybe(st.lists(st.fixed_dictionaries({"containerPort": maybe(st.integers(-1, 70000))}), max_size=2)),
    },
)
template = st.fixed_dictionaries(
    {
        "spec": maybe(
            st.fixed_dictionaries(
                {"containers": maybe(st.lists(container, max_size=2))},
                optional={
                    "initContainers": maybe(st.lists(container, max_size=1)),
                    "hostNetwork": maybe(st.booleans()),
                    "restartPolicy": maybe(st.sampled_from(["Never", "OnFailure", "Sometimes"])),
                    "resources": maybe(
                        st.fixed_dictionaries({}, optional={"requests": resources, "limits": resources})
                    ),
                },
            )
        )
    }
)
policy = st.fixed_dictionaries(
    {},
    optional={
        "event": maybe(st.sampled_from(["PodFailed", "PodEvicted", "*", "PodRunning", "Nope"])),
        "events": maybe(st.lists(st.sampled_from(["PodFailed", "TaskCompleted", "*"]), max_size=2)),
        "exitCode": maybe(st.integers(-3, 3)),
        "action": maybe(st.sampled_from(["RestartJob", "AbortJob", "SyncJob"])),
    },
)
int32 = st.one_of(st.integers(-3, 12), st.integers(-(2**33), 2**33))
task = st.fixed_dictionaries(
    {"replicas": maybe(int32)},
    optional={
        "name": maybe(names),
        "minAvailable": maybe(int32),
        "template": maybe(template),
        "policies": maybe(st.lists(policy, max_size=3)),
        "topologyPolicy": maybe(st.sampled_from(["none", "restricted"])),
        "dependsOn": maybe(st.fixed_dictionaries({"name": st.lists(names, max_size=2)})),
        "partitionPolicy": maybe(
            st.fixed_dictionaries({"totalPartitions": int32, "partitionSize": int32}, optional={"minPartitions": int32})
        ),
    },
)
job_spec = st.fixed_dictionaries(
    {},
    optional={
        "tasks": maybe(st.lists(task, max_size=3)),
        "minAvailable": maybe(int32),
        "queue": maybe(names),
        "maxRetry": maybe(int32),
        "policies": maybe(st.lists(policy, max_size=3)),
        "plugins": maybe(
            st.dictionaries(
                st.sampled_from(["svc", "ssh", "mpi", "ray", "nope"]),
                st.lists(st.sampled_from(["--master=master", "--port=1"]), max_size=2),
            )
        ),
        "volumes": maybe(
            st.lists(
                st.fixed_dictionaries({}, optional={"mountPath": maybe(names), "volumeClaimName": maybe(names)}),
                max_size=2,
            )
        ),
        "networkTopology": maybe(
            st.fixed_dictionaries({}, optional={"highestTierAllowed": int32, "highestTierName": names})
        ),
    },
)
jobs = st.fixed_dictionaries(
    {
        "apiVersion": st.just("batch.volcano.sh/v1alpha1"),
        "kind": st.just("Job"),
        "metadata": maybe(st.fixed_dictionaries({"name": maybe(names), "namespace": st.just("ns")})),
        "spec": maybe(job_spec),
    }
)
queue_spec = st.fixed_dictionaries(
    {},
    optional={
        "weight": maybe(int32),
        "parent": maybe(names),
        "capability": maybe(resources),
        "deserved": maybe(resources),
        "guarantee": maybe(st.fixed_dictionaries({"resource": resources})),
        "reclaimable": maybe(st.booleans()),
    },
)
queues = st.fixed_dictionaries(
    {
        "apiVersion": st.just("scheduling.volcano.sh/v1beta1"),
        "kind": st.just("Queue"),
        "metadata": maybe(
            st.fixed_dictionaries(
                {"name": maybe(names)},
                optional={
                    "annotations": maybe(
                        st.dictionaries(
                            st.sampled_from(["volcano.sh/hierarchy", "volcano.sh/hierarchy-weights"]),
                            st.sampled_from(["root/a", "1/2", "a", "1/-1", "x/y/z", ""]),
                        )
                    )
                },
            )
        ),
        "spec": maybe(queue_spec),
        "status": maybe(
            st.fixed_dictionaries({}, optional={"state": maybe(st.sampled_from(["Open", "Closed", "bad"]))})
        ),
    }
)
JOB_PATHS = ["/jobs/validate", "/jobs/mutate"]
QUEUE_PATHS = ["/queues/validate", "/queues/mutate"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    s = start_live(
        AppConfig(rules=rule_settings(), view=view_from_objects(CLUSTER)),
        tmp_path_factory.mktemp("fuzzcerts"),
    )
    yield s
    assert s.app.state.service.metrics.internal._metrics == {}, "a rule failed internally"
    s.stop()


@pytest.fixture(scope="module")
def client(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def envelope(obj: Any, resource: tuple[str, str, str], op: str, old: Any = None) -> bytes:
    group, version, name = resource
    req: dict[str, Any] = {
        "uid": "fuzz-uid",
        "operation": op,
        "name": "n",
        "namespace": "ns",
        "resource": {"group": group, "version": version, "resource": name},
        "object": obj,
    }
    if old is not None:
        req["oldObject"] = old
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}).encode()


def check_reply(reply: httpx.Response) -> None:
    if reply.status_code == 400:
        assert reply.json()["message"]
        return
    assert reply.status_code == 200, reply.text
    review = reply.json()
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    resp = review["response"]
    assert resp["uid"] == "fuzz-uid"
    assert isinstance(resp["allowed"], bool)
    if not resp["allowed"]:
        assert resp["status"]["message"]
    if "patch" in resp:
        assert resp["patchType"] == "JSONPatch"
        assert isinstance(json.loads(base64.b64decode(resp["patch"])), list)


def check_rules(body: bytes, path: str) -> None:
    """The pure rules on the same input never raise."""
    review = decode_review(body)
    assert review.request is not None
    verdict = admit(path, review.request, view_from_objects(CLUSTER), rule_settings())
    assert verdict.allowed or verdict.message


@FUZZ
@given(job=jobs, old=jobs, path=st.sampled_from(JOB_PATHS), op=st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
def test_generated_jobs(client: httpx.Client, job: Any, old: Any, path: str, op: str) -> None:
    body = envelope(job, ("batch.volcano.sh", "v1alpha1", "jobs"), op, old if op == "UPDATE" else None)
    check_rules(body, path)
    check_reply(client.post(path, content=body, headers={"Content-Type": "application/json"}))


@FUZZ
@given(
    queue=queues,
    old=queues,
    path=st.sampled_from(QUEUE_PATHS),
    op=st.sampled_from(["CREATE", "UPDATE", "DELETE"]),
)
def test_generated_queues(client: httpx.Client, queue: Any, old: Any, path: str, op: str) -> None:
    body = envelope(queue, ("scheduling.volcano.sh", "v1beta1", "queues"), op, old if op != "CREATE" else None)
    check_rules(body, path)
    check_reply(client.post(path, content=body, headers={"Content-Type": "application/json"}))


@FUZZ
@given(
    data=st.one_of(st.binary(max_size=300), json_value.map(lambda v: json.dumps(v).encode())),
    path=st.sampled_from([*JOB_PATHS, *QUEUE_PATHS, "/pods/mutate", "/cronjobs/validate"]),
)
def test_raw_bodies(client: httpx.Client, data: bytes, path: str) -> None:
    reply = client.post(path, content=data, headers={"Content-Type": "application/json"})
    assert reply.status_code in (200, 400), reply.text
    check_reply(reply) if reply.status_code == 200 else None


def test_examples_setting_is_read() -> None:
    assert int(os.environ.get("LAHAR_FUZZ_EXAMPLES", "200")) == EXAMPLES
    assert Path(__file__).exists()
