"""The cluster mirror in Redis: one hash per kind, plus what it reflects and who wrote it.

Beside the objects the mirror keeps three facts (keys in ``lahar.wire.keys``):

* ``seq``: the CLUSTER stream sequence of the last delta it reflects;
* ``stream``: the identity of that stream.  Absent while the cache rebuilds the mirror or after
  it was lost (``FLUSHALL``): readers then wait, and never trust a mirror that names another
  stream than the live one;
* ``fence``: the epoch of the cache leader that last wrote it.  A write with an older epoch (a
  deposed leader still draining its queue) is refused, so it cannot overwrite newer objects.

Every write is one Lua script, so objects, sequence and fence change together and a reader
(one MULTI/EXEC) never sees objects without the sequence that covers them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import redis.asyncio as aioredis
import redis.exceptions

from lahar.wire.keys import KINDS, epochs_key, fence_key, field, objects_key, seq_key, stream_id_key
from lahar.wire.messages import Delta

# KEYS: seq, stream, fence, then one hash per kind.  ARGV: stream id, fence, seq, building (1/0),
# then per delta: kind index (1-based among the hashes), 'S' field value | 'D' field.
_APPLY = """
local held = tonumber(redis.call('GET', KEYS[3]) or '0')
local fence = tonumber(ARGV[2])
if fence < held then return redis.error_reply('FENCED mirror written by epoch ' .. held) end
local building = ARGV[4] == '1'
if not building and redis.call('GET', KEYS[2]) ~= ARGV[1] then
  return redis.error_reply('LOST the mirror does not reflect stream ' .. ARGV[1])
