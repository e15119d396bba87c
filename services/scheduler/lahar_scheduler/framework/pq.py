"""A binary-heap priority queue ordered by a session comparator (Volcano's util.PriorityQueue).

A queue may also be given a ``key``: a function whose values compare (``<``) exactly as the
comparator orders the items, ending with the item's uid.  It is computed once per push instead of
calling the comparator (and through it every plugin's) on each of the heap's comparisons.  The
order is then strict (equal keys only for one item pushed twice), so each pop takes the one
least item the comparator's heap would take; the key must not change while its item is in the
queue (see ``Session.job_sort_key``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("item", "less")

    def __init__(self, item: T, less: Callable[[T, T], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: _Entry[T]) -> bool:
        return self.less(self.item, other.item)


class ByKey(Generic[T]):
    """An order callback that compares keys: −1, 0 or 1 as ``key(left)`` is below, equal to or
    above ``key(right)``.  It exposes ``key`` so a queue may compare precomputed keys instead."""

    __slots__ = ("key",)

    def __init__(self, key: Callable[[T], Any]) -> None:
        self.key = key

    def __call__(self, left: T, right: T) -> int:
        lk, rk = self.key(left), self.key(right)
        return 0 if lk == rk else (-1 if lk < rk else 1)


class PriorityQueue(Generic[T]):
    def __init__(
        self, less: Callable[[T, T], bool], items: Iterable[T] = (), key: Callable[[T], Any] | None = None
    ) -> None:
        self._less = less
        self._key = key
        # Keyed entries are (key, n, item) tuples, compared by the heap in C.  Keys end with the
        # item's uid, so two keys are equal only for the same item (pushed twice), where ``n``
        # (the push's number) decides and either comes out the same; items are never compared.
        self._pushed = itertools.count()
        if key is None:
            self._heap: list[Any] = [_Entry(i, less) for i in items]
        else:
            n = self._pushed
            self._heap = [(key(i), next(n), i) for i in items]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        key = self._key
        entry = _Entry(item, self._less) if key is None else (key(item), next(self._pushed), item)
        heapq.heappush(self._heap, entry)

    def pop(self) -> T:
        entry = heapq.heappop(self._heap)
        return entry.item if self._key is None else entry[2]  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._heap)

    def empty(self) -> bool:
        return not self._heap

    def clone(self) -> PriorityQueue[T]:
        """An independent queue with the same items (a copied heap is still a heap)."""
        out: PriorityQueue[T] = PriorityQueue(self._less, key=self._key)
        out._heap = list(self._heap)
        out._pushed = self._pushed
        return out

    def assign(self, other: PriorityQueue[T]) -> None:
        """Take ``other``'s items (Volcano's worksheet ShallowCopyFrom)."""
        self._heap = other._heap
        self._key = other._key  # its entries are keyed (or not) as other's are
        self._pushed = other._pushed
