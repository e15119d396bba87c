"""Queue lifecycle rules (pure): what state a queue should be in.

Volcano's queue controller opens a new queue (``status.state`` empty → ``Open``); closing and
reopening go through Commands (a later step).  The ``default`` queue always exists.
"""

from __future__ import annotations

from typing import Any

DEFAULT_QUEUE: dict[str, Any] = {
    "apiVersion": "scheduling.volcano.sh/v1beta1",
    "kind": "Queue",
    "metadata": {"name": "default"},
    "spec": {"weight": 1, "reclaimable": True},
}


def desired_state(queue: dict[str, Any]) -> str | None:
    """The state to write, or None when the queue's state is already right."""
    state = (queue.get("status") or {}).get("state") or ""
    if not state:
        return "Open"
    return None
