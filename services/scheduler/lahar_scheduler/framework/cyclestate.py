"""Per-task scratch state that plugins fill and their simulate hooks change.

Kube-scheduler's CycleState, as Volcano uses it for topology-aware preemption: plugins write
their view (queue accounting, affinity counts) in PrePredicate (here the ``cycle_state``
extension point, asked right after pre_predicate); the dry run clones the state once per
candidate node and the simulate hooks change the clone as victims are removed and reprieved, so
no node's trial leaks into another's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    from lahar.api.resource import Resource

T = TypeVar("T")


class StateData(Protocol):
    def clone(self) -> StateData: ...


class CycleState:
    __slots__ = ("_data",)

    def __init__(self, data: dict[str, StateData] | None = None) -> None:
        self._data: dict[str, StateData] = data if data is not None else {}

    def write(self, key: str, value: StateData) -> None:
        self._data[key] = value

    def read(self, key: str) -> StateData | None:
        return self._data.get(key)

    def clone(self) -> CycleState:
        return CycleState({k: v.clone() for k, v in self._data.items()})


class LazyCopy(Generic[T]):
    """A copy of live plugin data, taken on first use instead of when written.

    The dry run reads the state right after it is filled, with nothing changed in between, so
    copying on first use sees the same data as copying at write time; nodes whose trial never
    reaches a hook copy nothing.
    """

    __slots__ = ("_dup", "_source", "_value")

    def __init__(self, source: Callable[[], T], dup: Callable[[T], T], value: T | None = None) -> None:
        self._source = source
        self._dup = dup
        self._value = value

    def get(self) -> T:
        if self._value is None:
            self._value = self._dup(self._source())
        return self._value

    def clone(self) -> LazyCopy[T]:
        """An independent copy, itself taken on first use: a dry run clones the state for every
        node but most nodes never reach a hook that reads it.  (The original must not change
        before the clone is first read; dry runs only ever change clones.)"""
        value = self._value
        if value is None:
            return LazyCopy(self._source, self._dup)
        return LazyCopy(lambda: value, self._dup)


Allocations = dict[str, "Resource"]


def copy_allocations(allocations: Allocations) -> Allocations:
    """Per-queue allocations, each cloned: what queue plugins change in a dry run."""
    return {name: r.clone() for name, r in allocations.items()}
