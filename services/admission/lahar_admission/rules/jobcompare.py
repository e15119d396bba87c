"""The job-update freeze: everything in ``spec`` but a few fields must stay the same.

Go compares the typed specs with ``equality.Semantic.DeepEqual``: zero values equal absent
ones, nil and empty lists/maps are equal, and quantities compare by value.  The same is done
here on plain data by normalising both sides before comparing.
"""

from __future__ import annotations

import copy
from typing import Any

from lahar_admission.goquantity import Quantity, QuantityError

# Keys whose values (or whose map values) are quantities.
_QUANTITY_MAPS = frozenset({"requests", "limits", "overhead", "capacity", "hard"})
_QUANTITY_VALUES = frozenset({"sizeLimit", "storage"})


def _quantity(value: Any) -> Any:
    try:
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            return ("quantity", Quantity(value).amount)
    except QuantityError:
        pass
    return value


def normalise(value: Any, key: str = "") -> Any:
    """Drop zero values and read quantities by value, recursively."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            n = _quantity(v) if key in _QUANTITY_MAPS or k in _QUANTITY_VALUES else normalise(v, k)
            if n not in (None, "", 0, False, [], {}):
                out[k] = n
        return out
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    return value


def _freeze(spec: dict[str, Any], old_spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the mutable fields taken from ``old_spec``."""
    out = copy.deepcopy(spec)
    for key in ("minAvailable", "priorityClassName"):
        out.pop(key, None)
        if key in old_spec:
            out[key] = old_spec[key]
    old_tasks = old_spec.get("tasks") or []
    for i, task in enumerate(out.get("tasks") or []):
        old_task = old_tasks[i] if i < len(old_tasks) and isinstance(old_tasks[i], dict) else {}
        if isinstance(task, dict):
            for key in ("replicas", "minAvailable"):
                task.pop(key, None)
                if key in old_task:
                    task[key] = old_task[key]
    return out


def _clear_generated_claims(spec: dict[str, Any]) -> None:
    """The controller fills ``volumeClaimName`` for volumes it creates; that change is allowed."""
    for vol in spec.get("volumes") or []:
        if isinstance(vol, dict) and vol.get("volumeClaim") is not None:
            vol.pop("volumeClaimName", None)


def same_frozen_spec(old: Any, new: Any) -> bool:
    old_spec = (old or {}).get("spec") or {} if isinstance(old, dict) else {}
    new_spec = (new or {}).get("spec") or {} if isinstance(new, dict) else {}
    frozen = _freeze(new_spec, old_spec)
    base = copy.deepcopy(old_spec)
    _clear_generated_claims(frozen)
    _clear_generated_claims(base)
    return bool(normalise(frozen) == normalise(base))
