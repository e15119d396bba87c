"""The binder's Events on Kubernetes itself: kube-apiserver accepts the core/v1 Event as the
binder writes it, with the binder's own ServiceAccount (deploy/'s RBAC), counts a repeat on the
same Event, and finds it by the involvedObject fields ``kubectl describe`` selects on."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from lahar.adapters.kube import KubeClient, KubeConfig
from lahar.kube import identity
from lahar.kube.control_plane import ControlPlane
from lahar_binder.events import EventWriter, Note, Ref

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
NS = "default"


def test_binder_events_are_accepted_counted_and_found_by_uid(kube_control_plane: ControlPlane) -> None:
    admin = kube_control_plane.api
    identity.apply(admin, identity.access_objects(DEPLOY))
    token = identity.token(admin, "lahar-system", "lahar-binder")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ev-pod", "namespace": NS},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]},
    }
    admin.create(f"/api/v1/namespaces/{NS}/pods", pod)
    uid = admin.call("GET", f"/api/v1/namespaces/{NS}/pods/ev-pod")["metadata"]["uid"]
    note = Note(Ref("v1", "Pod", NS, "ev-pod", uid), "Warning", "FailedScheduling", "0/3 nodes are available")

    async def write_twice() -> tuple[float, float]:
        config = KubeConfig(
            host=admin.url,
            verify=ssl.create_default_context(cafile=str(admin.ca)),
            cert=None,
            headers={"Authorization": f"Bearer {token}"},
        )
        kube = KubeClient(config)
        writer = EventWriter(kube, CollectorRegistry(), workers=1)
        task = asyncio.create_task(writer.run())
        written = writer.metrics.written.labels("FailedScheduling")
        failed = writer.metrics.dropped.labels("api_error")
        try:
            for want in (1, 2):
                writer.record(note)
                deadline = asyncio.get_running_loop().time() + 10
                while written._value.get() + failed._value.get() < want:
                    assert asyncio.get_running_loop().time() < deadline, "event not written in 10 s"
                    await asyncio.sleep(0.02)  # polling the counters, bounded by the deadline
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await kube.close()
        return written._value.get(), failed._value.get()

    assert asyncio.run(write_twice()) == (2, 0)
    selector = (
        f"involvedObject.kind=Pod,involvedObject.name=ev-pod,involvedObject.namespace={NS},involvedObject.uid={uid}"
    )
    listed: Any = admin.call("GET", f"/api/v1/namespaces/{NS}/events?fieldSelector={selector}")
    (event,) = listed["items"]
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "FailedScheduling", 2)
    assert event["source"] == {"component": "volcano"} and event["involvedObject"]["uid"] == uid
