"""The one exception type of ``lahar.infra``."""

from __future__ import annotations


class InfraError(RuntimeError):
    """A server could not be found, started or reached, or a setting naming one is invalid.

    The message always names what went wrong: the setting (``LAHAR_NATS_URL``), the package that
    should ship a binary, or the server and its log file.
    """
