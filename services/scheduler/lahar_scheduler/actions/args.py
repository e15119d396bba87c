"""Typed arguments of the actions (``configurations[].arguments`` in the scheduler conf)."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

A = TypeVar("A", bound=msgspec.Struct)


class AllocateArgs(msgspec.Struct, forbid_unknown_fields=True):
    predicate_error_cache: bool = msgspec.field(default=True, name="predicateErrorCacheEnable")


class PreemptArgs(msgspec.Struct, forbid_unknown_fields=True):
    predicate_error_cache: bool = msgspec.field(default=True, name="predicateErrorCacheEnable")
    topology_aware: bool = msgspec.field(default=False, name="enableTopologyAwarePreemption")
    workers: int = msgspec.field(default=16, name="topologyAwarePreemptWorkerNum")
    min_percentage: int = msgspec.field(default=10, name="minCandidateNodesPercentage")
    min_absolute: int = msgspec.field(default=1, name="minCandidateNodesAbsolute")
    max_absolute: int = msgspec.field(default=100, name="maxCandidateNodesAbsolute")


def typed(raw: dict[str, Any], struct: type[A]) -> A:
    """Arguments the conf parser already validated, as their struct (bool strings accepted)."""
    return msgspec.convert(raw, struct, strict=False)
