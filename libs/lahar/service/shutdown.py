"""Graceful shutdown: SIGTERM/SIGINT become an event the service awaits, and a deadline bounds
the work that follows.

Kubernetes sends SIGTERM, waits ``terminationGracePeriodSeconds`` (30 s by default), then sends
SIGKILL.  So the service stops taking work when the event is set, finishes or hands back what is
in flight (a binder naks its unfinished messages), and ``finish_within`` cancels what is left at
the deadline so cleanup still runs before the kill.  A second signal means "now": it runs the
``on_repeat`` callback (``run_service`` cancels the main task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["ShutdownSignals", "finish_within"]

log = logging.getLogger(__name__)


class ShutdownSignals:
    """``with ShutdownSignals() as stop: ... await stop.requested.wait()``"""

    def __init__(
        self,
        signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
        on_repeat: Callable[[], object] | None = None,
    ) -> None:
        self.requested = asyncio.Event()
        self.received: signal.Signals | None = None  # the first signal, or None if requested in code
        self.on_repeat = on_repeat
        self._signals = tuple(signals)
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> None:
        """Handle the signals in the running loop (which must be in the main thread)."""
        self._loop = asyncio.get_running_loop()
        for sig in self._signals:
            self._loop.add_signal_handler(sig, self._on_signal, sig)

    def uninstall(self) -> None:
        if self._loop is not None:
            for sig in self._signals:
                with contextlib.suppress(ValueError, RuntimeError):  # a closed loop: nothing to undo
                    self._loop.remove_signal_handler(sig)
            self._loop = None

    def request(self, reason: str = "requested") -> None:
        """Start the shutdown from code, as a signal would."""
        if not self.requested.is_set():
            log.info("shutting down: %s", reason)
            self.requested.set()

    def __enter__(self) -> ShutdownSignals:
        self.install()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.uninstall()

    def _on_signal(self, sig: signal.Signals) -> None:
        if self.requested.is_set():
            log.warning("%s again: stopping now", sig.name)
            if self.on_repeat is not None:
                self.on_repeat()
            return
        self.received = sig
        self.request(sig.name)


async def finish_within(task: asyncio.Task[Any], deadline: float, grace: float = 2.0) -> bool:
    """Wait up to ``deadline`` seconds for ``task``; then cancel it and allow ``grace`` seconds for
    its cleanup (``except CancelledError``/``finally`` blocks).  True if it ended by itself."""
    done, _ = await asyncio.wait({task}, timeout=deadline)
    if done:
        return True
    log.error("work in flight did not finish within %.1fs; cancelling it; waiting in: %s", deadline, _waiting())
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=grace)
    if not done:
        log.error("cancelled work did not finish within %.1fs more; leaving it; waiting in: %s", grace, _waiting())
    return False


def _waiting() -> str:
    """Where each task of the loop is suspended (its innermost frame): what a stuck stop waits for."""
    current = asyncio.current_task()
    places = []
    for task in asyncio.all_tasks():
        if task is current or task.done():
            continue
        places.append(f"{task.get_name()} at {_innermost(task.get_coro())}")
    return "; ".join(sorted(places)) or "no other task"


def _innermost(coro: Any) -> str:
    """file:line of the deepest coroutine ``coro`` awaits (Task.get_stack shows only the outermost)."""
    where = "?"
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            where = f"{frame.f_code.co_filename.rsplit('/', 2)[-1]}:{frame.f_lineno}"
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return where
