"""Decoding a snapshot load's pods with each distinct pod spec decoded once.

A restarting scheduler reads every pod from the mirror (50,000 at the size ``lahar bench
restart`` measures), and the pods of a job share one template: once placed, their specs differ
only in ``nodeName``.  The spec (containers, tolerations, volumes) is most of what decoding a
pod costs, so a load decodes each distinct spec once and gives every pod a shallow copy with
its own node.  The nested lists and dicts are then shared between pods, which is safe because
nothing in the scheduler changes a pod's spec in place (pods are replaced whole by deltas).

The rest of the pod decodes as usual, with its spec left as JSON bytes (``msgspec.Raw``).
A spec's template is found by those bytes with the value of ``nodeName`` emptied, but only when
nothing can fool a search of the bytes: no backslash (so no escaped text, and every
``"nodeName"`` in them is that exact string), one ``"nodeName"`` only, written
``"nodeName":"<printable value>"``.  Whether that one occurrence is the spec's own field, and
not a key nested somewhere (a nodeSelector's, say), depends on the emptied bytes alone: it is
checked once per template, with the first pod that has a node, by decoding that pod's spec
whole and comparing.  Anything else (a template that fails the check, a spec or pod that does
not decode, a negative quantity) takes ``decode_raw``, the exact path, with its errors.
"""

from __future__ import annotations

import msgspec

from lahar.api.objects import ObjectMeta, Pod, PodSpec, PodStatus
from lahar_scheduler.deltas import decode_raw, decode_spec
from lahar_scheduler.framework.snapshot import spec_shape

_NODE = b'"nodeName"'
_NODE_VALUE = b'"nodeName":"'


class _Parts(msgspec.Struct, rename="camel", kw_only=True):
    """A ``Pod`` with its spec left undecoded (the same fields and names as ``Pod``)."""

    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


_parts = msgspec.json.Decoder(_Parts)


class _Template:
    """A decoded spec and what pods of it share."""

    __slots__ = ("checked", "shape", "shared", "spec")

    def __init__(self, spec: PodSpec) -> None:
        self.spec = spec
        self.checked = False  # a pod with a node compared its whole spec with this one
        self.shared = False  # the emptied value is the spec's own nodeName
        self.shape: bytes | None = None  # spec_shape(spec), once asked

    def spec_shape(self) -> bytes:
        if self.shape is None:
            self.shape = spec_shape(self.spec)
        return self.shape


class PodDecoder:
    """Decodes the pods of one load; keeps every template it made until it is dropped."""

    def __init__(self) -> None:
        self._templates: dict[bytes, _Template | None] = {}  # None: those bytes do not decode alone

    def decode(self, key: str, raw: bytes) -> tuple[Pod, bytes | None]:
        """The pod exactly as ``decode_raw`` decodes it (raising as it does), and the spec's part
        of its shape key (``spec_shape``) when the spec came from a template."""
        try:
            parts = _parts.decode(raw)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return decode_raw("pods", key, raw), None
        found = self._spec(bytes(parts.spec)) if len(parts.spec) else None
        if found is None:
            return decode_raw("pods", key, raw), None
        spec, template = found
        pod = Pod(
            api_version=parts.api_version, kind=parts.kind, metadata=parts.metadata, spec=spec, status=parts.status
        )
        return pod, template.spec_shape()

    def _spec(self, raw: bytes) -> tuple[PodSpec, _Template] | None:
        key, node = unplaced(raw)
        if key in self._templates:
            template = self._templates[key]
        else:
            decoded = decode_spec(key)
            template = self._templates[key] = None if decoded is None else _Template(decoded)
        if template is None:
            return None
        if node is None:  # the bytes themselves: the template is this very spec
            return msgspec.structs.replace(template.spec), template
        if not template.checked:
            template.checked = True
            whole = decode_spec(raw)
            template.shared = whole is not None and whole == msgspec.structs.replace(template.spec, node_name=node)
        if not template.shared:
            return None
        return msgspec.structs.replace(template.spec, node_name=node), template


def unplaced(raw: bytes) -> tuple[bytes, str | None]:
    """The spec's bytes with the value of its one ``"nodeName"`` emptied, and that value; or the
    bytes unchanged and None when the search could be fooled (see the module's docstring) or
    the value is empty already.  (Searches from the end where they can: CPython's are quicker
    that way round on JSON, and an API server writes nodeName late in a spec.)"""
    if raw.rfind(b"\\") >= 0:
        return raw, None
    at = raw.rfind(_NODE_VALUE)
    if at < 0:
        return raw, None
    # Another "nodeName" anywhere, overlapping this one or not: the search could be fooled.
    if raw.rfind(_NODE, 0, at + len(_NODE) - 1) >= 0 or raw.find(_NODE, at + 1) >= 0:
        return raw, None
    start = at + len(_NODE_VALUE)
    end = raw.find(b'"', start)
    if end <= start:
        return raw, None
    try:
        node = raw[start:end].decode()
    except UnicodeDecodeError:
        return raw, None
    if not node.isprintable():  # control characters are not JSON: the exact path refuses them
        return raw, None
    return raw[:start] + raw[end:], node
