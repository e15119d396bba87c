"""Deep copies of JSON data (Kubernetes objects as dicts).

A msgspec encode/decode round trip copies JSON several times faster than ``copy.deepcopy``, which
a profile of 1,000 Jobs showed taking a fifth of the controller's time."""

from __future__ import annotations

from typing import Any

import msgspec


def copy_json(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))
