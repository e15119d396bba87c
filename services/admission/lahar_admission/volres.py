"""The pieces of Volcano's ``api.Resource`` that queue admission prints and compares."""

from __future__ import annotations

from collections.abc import Mapping

from lahar.api.quantity import Quantity
from lahar.api.resource import CPU, MEMORY, Resource
from lahar_admission.goquantity import canonical, go_float2

__all__ = ["Resource", "format_for", "less_partly", "new_resource", "volcano_string"]


def new_resource(rl: Mapping[str, Quantity] | None) -> Resource:
    return Resource.from_list(rl or {})


def less_partly(left: Resource, right: Resource) -> bool:
    """Volcano's ``LessPartly(rr, Zero)``: some dimension of ``left`` is strictly below ``right``
    (a dimension missing on either side counts as zero)."""
    if left.milli_cpu < right.milli_cpu or left.memory < right.memory:
        return True
    names = set(left.scalars) | set(right.scalars)
    return any(left.scalars.get(n, 0.0) < right.scalars.get(n, 0.0) for n in names)


def volcano_string(r: Resource) -> str:
    """``Resource.String()``: cpu and memory first, then scalars (sorted here; Go's order is random)."""
    parts = [f"cpu {go_float2(r.milli_cpu)}", f"memory {go_float2(r.memory)}"]
    parts.extend(f"{name} {go_float2(r.scalars[name])}" for name in sorted(r.scalars))
    return ", ".join(parts)


def format_for(name: str, amount: float) -> str:
    """formatResourceWithType: cpu as a milli quantity, memory in binary units, others ``%.2f``."""
    from fractions import Fraction

    if name == CPU:
        return canonical(Fraction(int(amount), 1000), "decimal")
    if name == MEMORY:
        return canonical(Fraction(int(amount)), "binary")
    return go_float2(amount)
