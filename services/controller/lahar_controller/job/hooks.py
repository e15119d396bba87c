"""The state machine's ``Render`` made of ``job.render`` and ``job.plugins``.

Plugin effects become ours: an object a plugin needs is created (kept if present) or, when the
plugin says so, overwritten; deletions tolerate NotFound; the plugins' marks are written into the
job's ``status.controlledResources``.  A plugin failure is a ``JobError`` (the request is retried).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from lahar_controller.job import plugins, render
from lahar_controller.job.effects import Apply, Create, Delete, Effect, JobError
from lahar_controller.job.plugins.base import Effects, KeyGen, PluginError
from lahar_controller.job.view import Obj


class PluginRender:
    def __init__(self, priority_classes: Mapping[str, int] | None = None, *, keygen: KeyGen | None = None) -> None:
        self.priority_classes: Mapping[str, int] = priority_classes or {}
        self.keygen = keygen

    def pod(self, job: Obj, task: Obj, index: int, *, forwarding: bool, podgroup: Obj | None) -> Obj:
        return render.render_pod(job, task, index, forwarding=forwarding)

    def podgroup(self, job: Obj, existing: Obj | None) -> Obj | None:
        return render.podgroup_for(job, existing, self.priority_classes)

    def on_job_add(self, job: Obj) -> list[Effect]:
        return _hook(job, lambda: plugins.on_job_add(job, keygen=self.keygen))

    def on_job_update(self, job: Obj) -> list[Effect]:
        return _hook(job, lambda: plugins.on_job_update(job))

    def on_job_delete(self, job: Obj) -> list[Effect]:
        return _hook(job, lambda: plugins.on_job_delete(job))

    def on_pod_create(self, job: Obj, pod: Obj) -> None:
        try:
            plugins.on_pod_create(job, pod)
        except PluginError as exc:
            raise JobError(str(exc)) from exc


def _hook(job: Obj, call: Callable[[], Effects]) -> list[Effect]:
    try:
        done = call()
    except PluginError as exc:
        raise JobError(str(exc)) from exc
    status = job.setdefault("status", {})
    if done.controlled or status.get("controlledResources"):
        status["controlledResources"] = dict(done.controlled)
    out: list[Effect] = [Apply(w.object) if w.replace else Create(w.object) for w in done.writes]
    out.extend(Delete(r.api_version, r.kind, r.namespace, r.name) for r in done.deletes)
    return out
