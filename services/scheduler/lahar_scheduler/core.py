"""The scheduling core's entry points: load a configuration, run a session over a snapshot.

Pure: no I/O, no clock, no environment.  The same snapshot, configuration and seed give the
same result.
"""

from __future__ import annotations

from collections.abc import Callable

from lahar_scheduler.actions import ACTIONS, UNSUPPORTED_ACTIONS
from lahar_scheduler.actions.args import AllocateArgs, PreemptArgs
from lahar_scheduler.actions.gangevict import GangEvictArgs
from lahar_scheduler.framework.conf import DEFAULT_CONF, SchedulerConf, args_parser, parse_conf
from lahar_scheduler.framework.ports import ExtenderTransport
from lahar_scheduler.framework.session import Session, SessionResult
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.plugins import PLUGINS, UNSUPPORTED_PLUGINS, argument_parsers

ACTION_ARGS = {
    "allocate": args_parser(AllocateArgs),
    "backfill": args_parser(AllocateArgs),
    "reclaim": args_parser(AllocateArgs),
    "preempt": args_parser(PreemptArgs),
    "gangpreempt": args_parser(GangEvictArgs),
    "gangreclaim": args_parser(GangEvictArgs),
}


def load_conf(text: str | None = None, *, leave_out_unsupported: bool = False) -> SchedulerConf:
    """Parse a ``volcano-scheduler.conf`` document (the built-in default when None).

    Plugins Volcano has and Lahar not yet are an error, or with ``leave_out_unsupported`` (a
    what-if run) are dropped and listed in the result's ``left_out``."""
    return parse_conf(
        text if text is not None else DEFAULT_CONF,
        ACTIONS,
        argument_parsers(),
        ACTION_ARGS,
        unsupported_actions=UNSUPPORTED_ACTIONS,
        unsupported_plugins=UNSUPPORTED_PLUGINS,
        leave_out_unsupported=leave_out_unsupported,
    )


def run_session(
    snapshot: Snapshot,
    conf: SchedulerConf,
    *,
    seed: int = 0,
    uid: str = "session",
    clock: Callable[[], float] | None = None,
    transport: ExtenderTransport | None = None,
) -> SessionResult:
    """Open a session, run the configured actions in order, close it.

    ``clock`` (the caller's, e.g. ``time.perf_counter``) only times the session's parts for
    ``result.stats``; the decisions are the same without it.  ``transport`` is how the extender plugin reaches
    its HTTP extender (the service shell's adapter); without one the extender is unreachable."""
    ssn = Session(snapshot, conf, dict(PLUGINS), seed=seed, uid=uid, clock=clock, transport=transport).open()
    watch = ssn.stopwatch
    for name in conf.actions:
        started = watch.now()
        ACTIONS[name](conf.action_arguments(name)).execute(ssn)
        took = watch.since(started)
        if took is not None:
            ssn.result.stats.action_seconds[name] = took
    return ssn.close()
