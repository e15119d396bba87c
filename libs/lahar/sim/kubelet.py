"""Simulated kubelets: a bound pod turns Running after ``start_delay``; with the annotation
``sim.lahar.io/run-seconds`` it then finishes (Succeeded, or Failed when
``sim.lahar.io/exit-code`` is not 0); a pod deleted with a grace period is removed when the
period ends.  Every node is served, whatever its name.

The kubelet listens to the store's events and acts through loop timers; its writes bypass
admission webhooks (as a real kubelet's status updates usually are not webhook-gated).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Any

from lahar.sim.api import Api
from lahar.sim.clock import iso
from lahar.sim.store import DELETED, Event, Table

Obj = dict[str, Any]
RUN_SECONDS = "sim.lahar.io/run-seconds"
EXIT_CODE = "sim.lahar.io/exit-code"
_PODS = ("", "pods")


class Kubelet:
    def __init__(self, api: Api, loop: asyncio.AbstractEventLoop, start_delay: float = 0.1) -> None:
        self.api = api
        self.loop = loop
        self.start_delay = start_delay
        self._starting: set[str] = set()
        self._removing: set[str] = set()
        self._ips = itertools.count(1)
        # One loop timer for all pods: a heap of due actions (thousands of binds per second
        # would otherwise create thousands of timer handles).
        self._due: list[tuple[float, int, Any, tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        api.store.listeners.append(self.on_event)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._due.clear()

    def _later(self, delay: float, fn: Any, *args: Any) -> None:
        due = self.loop.time() + max(delay, 0.0)
        heapq.heappush(self._due, (due, next(self._seq), fn, args))
        if self._timer is None or due < self._timer_at:
            self._arm(due)

    def _arm(self, due: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = due
        self._timer = self.loop.call_at(due, self._tick)

    def _tick(self) -> None:
        self._timer = None
        now = self.loop.time()
        while self._due and self._due[0][0] <= now:
            _, _, fn, args = heapq.heappop(self._due)
            fn(*args)
        if self._due:
            self._arm(self._due[0][0])

    def on_event(self, table: Table, event: Event) -> None:
        if table.rtype.key != _PODS:
            return
        meta = event.obj["metadata"]
        uid = meta["uid"]
        if event.type == DELETED:
            self._starting.discard(uid)
            self._removing.discard(uid)
            return
        grace = meta.get("deletionGracePeriodSeconds") or 0
        if meta.get("deletionTimestamp"):
            if grace > 0 and uid not in self._removing:
                self._removing.add(uid)
                self._later(grace, self._remove, meta.get("namespace"), meta["name"], uid)
            return
        spec, status = event.obj.get("spec") or {}, event.obj.get("status") or {}
        if spec.get("nodeName") and status.get("phase", "Pending") == "Pending" and uid not in self._starting:
            self._starting.add(uid)
            self._later(self.start_delay, self._start, meta.get("namespace"), meta["name"], uid)

    def _current(self, namespace: str | None, name: str, uid: str) -> Obj | None:
        entry = self.api.store.get(self.api.rtype(*_PODS), namespace, name)
        if entry is None or entry.obj["metadata"]["uid"] != uid:
            return None
        return entry.obj

    def _write(self, new: Obj, old: Obj) -> None:
        self.api.commit(self.api.table(self.api.rtype(*_PODS)), new, old)

    def _start(self, namespace: str | None, name: str, uid: str) -> None:
        pod = self._current(namespace, name, uid)
        self._starting.discard(uid)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        if (pod.get("status") or {}).get("phase", "Pending") != "Pending":
            return
        self._write({**pod, "status": self._running_status(pod)}, pod)
        annotations = pod["metadata"].get("annotations") or {}
        try:
            seconds = float(annotations[RUN_SECONDS])
        except (KeyError, ValueError):
            return  # no (usable) run time: the pod runs until deleted
        self._later(seconds, self._finish, namespace, name, uid)

    def _running_status(self, pod: Obj) -> Obj:
        now = iso()
        n = next(self._ips)
        host_ip = self._host_ip(pod["spec"]["nodeName"])
        pod_ip = f"10.{244 + (n >> 16) % 10}.{(n >> 8) & 255}.{n & 255}"
        conditions = [
            c
            for c in (pod.get("status") or {}).get("conditions") or []
            if c.get("type") not in ("Initialized", "Ready", "ContainersReady", "PodReadyToStartContainers")
        ]
        for ctype in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"):
            conditions.append({"type": ctype, "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
        containers = [
            {
                "name": c.get("name", ""),
                "image": c.get("image", ""),
                "imageID": "",
                "containerID": f"sim://{pod['metadata']['uid'][:8]}-{c.get('name', '')}",
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in pod["spec"].get("containers") or []
        ]
        return {
            **(pod.get("status") or {}),
            "phase": "Running",
            "conditions": conditions,
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": pod_ip,
            "podIPs": [{"ip": pod_ip}],
            "startTime": now,
            "containerStatuses": containers,
        }

    def _host_ip(self, node: str) -> str:
        entry = self.api.store.get(self.api.rtype("", "nodes"), None, node)
        for address in ((entry.obj.get("status") or {}).get("addresses") or []) if entry else []:
            if address.get("type") == "InternalIP":
                return str(address.get("address"))
        return "10.0.0.1"

    def _finish(self, namespace: str | None, name: str, uid: str) -> None:
        pod = self._current(namespace, name, uid)
        if pod is None or (pod.get("status") or {}).get("phase") != "Running":
            return
        try:
            code = int((pod["metadata"].get("annotations") or {}).get(EXIT_CODE, 0))
        except ValueError:
            code = 1
        now = iso()
        status = dict(pod["status"])
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        reason = "PodCompleted" if code == 0 else "PodFailed"
        status["conditions"] = [
            {**c, "status": "False", "reason": reason, "lastTransitionTime": now}
            if c.get("type") in ("Ready", "ContainersReady", "PodReadyToStartContainers")
            else c
            for c in status.get("conditions") or []
        ]
        status["containerStatuses"] = [
            {
                **c,
                "ready": False,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": "Completed" if code == 0 else "Error",
                        "startedAt": (c.get("state") or {}).get("running", {}).get("startedAt", now),
                        "finishedAt": now,
                        "containerID": c.get("containerID", ""),
                    }
                },
            }
            for c in status.get("containerStatuses") or []
        ]
        self._write({**pod, "status": status}, pod)

    def _remove(self, namespace: str | None, name: str, uid: str) -> None:
        """The grace period is over: confirm the deletion (grace 0); finalizers may still hold it."""
        self._removing.discard(uid)
        pod = self._current(namespace, name, uid)
        if pod is None:
            return
        meta = {**pod["metadata"], "deletionGracePeriodSeconds": 0}
        self._write({**pod, "metadata": meta}, pod)
