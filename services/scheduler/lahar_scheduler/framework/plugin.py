"""The one plugin style: a class with a name, a typed ``Args`` struct, and methods.

``on_session_open`` keeps what it needs on ``self`` and registers bound methods at extension
points (``session.add(points.JOB_ORDER, self.job_order)``); ``on_session_close`` reports.  The
configuration's arguments reach the constructor already parsed into ``Args`` (or None).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from lahar_scheduler.framework.session import Session


class Plugin:
    """Base of every plugin: a name, typed arguments, and the two session hooks."""

    name: ClassVar[str] = ""
    # The msgspec Struct its arguments parse into (framework/conf.py validates them by it).
    Args: ClassVar[type[Any]]

    def __init__(self, arguments: Any) -> None:
        self.args = arguments

    def on_session_open(self, ssn: Session) -> None:
        raise NotImplementedError

    def on_session_close(self, ssn: Session) -> None:
        return None
