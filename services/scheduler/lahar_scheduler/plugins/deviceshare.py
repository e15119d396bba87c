"""deviceshare: GPUs shared by memory (gpushare), by number, and as vGPUs (HAMi), card by card.

Filter: a node whose cards cannot hold the task's ask fails (a node without such cards passes,
as in Volcano: its missing ``volcano.sh/...`` allocatable then fails the resource fit).  Score:
vGPU only (gpushare scores 0), ``floor(score + 0.5) × deviceshare.ScheduleWeight``.  Allocate
picks the cards, holds them in the node's ledger and records the annotations Volcano writes on
the pod; the binder puts them on the Binding, which the API server copies onto the pod.

Volcano's NVIDIA devices have no GPU-topology (NVLink) scoring at ed72c7c8 (only Ascend NPUs
do), so neither does this.  Ascend NPUs and MIG geometries are not supported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.conf import args_parser
from lahar_scheduler.framework.devices import (
    GPU_INDEX,
    PREDICATE_TIME,
    VGPU_BIND_PHASE,
    VGPU_BIND_TIME,
    VGPU_IDS,
    VGPU_NODE,
    VGPU_TIME,
    VGPU_TO_ALLOCATE,
    CardUse,
    DeviceRequest,
    DeviceTable,
    encode_vgpu,
)
from lahar_scheduler.framework.predicate import Failure
from lahar_scheduler.framework.session import EventHandler, Session
from lahar_scheduler.framework.types import Code, TaskStatus
from lahar_scheduler.framework.vgpu import VgpuFit, vgpu_fit
from lahar_scheduler.plugins.base import Plugin

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import BoolArray, FloatArray, IntArray, NodeTable

NO_MEMORY = "GpuShare no enough gpu memory"
NO_NUMBER = "GpuNumber no enough gpu number"
NO_VGPU = "hami-vgpuDeviceSharing error"


class DeviceShareArgs(msgspec.Struct, forbid_unknown_fields=True):
    gpu_sharing: bool = msgspec.field(default=False, name="deviceshare.GPUSharingEnable")
    gpu_number: bool = msgspec.field(default=False, name="deviceshare.GPUNumberEnable")
    vgpu: bool = msgspec.field(default=False, name="deviceshare.VGPUEnable")
    node_lock: bool = msgspec.field(default=False, name="deviceshare.NodeLockEnable")
    policy: str = msgspec.field(default="", name="deviceshare.SchedulePolicy")
    weight: int = msgspec.field(default=0, name="deviceshare.ScheduleWeight")
    geometries_name: str = msgspec.field(default="volcano-vgpu-device-config", name="deviceshare.KnownGeometriesCMName")
    geometries_namespace: str = msgspec.field(default="kube-system", name="deviceshare.KnownGeometriesCMNamespace")
    mindcluster_vnpu: bool = msgspec.field(default=False, name="deviceshare.AscendMindClusterVNPUEnable")
    hami_vnpu: bool = msgspec.field(default=False, name="deviceshare.AscendHAMiVNPUEnable")


_parse_fields = args_parser(DeviceShareArgs)


def parse_deviceshare_args(raw: dict[str, Any], path: str, errors: list[str]) -> DeviceShareArgs | None:
    """Volcano refuses to start (klog.Fatal) on these combinations; here they are config errors."""
    args: DeviceShareArgs | None = _parse_fields(raw, path, errors)
    if args is None:
        return None
    if args.gpu_sharing and args.gpu_number:
        errors.append(f"{path}.deviceshare.GPUNumberEnable: can not define true in both gpu sharing and gpu number")
    if (args.gpu_sharing or args.gpu_number) and args.vgpu:
        errors.append(f"{path}.deviceshare.VGPUEnable: gpu-share and vgpu can't be used together")
    for field, on in (("AscendMindClusterVNPUEnable", args.mindcluster_vnpu), ("AscendHAMiVNPUEnable", args.hami_vnpu)):
        if on:
            errors.append(f"{path}.deviceshare.{field}: Ascend NPUs are not supported by Lahar")
    if args.policy not in ("", "binpack", "spread"):
        errors.append(f"{path}.deviceshare.SchedulePolicy: expected binpack or spread, got {args.policy!r}")
    return args


class DeviceSharePlugin(Plugin):
    name = "deviceshare"
    Args = DeviceShareArgs
    parse_args = staticmethod(parse_deviceshare_args)

    def on_session_open(self, ssn: Session) -> None:
        self.opts: DeviceShareArgs = self.args or DeviceShareArgs()
        self.ssn = ssn
        self.table: NodeTable = ssn.nodes
        self.devices: DeviceTable = ssn.nodes.devices
        if not (self.opts.gpu_sharing or self.opts.gpu_number or self.opts.vgpu):
            return
        ssn.add(P.PREDICATE, _Callback(self))
        if self.opts.vgpu and self.opts.weight > 0:
            ssn.add(P.NODE_ORDER, self.node_order)
        ssn.add_event_handler(EventHandler(allocate=self.on_allocate))

    # -- which devices a task asks of (HasDeviceRequest) ------------------------------------------
    def _share_asked(self, req: DeviceRequest) -> bool:
        return (self.opts.gpu_sharing and req.gpu_memory > 0) or (self.opts.gpu_number and req.gpu_number > 0)

    def _vgpu_asked(self, req: DeviceRequest) -> bool:
        return self.opts.vgpu and req.has_vgpu

    # -- filter ----------------------------------------------------------------------------------
    def predicate(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        req = task.devreq
        if req is None:
            return []
        out: list[Failure] = []
        if self._share_asked(req):
            out.extend(self._share_failures(req, idx))
        if self._vgpu_asked(req):
            bad = self._vgpu_bad(task, req, idx)
            if bad.any():
                out.append(Failure(bad, NO_VGPU, Code.UNSCHEDULABLE))
        return out

    def passes(self, task: TaskInfo, idx: IntArray) -> BoolArray:
        ok = np.ones(len(idx), dtype=bool)
        for f in self.predicate(task, idx):
            ok &= ~f.mask
        return ok

    def passes_row(self, task: TaskInfo, i: int) -> bool:
        return task.devreq is None or bool(self.passes(task, np.array([i], dtype=np.intp))[0])

    def _share_failures(self, req: DeviceRequest, idx: IntArray) -> list[Failure]:
        """Per node with cards that cannot take the ask; the reason names the best card found,
        so a refusal reads card by card (Volcano names the node instead)."""
        dev = self.devices
        has = dev.has_share[idx]
        out: list[Failure] = []
        if self.opts.gpu_sharing and req.gpu_memory > 0:
            bad = has & ~dev.share_fits_memory(idx, req.gpu_memory)
            if bad.any():
                idle = np.where(dev.share_present[idx], dev.share_idle(idx), -1.0).max(axis=1)
                for best in np.unique(idle[bad]):
                    mask = bad & (idle == best)
                    why = f"{NO_MEMORY} (asks {req.gpu_memory} on one card, the freest card has {int(best)})"
                    out.append(Failure(mask, why, Code.UNSCHEDULABLE))
        if self.opts.gpu_number and req.gpu_number > 0:
            bad = has & ~dev.share_fits_number(idx, req.gpu_number)
            if bad.any():
                free = ((dev.share_pods[idx] == 0) & dev.share_present[idx]).sum(axis=1)
                for n in np.unique(free[bad]):
                    mask = bad & (free == n)
                    why = f"{NO_NUMBER} (asks {req.gpu_number} whole card(s), {int(n)} free)"
                    out.append(Failure(mask, why, Code.UNSCHEDULABLE))
        return out

    def _vgpu_bad(self, task: TaskInfo, req: DeviceRequest, idx: IntArray) -> BoolArray:
        bad = np.zeros(len(idx), dtype=bool)
        vgpu = self.devices.vgpu
        for k in np.flatnonzero(self.devices.has_vgpu[idx]):
            fit = vgpu_fit(vgpu[int(idx[k])], req, task.pod.metadata.annotations, task.job, self.opts.policy)
            bad[k] = not isinstance(fit, VgpuFit)
        return bad

    # -- score -----------------------------------------------------------------------------------
    def node_order(self, task: TaskInfo, idx: IntArray) -> FloatArray:
        scores = np.zeros(len(idx))
        req = task.devreq
        if req is None or not self._vgpu_asked(req):
            return scores
        vgpu = self.devices.vgpu
        for k in np.flatnonzero(self.devices.has_vgpu[idx]):
            fit = vgpu_fit(vgpu[int(idx[k])], req, task.pod.metadata.annotations, task.job, self.opts.policy)
            if isinstance(fit, VgpuFit):
                scores[k] = np.floor(fit.score + 0.5) * self.opts.weight
        return scores

    # -- allocate: choose the cards, hold them, note the annotations -----------------------------
    def on_allocate(self, task: TaskInfo) -> None:
        req = task.devreq
        if req is None or task.cards is not None or task.status == TaskStatus.PIPELINED:
            return
        node = self.table.by_name.get(task.node_name)
        if node is None:
            return
        annotations: dict[str, str] = {}
        share: tuple[int, ...] = ()
        vgpu: list[list[tuple[str, int, int]]] = []
        if self._share_asked(req) and self.devices.has_share[node.index]:
            share = self.devices.share_pick(node.index, req)
            if share:
                annotations[PREDICATE_TIME] = str(int(self.ssn.now * 1e9))
                annotations[GPU_INDEX] = ",".join(str(c) for c in share)
        if self._vgpu_asked(req) and node.index in self.devices.vgpu:
            fit = vgpu_fit(
                self.devices.vgpu[node.index], req, task.pod.metadata.annotations, task.job, self.opts.policy
            )
            if isinstance(fit, VgpuFit) and fit.devices:
                vgpu = fit.devices
                encoded, now = encode_vgpu(vgpu), str(int(self.ssn.now))
                annotations.update(
                    {
                        VGPU_NODE: node.name,
                        VGPU_TIME: now,
                        VGPU_IDS: encoded,
                        VGPU_TO_ALLOCATE: encoded,
                        VGPU_BIND_PHASE: "allocating",
                        VGPU_BIND_TIME: now,
                    }
                )
        if not annotations:
            return
        task.card_annotations = annotations
        task.cards = CardUse(share, req.gpu_memory, tuple(d for ctr in vgpu for d in ctr))
        self.table.hold_cards(node, task)


class _Callback:
    """The PredicateFn; verdicts read only the node's own cards, so they may be cached per node."""

    def __init__(self, plugin: DeviceSharePlugin) -> None:
        self.plugin = plugin

    def is_local(self, task: TaskInfo) -> bool:
        return True

    def __call__(self, task: TaskInfo, idx: IntArray) -> list[Failure]:
        return self.plugin.predicate(task, idx)

    def passes(self, task: TaskInfo, idx: IntArray) -> BoolArray:
        if task.devreq is None:
            return np.ones(len(idx), dtype=bool)
        return self.plugin.passes(task, idx)

    def passes_row(self, task: TaskInfo, i: int) -> bool:
        return self.plugin.passes_row(task, i)
