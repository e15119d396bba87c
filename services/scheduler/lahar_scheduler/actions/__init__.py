"""The registry of actions, in one explicit list."""

from __future__ import annotations

from lahar_scheduler.actions.allocate import AllocateAction
from lahar_scheduler.actions.backfill import BackfillAction
from lahar_scheduler.actions.base import Action
from lahar_scheduler.actions.enqueue import EnqueueAction
from lahar_scheduler.actions.gangpreempt import GangPreemptAction
from lahar_scheduler.actions.gangreclaim import GangReclaimAction
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
    GangPreemptAction,
    GangReclaimAction,
):
    ACTIONS.register(_action.name, _action)

# Actions Volcano registers that Lahar does not have: a configuration naming one is rejected with
# this reason rather than run without it.  (None left.)
UNSUPPORTED_ACTIONS: dict[str, str] = {}

__all__ = ["ACTIONS", "UNSUPPORTED_ACTIONS", "Action"]
