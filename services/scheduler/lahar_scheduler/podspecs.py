"""Decoding a snapshot load's pods with each distinct pod spec decoded once.

A restarting scheduler reads every pod from the mirror (50,000 at the size ``lahar bench
restart`` measures), and the pods of a job share one template: once placed, their specs differ
only in ``nodeName``.  The spec (containers, tolerations, volumes) is most of what decoding a
pod costs, so a load decodes each distinct spec once and gives the other pods of it a shallow
copy with their own node.  The nested lists and dicts are then shared between pods, which is
safe because nothing in the scheduler changes a pod's spec in place (deltas replace pods whole).

The rest of the pod decodes as usual, with its spec left as JSON bytes (``msgspec.Raw``).  A
spec's template is found by those bytes with the value of ``nodeName`` emptied, but only when
nothing can fool a search of the bytes: no backslash (so no escaped text: every ``"nodeName"``
in them is that exact string, and the value's text is the decoded value), one ``"nodeName"``
only, written ``"nodeName":"<printable value>"``.  That one occurrence is the spec's own field,
and not a key nested somewhere (a nodeSelector's, say), exactly when decoding puts its value in
``spec.nodeName``: with only one, a nested occurrence leaves the field empty.  Whether it is
depends on the emptied bytes alone, so it is learnt from the first pod of a template that has a
node, whose spec is decoded whole anyway (the first pod of each template is).  A template whose
occurrence is nested, a spec or pod that does not decode, a negative quantity: each such pod
takes ``decode_raw``, the exact path, with its errors.  So does every pod once the first ones
show that pods do not share specs here (a spec per pod: searching would only add to the cost).
"""

from __future__ import annotations

import msgspec

from lahar.api.objects import ObjectMeta, Pod, PodSpec, PodStatus
from lahar_scheduler.deltas import decode_raw, decode_spec
from lahar_scheduler.framework.snapshot import spec_shape

_NODE = b'"nodeName"'
_NODE_VALUE = b'"nodeName":"'
SAMPLE = 1000  # pods decoded before judging whether they share specs
DISTINCT = 0.5  # more templates than this share of those pods: they do not


class _Parts(msgspec.Struct, rename="camel", kw_only=True):
    """A ``Pod`` with its spec left undecoded (the same fields and names as ``Pod``)."""

    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)
    status: PodStatus = msgspec.field(default_factory=PodStatus)


_parts = msgspec.json.Decoder(_Parts)


class _Template:
    """The spec of a template's first pod, decoded whole, and what the template's pods share."""

    __slots__ = ("node", "shape", "spec", "top")

    def __init__(self, spec: PodSpec, node: str | None) -> None:
        self.spec = spec
        self.node = node  # the value emptied from that pod's bytes (None: they were the key)
        # Whether the emptied value is the spec's own nodeName (None: not known while no pod
        # with a node came).
        self.top: bool | None = None if node is None else spec.node_name == node
        self.shape = spec_shape(spec)  # the same for every pod of the template (no node in it)


_MISSING = _Template(PodSpec(), None)  # a lookup's default: not a template


class PodDecoder:
    """Decodes the pods of one load; keeps every template it made until it is dropped."""

    def __init__(self) -> None:
        self._templates: dict[bytes, _Template | None] = {}  # None: those bytes do not decode
        self._seen = 0
        self.sharing = True

    def decode(self, key: str, raw: bytes) -> tuple[Pod, bytes | None]:
        """The pod exactly as ``decode_raw`` decodes it (raising as it does), and the spec's part
        of its shape key (``spec_shape``) when the spec came from a template."""
        if not self.sharing:
            return decode_raw("pods", key, raw), None
        self._seen += 1
        if self._seen == SAMPLE and len(self._templates) > SAMPLE * DISTINCT:
            self.sharing = False  # from the next pod on
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
        return pod, template.shape

    def _spec(self, raw: bytes) -> tuple[PodSpec, _Template] | None:
        key, node = unplaced(raw)
        template = self._templates.get(key, _MISSING)
        if template is _MISSING:  # the first pod of these bytes: its own spec, decoded whole
            spec = decode_spec(raw)
            template = self._templates[key] = None if spec is None else _Template(spec, node)
            return None if spec is None or template is None else (spec, template)
        if template is None:
            return None
        if node == template.node:  # the very bytes of the template's first pod
            return msgspec.structs.replace(template.spec), template
        if template.top is None:  # the first pod with a node: its spec whole says where the value is
            spec = decode_spec(raw)
            if spec is None:
                return None
            template.top = spec.node_name == node
            return (spec, template) if template.top else None
        if not template.top:
            return None
        return msgspec.structs.replace(template.spec, node_name=node or ""), template


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
