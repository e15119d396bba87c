"""The keeper: what a Deployment's controller does for ``lahar up``, restarting dead children.

A child that exits (a crash, a SIGKILL, a dead loop that ended the process on purpose) is started
again with the same identity, port and settings, after a back-off that doubles with each quick
death (0.5 s up to 10 s) and resets once the child has lived for a while; so a child that cannot
start does not spin.  Children paused or scaled down on purpose are left alone.  The emulator is
not restarted: it *is* the cluster, and a new one would have lost every object.

It is a thread, not a task, because a child dies with the thread that forked it (see
``lahar.infra.process``): this thread lives exactly as long as the stack.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lahar.up.stack import Child, LocalStack

log = logging.getLogger("lahar.up")

FIRST_BACKOFF = 0.5
LONGEST_BACKOFF = 10.0
STABLE_AFTER = 30.0  # seconds alive after which a child's back-off resets
POLL = 0.1  # how often children are looked at


@dataclass
class _Record:
    started: float
    backoff: float = FIRST_BACKOFF
    died: float | None = None


class Keeper:
    def __init__(self, stack: LocalStack) -> None:
        self.stack = stack
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._records: dict[str, _Record] = {}
        self.events: list[str] = []  # what it did, oldest first (for `lahar up`'s status line)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lahar-keeper", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5.0)

    def _run(self) -> None:
        while not self._stop.wait(POLL):
            for child in list(self.stack.children):
                try:
                    self.step(child, time.monotonic())
                except Exception:  # one child's failure to restart must not end the keeper
                    log.exception("keeper: %s", child.identity)

    def step(self, child: Child, now: float) -> None:
        if child.name == "sim" or child.held or child.retired or self._stop.is_set():
            return
        rec = self._records.setdefault(child.identity, _Record(started=now))
        if child.alive():
            if now - rec.started > STABLE_AFTER:
                rec.backoff = FIRST_BACKOFF
            return
        if rec.died is None:
            rec.died = now
            self._note(f"{child.identity} exited with {child.proc.returncode}; restart in {rec.backoff:g} s")
        if now - rec.died < rec.backoff:
            return
        self.stack.respawn(child)
        self._note(f"{child.identity} restarted ({child.restarts})")
        rec.started, rec.died = now, None
        rec.backoff = min(rec.backoff * 2, LONGEST_BACKOFF)

    def _note(self, text: str) -> None:
        log.warning("keeper: %s", text)
        self.events.append(text)
