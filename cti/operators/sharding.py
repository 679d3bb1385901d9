"""Which payload field may spread a query's events over shards (Spark tasks).

A shard holds the complete state of some keys, so a plan can be sharded by a field only where
every stateful operator keeps its state per value of that field:

- ``group_by(f).apply(...)`` whose input reaches the plan's inputs through operators that keep
  the payload (where, union, lifetime operators): each input is sharded by ``f``;
- a ``join`` / ``left_anti_semi_join`` on keys, whose sides reach their inputs the same way:
  left inputs by the left key, right inputs by the right key;

with only per-event operators above it. Anything else (a window outside group_by, a join
without keys, two different keys) runs in one shard: correct, not spread. CTIs go to every
shard, so every shard computes the same output CTIs.
"""

from __future__ import annotations

from typing import Any

from cti.operators import plan

# Operators that keep each event's payload as it is (so a payload field keeps its value).
_KEEPS_PAYLOAD = (plan.Where, plan.ShiftEventTime, plan.ClipEventDuration,
                  plan.AlterEventDuration, plan.AlterEventLifetime, plan.ToPointEventStream,
                  plan.Union)
_PER_EVENT = (plan.Where, plan.Select, plan.ShiftEventTime, plan.AlterEventDuration,
              plan.AlterEventLifetime, plan.ToPointEventStream)


def _payload_paths(node: plan.Node) -> list[Any] | None:
    """The input streams below ``node`` if every path to them keeps payloads, else None."""
    if isinstance(node, plan.Input):
        return [node.stream]
    if isinstance(node, _KEEPS_PAYLOAD):
        found: list[Any] = []
        for child in node.children:
            below = _payload_paths(child)
            if below is None:
                return None
            found += below
        return found
    return None


def shard_fields(root: plan.Node, inputs: list[Any]) -> list[str | None] | None:
    """Per input (by position in ``inputs``) the field to shard it by, or None: one shard."""
    node = root
    while isinstance(node, _PER_EVENT):
        node = node.source
    assigned: dict[int, str] = {}

    def assign(streams: list[Any] | None, field: str | None) -> bool:
        if streams is None or field is None:
            return False
        for s in streams:
            i = next(k for k, x in enumerate(inputs) if x is s)
            if assigned.setdefault(i, field) != field:
                return False
        return True

    if isinstance(node, plan.GroupApply):
        ok = assign(_payload_paths(node.source), node.field)
    elif isinstance(node, plan.Join | plan.AntiSemiJoin):
        ok = (assign(_payload_paths(node.left), node.left_key)
              and assign(_payload_paths(node.right), node.right_key))
    else:
        ok = False
    if not ok or len(assigned) != len(inputs):
        return None
    return [assigned[i] for i in range(len(inputs))]
