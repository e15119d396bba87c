"""Help that shows each option's default, where it has one worth saying."""

from __future__ import annotations

import argparse


class DefaultsHelp(argparse.HelpFormatter):
    """Like argparse.ArgumentDefaultsHelpFormatter, without "(default: None)" or "(default: False)"
    on options that have no default value, and without repeating one the help already gives."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"
