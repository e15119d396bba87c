"""Plugin arguments, parsed as Go's ``flag`` package parses them (Volcano's plugins use it).

Users write ``--port=5000``, ``-port 5000``, ``--wait-master-enabled`` (a bare bool is true); the
first non-flag argument or ``--`` ends the flags.  On a bad argument Go stops and keeps what it
had parsed (the plugin logs the error and runs with the rest at their defaults); so does this.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

FlagValue = bool | int | str

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}
_GO_INT = re.compile(r"^[+-]?(0[xX][0-9a-fA-F_]+|0[oO]?[0-7_]*|0[bB][01_]+|[1-9][0-9_]*)$")
_INT_BITS = 64


def _parse_bool(text: str) -> bool:
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f'invalid boolean value "{text}"')


def _parse_int(text: str) -> int:
    if not _GO_INT.match(text):
        raise ValueError(f'invalid value "{text}": parse error')
    body = text.lstrip("+-")
    sign = -1 if text.startswith("-") else 1
    if len(body) > 1 and body[0] == "0" and body[1] in "01234567_":
        number = int(body[1:].replace("_", "") or "0", 8)  # Go's base 0: a leading 0 means octal
    else:
        number = int(body, 0)
    number *= sign
    if not -(2 ** (_INT_BITS - 1)) <= number < 2 ** (_INT_BITS - 1):
        raise ValueError(f'invalid value "{text}": value out of range')
    return number


def _convert(default: FlagValue, text: str) -> FlagValue:
    if isinstance(default, bool):
        return _parse_bool(text)
    if isinstance(default, int):
        return _parse_int(text)
    return text


def parse_flags(args: Sequence[str], defaults: Mapping[str, FlagValue]) -> tuple[dict[str, FlagValue], str]:
    """The flag values (``defaults`` updated by ``args``) and the parse error ("" if none)."""
    values: dict[str, FlagValue] = dict(defaults)
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if len(arg) < 2 or arg[0] != "-":
            break
        if arg == "--":
            break
        name = arg[2:] if arg[1] == "-" else arg[1:]
        if not name or name[0] in "-=":
            return values, f"bad flag syntax: {arg}"
        name, has_value, text = name.partition("=")
        if name not in defaults:
            return values, f"flag provided but not defined: -{name}"
        default = defaults[name]
        if not has_value and not isinstance(default, bool):
            if not rest:
                return values, f"flag needs an argument: -{name}"
            text, has_value = rest.pop(0), "="
        try:
            values[name] = _convert(default, text) if has_value else True
        except ValueError as exc:
            return values, f"invalid value for flag -{name}: {exc}"
    return values, ""
