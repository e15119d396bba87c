"""How deeply a JSON body nests, measured before anything decodes it.

msgspec (like every Python JSON decoder) recurses per level and raises ``RecursionError`` at
whatever depth the interpreter's stack has left, and the rules walk objects recursively too.
So the service refuses a body nested deeper than ``MAX_DEPTH`` up front, with a 400 that says
so.  Kubernetes objects nest a few dozen levels at most (a Job's pod template is about 15).
"""

from __future__ import annotations

import re
from itertools import accumulate

MAX_DEPTH = 100

# A JSON string, escapes included: brackets inside strings do not nest.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def too_deep(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether any value of ``body`` nests deeper than ``limit`` (stops at the first one)."""
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    return any(level > limit for level in accumulate(map(_STEP.__getitem__, brackets)))
