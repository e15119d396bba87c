"""Reading Kubernetes objects from files, with errors that name the file, document and field."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lahar.api.codec import DecodeError, decode_object
from lahar.api.objects import KubeObject
from lahar.api.safeyaml import YamlError, documents, load_all


class FileError(ValueError):
    """A file that cannot be read as Kubernetes objects."""


@dataclass(frozen=True)
class Skipped:
    """A document of a kind the scheduler does not read, kept so callers can say what they ignored."""

    where: str  # file and document
    api_version: str
    kind: str
    name: str  # namespace/name, or name for a cluster-scoped object


@dataclass
class Loaded:
    objects: list[KubeObject] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    case: dict[str, Any] | None = None


def _name(raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    name = str(meta.get("name", "?")) if isinstance(meta, dict) else "?"
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return f"{ns}/{name}" if ns else name


def _label(raw: Any) -> str:
    if not isinstance(raw, dict):
        return ""
    return f" ({raw.get('kind', '?')} {_name(raw)})"


def _decode(raw: Any, where: str, out: Loaded) -> None:
    try:
        obj = decode_object(raw, "")
    except DecodeError as exc:
        path = exc.path.lstrip(".") or "$"
        raise FileError(f"{where}{_label(raw)}: {path}: {exc.why}") from None
    if obj is None:
        out.skipped.append(Skipped(where, str(raw.get("apiVersion") or ""), str(raw.get("kind") or ""), _name(raw)))
    else:
        out.objects.append(obj)


def load_file(path: str | Path) -> Loaded:
    """Objects from multi-document YAML/JSON, a ``kind: List``, or a conformance case file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise FileError(f"{p}: cannot read: {exc.strerror}") from None
    try:
        docs = documents(load_all(text, str(p)))
    except YamlError as exc:
        raise FileError(str(exc)) from None
    out = Loaded()
    for d, doc in docs:
        where = f"{p}: document {d}"
        if isinstance(doc, dict) and "objects" in doc and "schedulerConf" in doc:
            out.case = doc
            for i, raw in enumerate(doc.get("objects") or []):
                _decode(raw, f"{where}, objects[{i}]", out)
        elif isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and "items" in doc:
            for i, raw in enumerate(doc.get("items") or []):
                _decode(raw, f"{where}, items[{i}]", out)
        elif isinstance(doc, dict):
            _decode(doc, where, out)
        else:
            raise FileError(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
    return out
