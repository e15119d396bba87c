"""The victim ceiling: per node, at most what the plugins' PreemptableFn could name there.

Preempt walks nodes in score order and asks every preemptable callback for victims on each;
late in a large session most nodes have nothing left to give (their jobs are down to minMember,
their shares below the preemptor's), and asking costs a Python call per plugin per node.  A
plugin may say, per task and without the preemptor's own state, whether it could ever name that
task (``victim_ceiling(preemptor) -> (key, could_name)``), and promises it never abstains.  Then,
per tier, a node where one such plugin could name nothing yields no victims (an empty answer
vetoes its tier) and otherwise at most the largest single plugin's set (the intersection can
re-seed from a later plugin, but the victims are always one plugin's list or a subset of it).
The node's ceiling is the largest over tiers; a node whose future idle plus its ceiling cannot
hold the preemptor is skipped, exactly as walking it would have found nothing.

Rows are cached per (queue, plugins' keys) and recomputed when the node changes.  A job's state
changing elsewhere (an eviction on another node) can only shrink what plugins name, so a stale
row errs on the side of walking the node; a discarded eviction can grow it again, so actions
call ``reset`` after discarding evictions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lahar_scheduler.framework import points as P
from lahar_scheduler.framework.rowcache import RowCache

if TYPE_CHECKING:
    from lahar_scheduler.framework.jobs import TaskInfo
    from lahar_scheduler.framework.nodes import FloatArray, IntArray
    from lahar_scheduler.framework.session import Session

CouldName = Callable[["TaskInfo"], bool]
# Per tier, each plugin's per-task test; None for a plugin that gives no ceiling (anything, no veto).
Tiers = list[list[CouldName | None]]


def _ceiling_of(fn: Any) -> Callable[[TaskInfo], tuple[Hashable, CouldName]] | None:
    owner = getattr(fn, "__self__", None)
    got = getattr(owner, "victim_ceiling", None) if owner is not None else getattr(fn, "victim_ceiling", None)
    return got if callable(got) else None


class VictimCeiling:
    def __init__(self, ssn: Session, point: P.Point[Any, Any, Any], counts: Callable[[TaskInfo, str], bool]) -> None:
        self.ssn = ssn
        self.counts = counts
        chain: Sequence[Sequence[Callable[..., Any]]] = ssn.chain(point)
        self.chain = [[_ceiling_of(fn) for fn in fns] for fns in chain]
        self.useful = any(c is not None for tier in self.chain for c in tier)
        self._caches: dict[Hashable, RowCache[np.ndarray]] = {}

    def reset(self) -> None:
        self._caches.clear()

    def nodes(self, preemptor: TaskInfo, queue: str) -> FloatArray | None:
        """Per node, the most the plugins could evict for ``preemptor`` (None: no ceiling known)."""
        if not self.useful:
            return None
        parts = [[c(preemptor) if c is not None else None for c in tier] for tier in self.chain]
        key = (queue, tuple(tuple(p[0] if p is not None else None for p in tier) for tier in parts))
        cache = self._caches.get(key)
        if cache is None:
            tests: Tiers = [[p[1] if p is not None else None for p in tier] for tier in parts]
            cache = self._caches[key] = RowCache(self.ssn.nodes, self._compute(queue, tests), size=1)
        return cache.get(b"ceiling", preemptor)

    def _compute(self, queue: str, tiers: Tiers) -> Callable[[TaskInfo, IntArray], np.ndarray]:
        infos = self.ssn.nodes.infos
        width = len(self.ssn.nodes.space)

        def compute(_: TaskInfo, rows: IntArray) -> np.ndarray:
            out = np.zeros((len(rows), width))
            for j, i in enumerate(rows.tolist()):
                tasks = [t for t in infos[i].tasks.values() if self.counts(t, queue)]
                if tasks:
                    out[j] = _row(tasks, tiers, width)
            return out

        return compute


def _row(tasks: list[TaskInfo], tiers: Tiers, width: int) -> FloatArray:
    best: FloatArray = np.zeros(width)
    for tier in tiers:
        if not tier:
            continue
        sums: list[FloatArray] = []
        for test in tier:
            chosen = tasks if test is None else [t for t in tasks if test(t)]
            if test is not None and not chosen:
                sums = []
                break  # this plugin names nothing here: the tier is vetoed
            sums.append(sum((t.res_vec for t in chosen), np.zeros(width)))
        for s in sums:
            best = np.maximum(best, s)
    return best
