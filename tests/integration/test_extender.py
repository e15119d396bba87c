"""The extender plugin over real HTTP: the scheduler service's adapter (httpx) against a threaded
local server that speaks Volcano's extender protocol."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kubernetes import client

from builders import make_conf, node, pod, podgroup, queue, snapshot
from lahar.adapters.extender import MAX_BODY, HttpExtenderTransport
from lahar_scheduler.core import run_session
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.ports import TransportError
from lahar_scheduler.framework.session import SessionResult

Handler = Callable[[str, dict[str, Any]], tuple[int, bytes]]


class Extender:
    """A scheduler extender: ``answer(verb, request)`` gives (HTTP status, body)."""

    def __init__(self, answer: Handler) -> None:
        self.answer = answer
        self.calls: list[str] = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                verb = self.path.rsplit("/", 1)[1]
                outer.calls.append(verb)
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                status, body = outer.answer(verb, request)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def ok(doc: Any) -> tuple[int, bytes]:
    return 200, json.dumps(doc).encode()


def protocol(verb: str, req: dict[str, Any]) -> tuple[int, bytes]:
    """n2 is refused by the predicate; prioritize prefers n3; a job named "refused" is not enqueued;
    preemptable offers only the first evictee."""
    if verb == "predicate":
        refused = req["node"]["Name"] == "n2"
        return ok({"status": "n2 is reserved by the extender" if refused else "", "code": 2 if refused else 0})
    if verb == "prioritize":
        return ok({"nodeScore": {n["Name"]: (100.0 if n["Name"] == "n3" else 0.0) for n in req["nodes"]}})
    if verb == "jobEnqueueable":
        return ok({"status": -1 if req["job"]["Name"] == "refused" else 1})
    if verb == "preemptable":
        return ok({"status": 1, "victims": req["evictees"][:1]})
    return ok({})


@pytest.fixture
def extender() -> Iterator[Extender]:
    ext = Extender(protocol)
    yield ext
    ext.close()


@pytest.fixture
def transport() -> Iterator[HttpExtenderTransport]:
    t = HttpExtenderTransport()
    yield t
    t.close()


VERBS = {
    "extender.predicateVerb": "predicate",
    "extender.prioritizeVerb": "prioritize",
    "extender.jobEnqueueableVerb": "jobEnqueueable",
    "extender.onSessionOpenVerb": "onSessionOpen",
    "extender.onSessionCloseVerb": "onSessionClose",
}


def cluster(jobs: dict[str, int]) -> list[Any]:
    objs: list[Any] = [node(n, cpu="8") for n in ("n1", "n2", "n3")] + [queue("default")]
    for name, tasks in jobs.items():
        # minResources, or enqueue admits the job without asking the plugins (as Volcano)
        objs.append(podgroup(name, min_member=tasks, phase="Pending", min_resources={"cpu": str(tasks)}))
        objs += [pod(f"{name}-{i}", group=name, cpu="1") for i in range(tasks)]
    return objs


def schedule(objs: list[Any], url: str, transport: HttpExtenderTransport, **extra: Any) -> SessionResult:
    plugins = [
        {"name": "gang"},
        {"name": "predicates"},
        {"name": "extender", "arguments": {"extender.urlPrefix": url, **VERBS, **extra}},
    ]
    return run_session(snapshot(objs), make_conf("enqueue, allocate", plugins), transport=transport)


def test_placement_follows_the_extenders_predicate_and_scores(
    extender: Extender, transport: HttpExtenderTransport
) -> None:
    result = schedule(cluster({"train": 3, "refused": 1}), extender.url, transport)
    placed = {t.key: n for t, n in result.binds}
    assert placed == {"default/train-0": "n3", "default/train-1": "n3", "default/train-2": "n3"}
    assert extender.calls[0] == "onSessionOpen" and extender.calls[-1] == "onSessionClose"
    assert {"predicate", "prioritize", "jobEnqueueable"} <= set(extender.calls)
    why = result.decisions["default/refused"].why
    assert why is not None and why.plugin == "extender" and "refused to enqueue" in why.summary


def test_the_extenders_predicate_reason_reaches_the_task(extender: Extender, transport: HttpExtenderTransport) -> None:
    objs = [
        node("n2", cpu="8"),
        queue("default"),
        podgroup("solo", min_member=1, phase="Inqueue"),
        pod("solo-0", group="solo", cpu="1"),
    ]
    result = schedule(objs, extender.url, transport)
    assert result.binds == []
    assert "n2 is reserved by the extender" in result.task_reasons["default/solo-0"].message


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_an_unreachable_ignorable_extender_is_skipped(transport: HttpExtenderTransport) -> None:
    result = schedule(cluster({"train": 2}), closed_port(), transport, **{"extender.ignorable": True})
    assert len(result.binds) == 2


def test_an_unreachable_extender_keeps_the_job_waiting_naming_it(transport: HttpExtenderTransport) -> None:
    """Without ignorable, onSessionOpen's failure leaves the plugin out (Volcano); with only a
    predicate verb the job waits, its reason naming the extender's URL."""
    url = closed_port()
    plugins = [
        {"name": "gang"},
        {"name": "extender", "arguments": {"extender.urlPrefix": url, "extender.predicateVerb": "predicate"}},
    ]
    result = run_session(snapshot(cluster({"train": 2})), make_conf("allocate", plugins), transport=transport)
    assert result.binds == []
    message = result.task_reasons["default/train-0"].message
    assert f"extender at URL {url}/predicate unreachable" in message
    # and when onSessionOpen fails, Volcano registers nothing: the job is placed
    result = schedule(cluster({"train": 2}), url, transport)
    assert len(result.binds) == 2


