"""The scheduling core's entry points: load a configuration, run a session over a snapshot.

Pure: no I/O, no clock, no environment.  The same snapshot, configuration and seed give the
same result.
"""

from __future__ import annotations

from lahar_scheduler.actions import ACTIONS, UNSUPPORTED_ACTIONS
from lahar_scheduler.actions.args import AllocateArgs, PreemptArgs
from lahar_scheduler.framework.conf import DEFAULT_CONF, SchedulerConf, args_parser, parse_conf
from lahar_scheduler.framework.session import Session, SessionResult
from lahar_scheduler.framework.snapshot import Snapshot
from lahar_scheduler.plugins import PLUGINS, UNSUPPORTED_PLUGINS, argument_parsers

ACTION_ARGS = {
    "allocate": args_parser(AllocateArgs),
    "backfill": args_parser(AllocateArgs),
    "reclaim": args_parser(AllocateArgs),
    "preempt": args_parser(PreemptArgs),
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


def run_session(snapshot: Snapshot, conf: SchedulerConf, *, seed: int = 0, uid: str = "session") -> SessionResult:
    """Open a session, run the configured actions in order, close it."""
    ssn = Session(snapshot, conf, dict(PLUGINS), seed=seed, uid=uid).open()
    for name in conf.actions:
        ACTIONS[name](conf.action_arguments(name)).execute(ssn)
    return ssn.close()
