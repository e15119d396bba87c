"""NATS subjects, stream, consumer and bucket names — the only place they are spelled.

Every name derives from a prefix (``lahar`` by default; tests use a unique one per test), so
several Lahar installations or tests can share one NATS server.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lahar.wire.keys import KINDS

_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")

DELTA_KINDS = KINDS  # every mirrored kind has its deltas
DECISION_KINDS = ("bind", "evict", "podgroup", "queue", "podstatus", "event")


@dataclass(frozen=True)
class Names:
    prefix: str = "lahar"

    def __post_init__(self) -> None:
        if not _TOKEN.match(self.prefix):
            raise ValueError(f"prefix {self.prefix!r}: must be letters, digits, '_' or '-' (it names streams)")

    # -- the cluster's deltas (cache → scheduler, controller) --------------------------
    @property
    def cluster_stream(self) -> str:
        return f"{self.prefix}_CLUSTER"

    def delta_subject(self, kind: str) -> str:
        return f"{self.prefix}.delta.{kind}"

    @property
    def delta_subjects(self) -> str:
        return f"{self.prefix}.delta.>"

    # -- decisions (scheduler → binders), a work queue -----------------------------------
    @property
    def decisions_stream(self) -> str:
        return f"{self.prefix}_DECISIONS"

    def decision_subject(self, kind: str) -> str:
        return f"{self.prefix}.decision.{kind}"

    @property
    def decision_subjects(self) -> str:
        return f"{self.prefix}.decision.>"

    @property
    def binder_consumer(self) -> str:
        return "binders"

    # -- results (binders → scheduler) ---------------------------------------------------
    @property
    def results_stream(self) -> str:
        return f"{self.prefix}_RESULTS"

    @property
    def result_subject(self) -> str:
        return f"{self.prefix}.result"

    # -- dead letters: malformed or unknown-version messages, kept for inspection ----------
    @property
    def dead_letter_stream(self) -> str:
        return f"{self.prefix}_DEADLETTER"

    def dead_letter_subject(self, source: str) -> str:
        return f"{self.prefix}.dlq.{source}"

    @property
    def dead_letter_subjects(self) -> str:
        return f"{self.prefix}.dlq.>"

    # -- leader election -------------------------------------------------------------------
    @property
    def leader_bucket(self) -> str:
        return f"{self.prefix}_leaders"

    @property
    def scheduler_lease(self) -> str:
        """The scheduler's key in the lease bucket; its epoch fences every decision."""
        return "scheduler"

    # -- the Redis mirror --------------------------------------------------------------------
    @property
    def redis_prefix(self) -> str:
        return self.prefix
