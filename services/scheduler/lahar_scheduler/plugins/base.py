"""Shared pieces of plugin definitions: empty argument schemas and the plugin base class."""

from __future__ import annotations

import msgspec

from lahar_scheduler.framework.plugin import Plugin


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    """Plugins that take no arguments."""


__all__ = ["NoArgs", "Plugin"]
