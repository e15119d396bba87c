"""shuffle: evict the Running tasks the victim-task plugins name (Volcano's shuffle action).

The union of every enabled plugin's VictimTasks in the first tier that names any (tdm, pdb and
rescheduling provide them in Volcano); each is evicted at once.
"""

from __future__ import annotations

from lahar_scheduler.actions.base import Action
from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.session import Session
from lahar_scheduler.framework.types import TaskStatus


class ShuffleAction(Action):
    name = "shuffle"

    def execute(self, ssn: Session) -> None:
        running = [t for job in ssn.jobs.values() for t in job.tasks_in(TaskStatus.RUNNING)]
        victims = ssn.call(P.VICTIM_TASKS, running)
        if not victims:
            return
        stmt = ssn.statement()
        for victim in victims:
            stmt.evict(victim, "shuffle")
        stmt.commit()
