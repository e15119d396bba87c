"""What the elect and reserve actions keep between sessions: one target job and its locked nodes.

Volcano kept this in a process-wide variable (``util.Reservation``) until it retired the elect
and reserve actions in 2022 (b27b4bbe7): its allocate read the target job once, at start-up, so
locked nodes never took effect.  Here the state lives on the snapshot the sessions share, and the
reservation plugin's predicate keeps other jobs off locked nodes, so the target job gets whole
nodes as running pods finish.  It is lost with the snapshot (a new leader elects again).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Reservation:
    target: str | None = None  # the job uid the nodes are kept for
    locked: list[str] = field(default_factory=list)  # node names, in the order they were locked

    def reset(self) -> None:
        self.target = None
        self.locked.clear()
