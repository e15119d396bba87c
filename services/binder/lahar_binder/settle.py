"""What a binder does with a decision message once its API calls are done (pure).

A message is acknowledged only when every call in it has a final outcome.  Transient failures
(429, 5xx, timeouts, an unexpected error) make the whole message come back later, with a backoff
that grows with each delivery; idempotent binds make the repeats harmless.  After
``max_attempts`` deliveries the message is given up: what is still unsettled is reported failed,
the message is copied to the dead-letter stream and acknowledged, so it can never block the
work queue (a new scheduler leader waits for that queue to drain of older epochs).

A message delivered more than ``max_attempts`` times *before* we even try it (every delivery
crashed its binder, say) is given up without running it: a poison message must not take down
one binder after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Action = Literal["ack", "nak", "dead"]
FIRST_DELAY = 0.2
LONGEST_DELAY = 10.0


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action
    delay: float = 0.0  # for "nak": seconds before the message comes back
    gave_up: tuple[int, ...] = ()  # indexes of calls still unsettled when giving up (report them failed)


def admit(attempts: int, max_attempts: int) -> bool:
    """Whether to run a message on its ``attempts``-th delivery."""
    return attempts <= max_attempts


def backoff(attempts: int) -> float:
    """The delay before delivery ``attempts + 1``: 0.4 s, 0.8 s, ... up to 10 s."""
    return float(min(FIRST_DELAY * 2.0 ** max(attempts, 1), LONGEST_DELAY))


def settle(settled: Sequence[bool], attempts: int, max_attempts: int, reported: bool = True) -> Plan:
    """The plan for a message whose calls are ``settled`` (True: a final outcome), on its
    ``attempts``-th delivery.  ``reported`` is False when the outcomes could not be published:
    the scheduler must learn them, so the message comes back as if a call had failed."""
    unsettled = tuple(i for i, done in enumerate(settled) if not done)
    if not unsettled and reported:
        return Plan("ack")
    if attempts < max_attempts:
        return Plan("nak", delay=backoff(attempts))
    return Plan("dead", gave_up=unsettled)
