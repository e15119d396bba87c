"""The registry of actions, in one explicit list."""

from __future__ import annotations

from lahar_scheduler.actions.allocate import AllocateAction
from lahar_scheduler.actions.backfill import BackfillAction
from lahar_scheduler.actions.base import Action
from lahar_scheduler.actions.enqueue import EnqueueAction
from lahar_scheduler.actions.preempt import PreemptAction
from lahar_scheduler.actions.reclaim import ReclaimAction
from lahar_scheduler.actions.reservation import ElectAction, ReserveAction
from lahar_scheduler.actions.shuffle import ShuffleAction
from lahar_scheduler.registry import Registry

ACTIONS: Registry[type[Action]] = Registry("action")
for _action in (
    EnqueueAction,
    ElectAction,
    ReserveAction,
    AllocateAction,
    BackfillAction,
    PreemptAction,
    ReclaimAction,
    ShuffleAction,
):
    ACTIONS.register(_action.name, _action)

# Volcano registers these too; a configuration naming them is rejected with this reason rather
# than run without them.
UNSUPPORTED_ACTIONS: dict[str, str] = {
    "gangpreempt": "gang-aware preemption over hyper-node bundles is not supported; use preempt",
    "gangreclaim": "gang-aware reclaim over hyper-node bundles is not supported; use reclaim",
}

__all__ = ["ACTIONS", "UNSUPPORTED_ACTIONS", "Action"]
