"""Messages on the bus: deltas, decisions and results, as msgspec types with a schema version.

Every message carries ``v``.  A reader that sees another version, or bytes that do not decode,
dead-letters the message and goes on (see ``decode``).
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec

VERSION = 1

Op = Literal["ADDED", "MODIFIED", "DELETED"]
NO_OBJECT = msgspec.Raw(b"null")


class Delta(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One object change, as the cache saw it on the watch (or found it on a relist)."""

    v: int = VERSION
    kind: str
    op: Op
    key: str  # "namespace/name", or "name" for cluster-scoped kinds
    rv: str  # the object's resourceVersion
    # The object's JSON, as the API server served it (``NO_OBJECT`` when a delete carries none).
    obj: msgspec.Raw = msgspec.field(default_factory=lambda: NO_OBJECT)
    # The epoch of the cache leader that published it.  The stream is totally ordered, so once a
    # reader has seen epoch E, a later delta of an older epoch comes from a deposed leader still
    # draining its queue, and is ignored (the new leader relists, so nothing is lost).
    epoch: int = 0

    @property
    def has_object(self) -> bool:
        return bytes(self.obj) != b"null"


class ClaimAllocation(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One ResourceClaim (in the pod's namespace) the binder writes before binding the pod: the
    allocation the scheduler chose (``status.allocation`` as the API serves it), or
    ``NO_OBJECT`` when the claim is already allocated and the pod only joins ``reservedFor``."""

    name: str
    allocation: msgspec.Raw = msgspec.field(default_factory=lambda: NO_OBJECT)


class BindItem(msgspec.Struct, kw_only=True, omit_defaults=True):
    namespace: str
    name: str
    uid: str = ""
    node: str
    # Annotations the bind writes on the pod (the Binding's own, which the API server copies
    # onto the pod): the GPU cards deviceshare chose.  Empty for nearly every pod; messages
    # without it decode as before.
    annotations: dict[str, str] = {}
    # The pod's ResourceClaims (DRA), written before the bind as kube-scheduler's PreBind does.
    # Empty for pods without claims; messages without it decode as before.
    claims: list[ClaimAllocation] = []


class Binds(msgspec.Struct, kw_only=True, tag="binds"):
    """A job's binds from one session, in one message: one work-queue message and one ack per
    job instead of per pod (per-message costs on the bus dominated at thousands of binds a
    session).  Binds are idempotent, so a redelivered message may repeat the ones already done."""

    v: int = VERSION
    id: str
    job: str = ""
    session: str = ""
    fence: int = 0  # the epoch of the scheduler leader that decided (executed only in that epoch)
    expires: float = 0.0  # unix seconds after which no binder may execute it (0: never)
    items: list[BindItem]


class Evict(msgspec.Struct, kw_only=True, tag="evict"):
    v: int = VERSION
    id: str
    namespace: str
    name: str
    uid: str = ""
    node: str = ""
    reason: str = ""
    job: str = ""
    session: str = ""
    fence: int = 0
    expires: float = 0.0
    # The job ("namespace/name") the eviction makes room for, when one alone waits on the node.
    for_job: str = ""
    group_uid: str = ""  # the uid of the victim's PodGroup (``job``), for its Evict Event


class PodGroupStatus(msgspec.Struct, kw_only=True, tag="podgroup", omit_defaults=True):
    v: int = VERSION
    id: str
    namespace: str
    name: str
    status: dict[str, Any]
    fence: int = 0
    uid: str = ""  # the PodGroup's metadata.uid, for the Events the binder writes about it ("": unknown)


class QueueStatus(msgspec.Struct, kw_only=True, tag="queue"):
    v: int = VERSION
    id: str
    name: str
    allocated: dict[str, str]
    fence: int = 0


class PodStatus(msgspec.Struct, kw_only=True, tag="podstatus", omit_defaults=True):
    """The pod's PodScheduled condition (and nominated node) explaining why it waits."""

    v: int = VERSION
    id: str
    namespace: str
    name: str
    reason: str
    message: str
    nominated_node: str = ""
    fence: int = 0
    uid: str = ""  # the pod's metadata.uid, for the Events the binder writes about it ("": unknown)


Decision = Binds | Evict | PodGroupStatus | QueueStatus | PodStatus

# done: executed (or found already done); conflict: the pod is on another node; gone: the object
# no longer exists; failed: refused or given up; stale: not executed, the decision's epoch is not
# the current one; expired: not executed, past its deadline.
Outcome = Literal["done", "conflict", "gone", "failed", "stale", "expired"]


class Result(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a binder did with one decision."""

    v: int = VERSION
    id: str
    kind: str  # the decision's tag
    namespace: str = ""
    name: str
    outcome: Outcome
    node: str = ""
    message: str = ""


class BadMessage(ValueError):
    """A message that cannot be used: malformed, or of a schema version this reader does not know."""


_encoder = msgspec.json.Encoder()
_delta_decoder = msgspec.json.Decoder(Delta)
_decision_decoder = msgspec.json.Decoder(Decision)
_result_decoder = msgspec.json.Decoder(Result)

T = TypeVar("T")


def encode(msg: Any) -> bytes:
    return _encoder.encode(msg)


def _checked(decoder: msgspec.json.Decoder[T], data: bytes) -> T:
    try:
        msg = decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise BadMessage(f"malformed message: {exc}") from None
    version = getattr(msg, "v", None)
    if version != VERSION:
        raise BadMessage(f"unknown schema version {version!r} (this reader knows {VERSION})")
    return msg


def decode_delta(data: bytes) -> Delta:
    return _checked(_delta_decoder, data)


def decode_decision(data: bytes) -> Decision:
    return _checked(_decision_decoder, data)


def decode_result(data: bytes) -> Result:
    return _checked(_result_decoder, data)
