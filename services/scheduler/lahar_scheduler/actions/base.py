"""Actions: the steps of a session (enqueue, allocate, backfill, ...)."""

from __future__ import annotations

from typing import Any

from lahar_scheduler.framework.session import Session


class Action:
    name: str = ""

    def __init__(self, arguments: dict[str, Any] | None = None) -> None:
        self.arguments = arguments or {}

    def execute(self, ssn: Session) -> None:
        raise NotImplementedError


def only_volcano_gate(task_pod_gates: list[str]) -> bool:
    return task_pod_gates == ["scheduling.volcano.sh/queue-allocation-gate"]
