"""What every rule shares: the request context, typed decoding of the request's objects, and
the resource check Volcano makes before anything else."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, TypeVar

import msgspec

from lahar.api.codec import dec_hook
from lahar_admission.review import AdmissionRequest, raw_present
from lahar_admission.settings import RuleSettings
from lahar_admission.view import ClusterView

T = TypeVar("T")

CREATE, UPDATE, DELETE = "CREATE", "UPDATE", "DELETE"


class RuleError(Exception):
    """A request the rule refuses before looking at its content (bad object, wrong resource)."""


@dataclass
class Ctx:
    request: AdmissionRequest
    view: ClusterView
    settings: RuleSettings
    _plain: dict[str, Any] = field(default_factory=dict)

    @property
    def op(self) -> str:
        return self.request.operation

    def plain(self, which: str = "object") -> Any:
        """The object (or oldObject) as plain JSON data, decoded once."""
        if which not in self._plain:
            raw = self.request.object if which == "object" else self.request.old_object
            self._plain[which] = msgspec.json.decode(bytes(raw)) if raw_present(raw) else None
        return self._plain[which]


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(typ: Any) -> msgspec.json.Decoder[Any]:
    dec = _DECODERS.get(typ)
    if dec is None:
        dec = _DECODERS[typ] = msgspec.json.Decoder(typ, dec_hook=dec_hook)
    return dec


_AT = re.compile(r"^(?P<why>.*?)(?: - at `\$(?P<where>[^`]*)`)?$", re.S)


def explain(exc: Exception, what: str) -> str:
    """msgspec's ``Expected `int`, got `str` - at `$.spec.x``` as ``object.spec.x: expected int, got str``."""
    m = _AT.match(str(exc))
    why = (m.group("why") if m else str(exc)).replace("`", "")
    where = (m.group("where") or "") if m else ""
    if why[:1].isupper() and not why.startswith("JSON"):
        why = why[0].lower() + why[1:]
    return f"{what}{where}: {why}"


def decode(raw: msgspec.Raw, typ: type[T], what: str = "object") -> T:
    if not raw_present(raw):
        raise RuleError(f"{what}: Required value: the request carries no {what}")
    try:
        out: T = _decoder(typ).decode(bytes(raw))
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise RuleError(explain(exc, what)) from None
    return out


def expect_resource(req: AdmissionRequest, group: str, version: str, resource: str) -> None:
    r = req.resource
    if (r.group, r.version, r.resource) != (group, version, resource):
        raise RuleError(f"expect resource to be {group}/{version}, Resource={resource}")