def test_transport_errors(transport: HttpExtenderTransport) -> None:
    def answer(verb: str, req: dict[str, Any]) -> tuple[int, bytes]:
        if verb == "big":
            # volcano extender_test.go TestMaxBodySizeLimit2: a reply over 10 MB is refused
            return 200, b'{"padding":"' + b"a" * (MAX_BODY + 1) + b'"}'
        return 500, b"boom"

    ext = Extender(answer)
    try:
        with pytest.raises(TransportError) as big:
            transport.post(f"{ext.url}/big", b"{}", 5.0)
        assert "larger than" in str(big.value)
        with pytest.raises(TransportError) as failed:
            transport.post(f"{ext.url}/predicate", b"{}", 5.0)
        assert failed.value.status == 500
    finally:
        ext.close()


def test_preemptable_victims_come_from_the_extender(extender: Extender, transport: HttpExtenderTransport) -> None:
    from builders import only, open_session

    objs = [node("n1", cpu="2"), queue("default"), podgroup("low", min_member=1, phase="Running")]
    objs += [pod(f"low-{i}", group="low", cpu="1", node_name="n1", phase="Running") for i in range(2)]
    objs += [podgroup("high", min_member=1), pod("high-0", group="high", cpu="1")]
    args = {"extender.urlPrefix": extender.url, "extender.preemptableVerb": "preemptable"}
    conf = make_conf("preempt", [only("extender", "enablePreemptable", **args)])
    from lahar_scheduler.framework.session import Session
    from lahar_scheduler.plugins import PLUGINS

    ssn = Session(snapshot(objs), conf, dict(PLUGINS), transport=transport).open()
    del open_session
    evictees = [ssn.snapshot.tasks["default/low-0"], ssn.snapshot.tasks["default/low-1"]]
    got = ssn.call(P.PREEMPTABLE, ssn.snapshot.tasks["default/high-0"], evictees)
    assert [t.name for t in got] == ["low-0"]


# -- through the scheduler service ---------------------------------------------------------------


def _service_conf(url: str, ignorable: bool = False) -> str:
    args = {"extender.urlPrefix": url, "extender.predicateVerb": "predicate", "extender.ignorable": ignorable}
    return json.dumps(
        {"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]},
                                                  {"plugins": [{"name": "extender", "arguments": args}]}]}
    )  # fmt: skip


@pytest.mark.asyncio
async def test_the_scheduler_service_consults_the_extender(
    make_sim: Any, nats_url: str, nats_ca: str, redis_url: str, lahar_prefix: str, tmp_path: Any
) -> None:
    """The service shell gives the session its HTTP transport: the extender admits one node only,
    and the pod is bound there; with the extender down (not ignorable) the next pod waits, its
    PodGroup's condition naming the extender's URL."""
    from integration.services import kube_for, poll, stack
    from integration.test_distributed import ensure_queue, node_of, pod, podgroup

    sim = make_sim(nodes=["3:cpu=8"])
    names = sorted(n.metadata.name for n in client.CoreV1Api(sim.api_client()).list_node().items)
    chosen = names[-1]

    def only_chosen(verb: str, req: dict[str, Any]) -> tuple[int, bytes]:
        if verb == "predicate":
            return ok({"status": "" if req["node"]["Name"] == chosen else "not this one", "code": 2})
        return ok({})

    ext = Extender(only_chosen)
    conf = tmp_path / "conf.json"
    conf.write_text(_service_conf(ext.url))
    kube = kube_for(sim.url)
    try:
        async with stack(sim.url, nats_url, redis_url, lahar_prefix, nats_ca=nats_ca) as s:
            await ensure_queue(kube, "default")
            await s.cache()
            await s.scheduler(str(conf), period=0.2)
            await s.binder()
            await kube.create("pods", "default", pod("default", "e-0", "ext"))
            await kube.create("podgroups", "default", podgroup("default", "ext", 1))
            assert await poll(lambda: node_of(kube, "default", "e-0"), timeout=10.0) == chosen
            assert "predicate" in ext.calls
            ext.close()
            await kube.create("pods", "default", pod("default", "d-0", "down"))
            await kube.create("podgroups", "default", podgroup("default", "down", 1))

            async def condition() -> str:
                pg = json.loads(await kube.get("podgroups", "default", "down"))
                for c in pg.get("status", {}).get("conditions", []):
                    if c["type"] == "Unschedulable" and c["status"] == "True":
                        return str(c["message"])
                return ""

            message = await poll(condition, timeout=10.0)
            assert f"extender at URL {ext.url}/predicate unreachable" in message
            assert not await node_of(kube, "default", "d-0")
    finally:
        ext.close()
        await kube.close()
