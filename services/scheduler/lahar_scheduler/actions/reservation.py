"""elect and reserve: keep whole nodes for the one job that has waited longest at top priority.

elect names a target job among the Pending ones (``TARGET_JOB``, the reservation plugin: highest
priority, then longest wait) when there is none; reserve, while the target is not ready, asks the
plugins to lock one more node for it each session (``RESERVED_NODES``), and lets every lock go
once it is ready or gone.  Put them before allocate: ``actions: "enqueue, elect, reserve, allocate,
backfill"``; allocate then keeps other jobs off locked nodes through the plugin's predicate.
"""

from __future__ import annotations

from lahar_scheduler.actions.base import Action
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import PodGroupPhase


class ElectAction(Action):
    name = "elect"

    def execute(self, ssn: Session) -> None:
        reservation = ssn.snapshot.reservation
        if reservation.target is not None:
            return
        pending = [job for job in ssn.jobs.values() if job.phase == PodGroupPhase.PENDING]
        target = ssn.call(P.TARGET_JOB, pending)
        if target is not None:
            reservation.target = target.uid
            ssn.note(target, "reservation: elected the target job; reserve locks nodes for it")


class ReserveAction(Action):
    name = "reserve"

    def execute(self, ssn: Session) -> None:
        reservation = ssn.snapshot.reservation
        if reservation.target is None:
            return
        job = ssn.jobs.get(reservation.target)
        if job is None or job.is_ready():
            reservation.reset()  # deleted, or placed: its nodes are everyone's again
            return
        ssn.call(P.RESERVED_NODES)
