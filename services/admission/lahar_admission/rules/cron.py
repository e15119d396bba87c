"""Whether a schedule parses with robfig/cron's standard parser (what Volcano calls).

Five fields (minute, hour, day of month, month, day of week) of ``*``/``?``, numbers, names,
ranges ``a-b``, steps ``/n`` and lists, or a descriptor (``@hourly`` …, ``@every <duration>``).
"""

from __future__ import annotations

import re

_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (
        1,
        12,
        {
            m: i + 1
            for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))
        },
    ),
    (0, 6, {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}),
)
_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_GO_DURATION = re.compile(r"^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$|^[+-]?0$")


def _value(text: str, names: dict[str, int]) -> int | None:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        return None
    return int(text)


def _range_ok(expr: str, low: int, high: int, names: dict[str, int]) -> bool:
    range_part, _, step_text = expr.partition("/")
    if "/" in expr and (not step_text.isdigit() or int(step_text) == 0):
        return False
    if range_part in ("*", "?"):
        return True
    bounds = range_part.split("-")
    if len(bounds) > 2:
        return False
    values = [_value(b, names) for b in bounds]
    if any(v is None for v in values):
        return False
    start = values[0]
    end = values[-1] if len(values) == 2 else (high if "/" in expr else start)
    assert start is not None and end is not None
    return low <= start <= end <= high


def _field_ok(text: str, index: int) -> bool:
    low, high, names = _FIELDS[index]
    return all(part and _range_ok(part, low, high, names) for part in text.split(","))


def is_valid_schedule(spec: str) -> bool:
    text = spec.strip()
    if text.startswith("@"):
        if text.startswith("@every "):
            return bool(_GO_DURATION.match(text[len("@every ") :].strip()))
        return text in _DESCRIPTORS
    fields = text.split()
    return len(fields) == 5 and all(_field_ok(f, i) for i, f in enumerate(fields))
