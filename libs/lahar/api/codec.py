"""Decoding Kubernetes objects from YAML/JSON with errors that name the path.

``decode_object`` turns one parsed document into its msgspec type.  A wrong value is a
``DecodeError`` whose message reads ``objects[3].spec.containers[0].resources.requests.cpu: '1x'
is not a quantity``: the prefix names the document, the rest the field.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import msgspec

from lahar.api.objects import KINDS, KubeObject, group_of
from lahar.api.quantity import Quantity, QuantityError
from lahar.api.safeyaml import load as _load_one
from lahar.api.safeyaml import load_all


class DecodeError(ValueError):
    """A document that does not decode; ``str()`` is ``<path>: <why>``."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


def dec_hook(typ: type, obj: Any) -> Any:
    if typ is Quantity:
        try:
            return Quantity(obj)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
    raise NotImplementedError(f"cannot decode {typ}")


def enc_hook(obj: Any) -> Any:
    if isinstance(obj, Quantity):
        return obj.text
    raise NotImplementedError(f"cannot encode {type(obj)}")


_json_encoder = msgspec.json.Encoder(enc_hook=enc_hook)


def to_builtins(obj: Any) -> Any:
    """An object as plain dicts/lists/strings, as the API server would serve it."""
    out = msgspec.to_builtins(obj, enc_hook=enc_hook)
    # apiVersion and kind are defaults of their types, which omit_defaults would drop.
    if isinstance(out, dict) and hasattr(obj, "api_version"):
        out = {"apiVersion": obj.api_version, "kind": obj.kind, **out}
    return out


def to_json(obj: Any) -> bytes:
    return _json_encoder.encode(obj)


_PATH_TOKEN = re.compile(r"\.([A-Za-z0-9_]+)|\[(\d+)\]|\[\.\.\.\]")


def _locate(raw: Any, path: str) -> str:
    """Rewrite msgspec's ``[...]`` (a dict key it does not name) into the real key."""
    out = ""
    node = raw
    for match in _PATH_TOKEN.finditer(path):
        key, index = match.group(1), match.group(2)
        if key is not None:
            out += f".{key}"
            node = node.get(key) if isinstance(node, dict) else None
        elif index is not None:
            out += f"[{index}]"
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
        else:
            bad = _first_bad_key(node)
            out += f".{bad}" if bad is not None else "[...]"
            node = node.get(bad) if isinstance(node, dict) and bad is not None else None
    return out


def _first_bad_key(node: Any) -> str | None:
    if not isinstance(node, dict):
        return None
    for key, val in node.items():
        try:
            Quantity(val)
        except (QuantityError, TypeError):
            return str(key)
    return None


def _explain(exc: msgspec.ValidationError, raw: Any, prefix: str) -> DecodeError:
    text = str(exc)
    why, _, where = text.partition(" - at `")
    where = where.rstrip("`")
    rel = _locate(raw, where[1:]) if where.startswith("$") else ""
    why = why.replace("`", "")
    if why.startswith("Expected"):
        why = "e" + why[1:]
    return DecodeError(f"{prefix}{rel}", why)


def decode_as(raw: Any, typ: type[Any], prefix: str = "") -> Any:
    """Decode ``raw`` (parsed JSON/YAML) into ``typ`` or raise a ``DecodeError`` naming the path."""
    try:
        return msgspec.convert(raw, typ, dec_hook=dec_hook, str_keys=True)
    except msgspec.ValidationError as exc:
        raise _explain(exc, raw, prefix) from None


_json_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decode_json_as(data: bytes, typ: type[Any], prefix: str = "") -> Any:
    """Decode JSON bytes straight into ``typ`` (no intermediate dicts: the hot path of the
    services); on a bad value, the same path-naming ``DecodeError`` as ``decode_as``."""
    decoder = _json_decoders.get(typ)
    if decoder is None:
        decoder = _json_decoders[typ] = msgspec.json.Decoder(typ, dec_hook=dec_hook)
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise _explain(exc, msgspec.json.decode(data), prefix) from None
    except msgspec.DecodeError as exc:
        raise DecodeError(prefix or "$", f"not JSON: {exc}") from None


def kind_of(raw: dict[str, Any]) -> type[Any] | None:
    return KINDS.get((group_of(str(raw.get("apiVersion", ""))), str(raw.get("kind", ""))))


def decode_object(raw: Any, prefix: str = "") -> KubeObject | None:
    """The typed object for a document, or None for a kind the scheduler does not read."""
    if not isinstance(raw, dict):
        raise DecodeError(prefix or "$", f"expected an object, got {type(raw).__name__}")
    typ = kind_of(raw)
    if typ is None:
        return None
    obj: KubeObject = decode_as(raw, typ, prefix)
    return obj


def iter_documents(text: str, source: str = "<input>") -> Iterator[Any]:
    """Every document of a YAML/JSON stream, with ``kind: List`` expanded into its items
    (``safeyaml.YamlError`` for YAML that is invalid or out of bounds)."""
    for doc in load_all(text, source):
        if doc is None:
            continue
        if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
            yield from doc.get("items") or []
        else:
            yield doc


def load_yaml(text: str, source: str = "<input>") -> Any:
    return _load_one(text, source)
