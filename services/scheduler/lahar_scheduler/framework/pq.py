"""A binary-heap priority queue ordered by a session comparator (Volcano's util.PriorityQueue)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Entry(Generic[T]):
    __slots__ = ("item", "less")

    def __init__(self, item: T, less: Callable[[T, T], bool]) -> None:
        self.item = item
        self.less = less

    def __lt__(self, other: _Entry[T]) -> bool:
        return self.less(self.item, other.item)


class PriorityQueue(Generic[T]):
    def __init__(self, less: Callable[[T, T], bool], items: Iterable[T] = ()) -> None:
        self._less = less
        self._heap: list[_Entry[T]] = [_Entry(i, less) for i in items]
        heapq.heapify(self._heap)

    def push(self, item: T) -> None:
        heapq.heappush(self._heap, _Entry(item, self._less))

    def pop(self) -> T:
        return heapq.heappop(self._heap).item

    def __len__(self) -> int:
        return len(self._heap)

    def empty(self) -> bool:
        return not self._heap

    def clone(self) -> PriorityQueue[T]:
        """An independent queue with the same items (a copied heap is still a heap)."""
        out: PriorityQueue[T] = PriorityQueue(self._less)
        out._heap = list(self._heap)
        return out

    def assign(self, other: PriorityQueue[T]) -> None:
        """Take ``other``'s items (Volcano's worksheet ShallowCopyFrom)."""
        self._heap = other._heap
