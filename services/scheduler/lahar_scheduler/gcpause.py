"""Pausing the cyclic garbage collector while the scheduler makes objects in bulk.

A snapshot load makes a few million objects and a session hundreds of thousands; the collector
would scan them again and again meanwhile (a load) or run a full collection in the middle of a
new leader's first session (40-70 ms at 50,000 pods, before the first bind can leave).  Nothing
is lost by waiting: the collections run once the burst is over.

The collector's switch is one for the whole process, and a load (in a worker thread) and a
session's publishing (in the event loop) can overlap, so pauses nest: the collector is on
again when the last one ends, and only if it was on when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False  # whether the collector was on when the outermost pause began


@contextmanager
def collector_paused() -> Iterator[None]:
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
