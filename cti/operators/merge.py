"""The output CTIs where several streams meet (union, join, anti-semi-join), and the union.

SPEC 8: the output time is the minimum of the inputs' latest CTIs. So that the output does not
depend on how the inputs interleave, the operator emits every CTI value of any input that is at
most that minimum, in increasing order (docs/operators.md, "Release and order").
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

from cti.forms.frame import Chunk
from cti.operators import plan
from cti.operators.unit import OperatorUnit, both_fields, same_shape
from cti.time import MIN_TIME


def new_state(n: int) -> dict[str, Any]:
    return {"latest": [MIN_TIME] * n, "pending": [], "out": MIN_TIME}


def step(state: dict[str, Any], ctis: Sequence[Sequence[int]]) -> list[int]:
    """Take each input's new CTIs; return the output CTIs they release."""
    pending = state["pending"]
    for i, values in enumerate(ctis):
        if values:
            state["latest"][i] = values[-1]
        for v in values:
            if v > state["out"]:
                j = bisect.bisect_left(pending, v)
                if j == len(pending) or pending[j] != v:
                    pending.insert(j, v)
    bound = min(state["latest"])
    k = bisect.bisect_right(pending, bound)
    out, state["pending"] = pending[:k], pending[k:]
    if out:
        state["out"] = out[-1]
    return out


def union(node: plan.Union, inputs: list[Chunk], state: dict[str, Any], machine: Any) -> Chunk:
    """Both inputs' events as they are (and their typed columns, where they agree); the
    output CTIs of ``step``."""
    left, right = inputs
    return Chunk.stacked(inputs, step(state, [left.ctis, right.ctis]))


UNITS = [OperatorUnit(plan.Union, union, new_state=lambda node: new_state(2), keeps_payload=True,
                      output_fields=lambda node: both_fields(node.left, node.right),
                      output_shape=lambda node: same_shape(node.left, node.right))]
