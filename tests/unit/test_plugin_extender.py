"""extender plugin without sockets: a recording transport stands in for HTTP (the core is pure;
tests/integration/test_extender.py runs the same protocol against a real HTTP server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from builders import _decode, make_conf, node, only, open_session, queue
from lahar_scheduler.core import load_conf
from lahar_scheduler.framework.conf import ConfError
from lahar_scheduler.framework.ports import TransportError
from lahar_scheduler.framework.session import Session
from lahar_scheduler.plugins import PLUGINS


class Recording:
    """Answers every POST with ``reply(verb, request)``; remembers what was asked."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def post(self, url: str, body: bytes, timeout: float) -> bytes:
        verb = url.rsplit("/", 1)[1]
        request = json.loads(body)
        self.calls.append((verb, request))
        out = self.reply(verb, request)
        if isinstance(out, Exception):
            raise out
        return json.dumps(out).encode()


def gpu_pod(name: str, containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> Any:
    spec: dict[str, Any] = {"schedulerName": "volcano", "containers": containers}
    if init:
        spec["initContainers"] = init
    meta = {"name": name, "namespace": "default", "uid": name, "annotations": {"scheduling.k8s.io/group-name": "pg"}}
    return _decode({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}})


def res(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    return {"name": "c", "resources": {"requests": requests or {}, "limits": limits or {}}}


def session(objs: list[Any], transport: Any, **arguments: Any) -> Session:
    from builders import podgroup, snapshot

    base = [node("n1"), node("n2"), queue("default"), podgroup("pg", min_member=1)]
    args = {"extender.urlPrefix": "http://ext", **arguments}
    conf = make_conf("allocate", [only("extender", "enablePredicate", "enableNodeOrder", **args)])
    return Session(snapshot(base + objs), conf, dict(PLUGINS), transport=transport).open()


@pytest.mark.parametrize(
    ("case", "managed", "containers", "init", "expected"),
    [
        # volcano pkg/scheduler/plugins/extender/extender_test.go TestIsInterested, each case by name
        ("empty managed resources - should return true", [], [res({"cpu": "100m"})], None, True),
        (
            "container has managed resource in requests",
            ["nvidia.com/gpu"],
            [res({"cpu": "100m", "nvidia.com/gpu": "1"})],
            None,
            True,
        ),
        (
            "container has managed resource in limits",
            ["nvidia.com/gpu"],
            [res(limits={"nvidia.com/gpu": "1"})],
            None,
            True,
        ),
        (
            "init container has managed resource",
            ["nvidia.com/gpu"],
            [res({"cpu": "100m"})],
            [res({"nvidia.com/gpu": "1"})],
            True,
        ),
        (
            "no managed resources in containers",
            ["nvidia.com/gpu"],
            [res({"cpu": "100m", "memory": "128Mi"})],
            None,
            False,
        ),
        (
            "multiple managed resources - one match",
            ["nvidia.com/gpu", "amd.com/gpu"],
            [res({"cpu": "100m", "amd.com/gpu": "1"})],
            None,
            True,
        ),
    ],
)
def test_is_interested(case: str, managed: list[str], containers: list[Any], init: Any, expected: bool) -> None:
    transport = Recording(lambda verb, req: {"status": "", "code": 0})
    ssn = session(
        [gpu_pod("p", containers, init)],
        transport,
        **{"extender.predicateVerb": "predicate", "extender.managedResources": managed},
    )
    from builders import passing

    assert passing(ssn, "default/p") == {"n1", "n2"}
    assert bool(transport.calls) is expected, case  # an uninterested task is never sent


def test_predicate_request_is_volcanos_json() -> None:
    transport = Recording(lambda verb, req: {"status": "no" if req["node"]["Name"] == "n2" else "", "code": 3})
    ssn = session([gpu_pod("p", [res({"cpu": "1"})])], transport, **{"extender.predicateVerb": "predicate"})
    from builders import passing

    assert passing(ssn, "default/p") == {"n1"}
    verb, req = transport.calls[0]
    assert verb == "predicate"
    assert req["task"]["UID"] == "p" and req["task"]["Job"] == "default/pg"
    assert req["task"]["Status"] == 1  # Volcano's Pending bit
    assert req["task"]["Resreq"]["MilliCPU"] == 1000
    assert req["task"]["Pod"]["metadata"]["name"] == "p"
    assert req["node"]["Name"] == "n1" and req["node"]["Allocatable"]["MilliCPU"] == 4000


def test_a_failing_extender_is_called_once_per_session() -> None:
    transport = Recording(lambda verb, req: TransportError("connection refused"))
    ssn = session([gpu_pod("p", [res({"cpu": "1"})])], transport, **{"extender.predicateVerb": "predicate"})
    from builders import passing

    assert passing(ssn, "default/p") == set()
    assert len(transport.calls) == 1


def test_offline_sessions_have_no_transport() -> None:
    """Without a transport (lahar simulate, tests) the extender is unreachable, so with
    extender.ignorable it is skipped."""
    from builders import podgroup

    objs = [node("n1"), queue("default"), podgroup("pg", min_member=1), gpu_pod("p", [res({"cpu": "1"})])]
    args = {"extender.urlPrefix": "http://ext", "extender.predicateVerb": "predicate", "extender.ignorable": True}
    ssn = open_session(objs, make_conf("allocate", [only("extender", "enablePredicate", **args)]))
    from builders import passing

    assert passing(ssn, "default/p") == {"n1"}


def test_bad_arguments_are_configuration_errors() -> None:
    text = (
        "actions: allocate\ntiers:\n- plugins:\n  - name: extender\n    arguments:\n"
        "      extender.httpTimeout: soon\n      extender.nosuch: x\n"
    )
    with pytest.raises(ConfError) as exc:
        load_conf(text)
    msg = str(exc.value)
    assert "extender.nosuch: unknown argument" in msg
    assert "soon" in msg
