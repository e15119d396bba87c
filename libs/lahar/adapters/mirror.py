"""The cluster mirror in Redis: one hash per kind, plus the stream sequence it reflects.

Writes go in one MULTI/EXEC per batch so a reader never sees objects without the sequence that
covers them.  The sequence only moves forward (a Lua compare in the same transaction), so a
cache replica that lost leadership cannot wind it back.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis.asyncio as aioredis

from lahar.wire.keys import KINDS, field, objects_key, seq_key
from lahar.wire.messages import Delta

# Set the sequence only if it grows: KEYS[1] = seq key, ARGV[1] = new sequence.
_ADVANCE = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local new = tonumber(ARGV[1])
if new > cur then redis.call('SET', KEYS[1], ARGV[1]) return new end
return cur
"""


class Mirror:
    def __init__(self, client: aioredis.Redis, prefix: str) -> None:
        self.redis = client
        self.prefix = prefix
        self._advance = client.register_script(_ADVANCE)

    async def apply(self, deltas: Iterable[Delta], seq: int) -> None:
        """Write a batch of deltas and the stream sequence of the last one, atomically."""
        pipe = self.redis.pipeline(transaction=True)
        for d in deltas:
            key = objects_key(self.prefix, d.kind)
            if d.op == "DELETED":
                pipe.hdel(key, d.key)
            elif d.has_object:
                pipe.hset(key, d.key, bytes(d.obj))
        await self._advance(keys=[seq_key(self.prefix)], args=[seq], client=pipe)
        await pipe.execute()

    async def load(self, kinds: Iterable[str] = KINDS) -> tuple[int, dict[str, dict[str, bytes]]]:
        """Every object of the given kinds and the sequence they reflect, in one transaction."""
        kinds = list(kinds)
        pipe = self.redis.pipeline(transaction=True)
        pipe.get(seq_key(self.prefix))
        for kind in kinds:
            pipe.hgetall(objects_key(self.prefix, kind))
        got = await pipe.execute()
        seq = int(got[0] or 0)
        out = {kind: {k.decode(): v for k, v in raw.items()} for kind, raw in zip(kinds, got[1:], strict=True)}
        return seq, out

    async def seq(self) -> int:
        return int(await self.redis.get(seq_key(self.prefix)) or 0)

    async def get(self, kind: str, namespace: str, name: str) -> bytes | None:
        raw = await self.redis.hget(objects_key(self.prefix, kind), field(namespace, name))
        return raw.encode() if isinstance(raw, str) else raw

    async def keys(self, kind: str) -> set[str]:
        raw = await self.redis.hkeys(objects_key(self.prefix, kind))
        return {k if isinstance(k, str) else k.decode() for k in raw}
