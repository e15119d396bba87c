"""field.Error from apimachinery: ``<path>: <type>: <detail>``, and ErrorList aggregation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


def show(value: Any) -> str:
    """How field.Error prints a bad value: strings quoted (Go %q), numbers and bools bare."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class FieldError:
    path: str
    body: str

    def __str__(self) -> str:
        return f"{self.path}: {self.body}" if self.path else self.body


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, f"Invalid value: {show(value)}: {detail}")


def invalid_raw(path: str, shown: str, detail: str) -> FieldError:
    """An Invalid error whose value is already formatted (a Quantity prints via String())."""
    return FieldError(path, f"Invalid value: {shown}: {detail}")


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, "Required value" + (f": {detail}" if detail else ""))


def not_supported(path: str, value: Any, supported: list[str]) -> FieldError:
    opts = ", ".join(json.dumps(s) for s in supported)
    return FieldError(path, f"Unsupported value: {show(value)}: supported values: {opts}")


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, f"Duplicate value: {show(value)}")


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, f"Forbidden: {detail}")


def not_found(path: str, value: Any) -> FieldError:
    return FieldError(path, f"Not found: {show(value)}")


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(path, f"Too long: may not be more than {limit} bytes")


def aggregate(errs: list[FieldError]) -> str:
    """ErrorList.ToAggregate().Error(): one error alone, several as ``[e1, e2]``."""
    if len(errs) == 1:
        return str(errs[0])
    return "[" + ", ".join(str(e) for e in errs) + "]"
