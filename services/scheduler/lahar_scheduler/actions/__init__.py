"""The registry of actions, in one explicit list."""

from __future__ import annotations

from lahar_scheduler.actions.allocate import AllocateAction
from lahar_scheduler.actions.backfill import BackfillAction
from lahar_scheduler.actions.base import Action
from lahar_scheduler.actions.enqueue import EnqueueAction
from lahar_scheduler.registry import Registry

ACTIONS: Registry[type[Action]] = Registry("action")
for _action in (EnqueueAction, AllocateAction, BackfillAction):
    ACTIONS.register(_action.name, _action)

__all__ = ["ACTIONS", "Action"]
