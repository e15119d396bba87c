"""Readiness as the service declares it: a flag it sets and named checks it registers."""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["Health"]

log = logging.getLogger(__name__)


class Health:
    """Ready when the service said so (``set_ready``), every check passes and it is not draining.

    Liveness: ``/healthz`` answers from the event loop, so a stuck loop fails it; and a service
    whose supervised loop died says so (``die``) before it exits.
    """

    def __init__(self) -> None:
        self.dead: str | None = None
        self._ready = False
        self._draining = False
        self._checks: dict[str, Callable[[], bool]] = {}

    def set_ready(self, ready: bool = True) -> None:
        self._ready = ready

    def add_check(self, name: str, check: Callable[[], bool]) -> None:
        """``check()`` must be quick and not block: it runs in the event loop on every probe."""
        if name in self._checks:
            raise ValueError(f"readiness check {name!r}: already registered")
        self._checks[name] = check

    def die(self, reason: str) -> None:
        """A loop of the service died: fail liveness (and readiness) from now on."""
        self.dead = reason

    def drain(self) -> None:
        """Shutting down: report not ready from now on, so no new work is routed here."""
        self._draining = True

    def readiness(self) -> tuple[bool, list[str]]:
        """Whether ready, and if not, why (one reason per failing condition)."""
        reasons = []
        if self.dead is not None:
            reasons.append(f"dead: {self.dead}")
        if self._draining:
            reasons.append("shutting down")
        elif not self._ready:
            reasons.append("starting")
        for name, check in self._checks.items():
            try:
                passed = check()
            except Exception:  # a failing check means not ready, never a failing probe server
                log.warning("readiness check %s raised", name, exc_info=True)
                passed = False
            if not passed:
                reasons.append(name)
        return not reasons, reasons
