"""The scheduling core's entry points: load a configuration, run a session over a snapshot.

Pure: no I/O, no clock, no environment.  The same snapshot, configuration and seed give the
same result.
"""

from __future__ import annotations

import msgspec

from lahar_scheduler.actions import ACTIONS
from lahar_scheduler.framework.conf import DEFAULT_CONF, SchedulerConf, args_parser, parse_conf
from lahar_scheduler.framework.session import Session, SessionResult
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.plugins import PLUGINS, argument_parsers


class AllocateArgs(msgspec.Struct, forbid_unknown_fields=True):
    predicate_error_cache: bool = msgspec.field(default=True, name="predicateErrorCacheEnable")


class PreemptArgs(msgspec.Struct, forbid_unknown_fields=True):
    predicate_error_cache: bool = msgspec.field(default=True, name="predicateErrorCacheEnable")
    topology_aware: bool = msgspec.field(default=False, name="enableTopologyAwarePreemption")
    workers: int = msgspec.field(default=16, name="topologyAwarePreemptWorkerNum")
    min_percentage: int = msgspec.field(default=10, name="minCandidateNodesPercentage")
    min_absolute: int = msgspec.field(default=1, name="minCandidateNodesAbsolute")
    max_absolute: int = msgspec.field(default=100, name="maxCandidateNodesAbsolute")


ACTION_ARGS = {
    "allocate": args_parser(AllocateArgs),
    "backfill": args_parser(AllocateArgs),
    "reclaim": args_parser(AllocateArgs),
    "preempt": args_parser(PreemptArgs),
}


def load_conf(text: str | None = None) -> SchedulerConf:
    """Parse a ``volcano-scheduler.conf`` document (the built-in default when None)."""
    return parse_conf(text if text is not None else DEFAULT_CONF, ACTIONS, argument_parsers(), ACTION_ARGS)


def run_session(snapshot: Snapshot, conf: SchedulerConf, *, seed: int = 0, uid: str = "session") -> SessionResult:
    """Open a session, run the configured actions in order, close it."""
    ssn = Session(snapshot, conf, dict(PLUGINS), seed=seed, uid=uid).open()
    for name in conf.actions:
        ACTIONS[name](conf.action_arguments(name)).execute(ssn)
    return ssn.close()