end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local seq = tonumber(ARGV[3])
if not building and seq < cur then
  return redis.error_reply('BEHIND sequence ' .. seq .. ' is below the mirror\\'s ' .. cur)
end
if fence > held then redis.call('SET', KEYS[3], ARGV[2]) end
local i = 5
while i <= #ARGV do
  local hash = KEYS[3 + tonumber(ARGV[i])]
  if ARGV[i + 1] == 'D' then
    redis.call('HDEL', hash, ARGV[i + 2])
    i = i + 3
  else
    redis.call('HSET', hash, ARGV[i + 2], ARGV[i + 3])
    i = i + 4
  end
end
if seq > cur then redis.call('SET', KEYS[1], ARGV[3]) end
return seq
"""

# KEYS: seq, stream, fence, then every hash.  ARGV: fence, seq to start from.
_RESET = """
local held = tonumber(redis.call('GET', KEYS[3]) or '0')
if tonumber(ARGV[1]) < held then return redis.error_reply('FENCED mirror written by epoch ' .. held) end
redis.call('SET', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2])
for i = 4, #KEYS do redis.call('DEL', KEYS[i]) end
return 1
"""

# KEYS: stream, fence.  ARGV: fence, stream id.
_SEAL = """
local held = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) < held then return redis.error_reply('FENCED mirror written by epoch ' .. held) end
redis.call('SET', KEYS[1], ARGV[2])
return 1
"""

# KEYS: epochs hash.  ARGV: role, epoch.  Keeps the highest epoch each role was granted.
_RECORD_EPOCH = """
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > held then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 1
"""


# The socket read size for a client that loads the whole mirror (a scheduler's restart reads
# ~150 MB at 50,000 pods): redis-py's 64 KiB default costs twice the CPU of 1 MiB reads there.
LOAD_READ_SIZE = 1 << 20


class MirrorError(Exception):
    """A write the mirror refused; the writer must stop or rebuild."""


class MirrorFenced(MirrorError):
    """A newer cache leader writes the mirror now: this one is deposed."""


class MirrorLost(MirrorError):
    """The mirror no longer reflects the stream this writer follows (flushed, rebuilt elsewhere,
    or the stream was replaced): it must be rebuilt."""


@dataclass(frozen=True, slots=True)
class MirrorState:
    seq: int
    stream: str  # the identity of the stream it reflects; "" when unidentified
    objects: dict[str, dict[str, bytes]]
    fence: int = 0  # the epoch of the cache leader that wrote it last


class Mirror:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.redis = client
        self.prefix = prefix
        self._apply = client.register_script(_APPLY)
        self._reset = client.register_script(_RESET)
        self._seal = client.register_script(_SEAL)
        self._record = client.register_script(_RECORD_EPOCH)
        self._meta_keys = [seq_key(prefix), stream_id_key(prefix), fence_key(prefix)]
        self._hashes = [objects_key(prefix, k) for k in KINDS]

    # -- writing (the cache leader) --------------------------------------------------------------
    async def apply(
        self, deltas: Sequence[Delta], seq: int, *, stream: str, fence: int, building: bool = False
    ) -> None:
        """Write a batch of deltas and the stream sequence of the last one, atomically; refused
        (``MirrorFenced``/``MirrorLost``) unless ``fence`` is current and, outside a rebuild, the
        mirror reflects ``stream`` up to at most ``seq``."""
        args: list[bytes | str | int] = [stream, fence, seq, 1 if building else 0]
        for d in deltas:
            index = KINDS.index(d.kind) + 1
            if d.op == "DELETED":
                args += [index, "D", d.key]
            elif d.has_object:
                args += [index, "S", d.key, bytes(d.obj)]
        await self._run(self._apply, self._meta_keys + self._hashes, args)

    async def reset(self, *, fence: int, seq: int) -> None:
        """Start a rebuild: the mirror becomes unidentified and empty, following from ``seq``."""
        await self._run(self._reset, self._meta_keys + self._hashes, [fence, seq])

    async def seal(self, *, stream: str, fence: int) -> None:
        """End a rebuild: the mirror now reflects ``stream``; readers may load it."""
        await self._run(self._seal, [stream_id_key(self.prefix), fence_key(self.prefix)], [fence, stream])

    async def _run(self, script: object, keys: list[str], args: Sequence[bytes | str | int]) -> None:
        try:
            await script(keys=keys, args=args)  # type: ignore[operator]
        except redis.exceptions.ResponseError as exc:
            text = str(exc)
            if text.startswith("FENCED"):
                raise MirrorFenced(text) from None
            if text.startswith(("LOST", "BEHIND")):
                raise MirrorLost(text) from None
            raise

    # -- epochs (leaders of every role) ------------------------------------------------------------
    async def record_epoch(self, role: str, epoch: int) -> None:
        """Remember that ``role`` was granted ``epoch`` (only a higher one replaces it)."""
        await self._record(keys=[epochs_key(self.prefix)], args=[role, epoch])

    async def epoch_floor(self) -> int:
        """The highest epoch ever granted to any role: a recreated lease bucket starts above it."""
        held = await self.redis.hvals(epochs_key(self.prefix))
        return max((int(v) for v in held), default=0)

    # -- reading ---------------------------------------------------------------------------------
    async def load(self, kinds: Iterable[str] = KINDS) -> MirrorState:
        """Every object of the given kinds, with the sequence and stream they reflect, in one
        transaction."""
        kinds = list(kinds)
        pipe = self.redis.pipeline(transaction=True)
        pipe.get(seq_key(self.prefix))
        pipe.get(stream_id_key(self.prefix))
        pipe.get(fence_key(self.prefix))
        for kind in kinds:
            pipe.hgetall(objects_key(self.prefix, kind))
        got = await pipe.execute()
        objects = {kind: _keyed(raw) for kind, raw in zip(kinds, got[3:], strict=True)}
        return MirrorState(int(got[0] or 0), _text(got[1] or b""), objects, int(got[2] or 0))

    async def identity(self) -> tuple[str, int]:
        """The stream the mirror reflects ("" when unidentified) and its sequence."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.get(stream_id_key(self.prefix))
        pipe.get(seq_key(self.prefix))
        stream, seq = await pipe.execute()
        return _text(stream or b""), int(seq or 0)

    async def seq(self) -> int:
        return int(await self.redis.get(seq_key(self.prefix)) or 0)

    async def get(self, kind: str, namespace: str, name: str) -> bytes | None:
        raw = await self.redis.hget(objects_key(self.prefix, kind), field(namespace, name))
        return raw.encode() if isinstance(raw, str) else raw

    async def keys(self, kind: str) -> set[str]:
        raw = await self.redis.hkeys(objects_key(self.prefix, kind))
        return {_text(k) for k in raw}


def _keyed(raw: dict[bytes, bytes]) -> dict[str, bytes]:
    """A hash's fields as text; the decoding runs in C (a restart reads 50,000 pods' keys)."""
    if not raw:
        return {}
    text = bytes.decode if isinstance(next(iter(raw)), bytes) else str
    return dict(zip(map(text, raw), raw.values(), strict=True))


def _text(value: bytes | str) -> str:
    return value if isinstance(value, str) else value.decode()
