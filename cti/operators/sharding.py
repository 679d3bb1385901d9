"""Which payload field may spread a query's events over shards (Spark tasks).

A shard holds the complete state of some keys, so a plan can be sharded by a field only where
every stateful operator keeps its state per value of that field:

- ``group_by(f).apply(...)`` (or ``group_by(key=fn)``) whose input reaches the plan's inputs
  through operators that keep the payload (where, union, lifetime operators): each input is
  sharded by ``f`` (by ``fn(payload)``, computed in the source);
- a ``join`` / ``left_anti_semi_join`` on keys, whose sides reach their inputs the same way:
  left inputs by the left key, right inputs by the right key;

with only per-event operators above it. What each operator does here (``keeps_payload``,
``per_event``, ``spreads``) its unit declares (``cti.operators.registry``). Anything else (a
window outside group_by, a join without keys, two different keys) runs in one shard: correct,
not spread. CTIs go to every shard, so every shard computes the same output CTIs, except
where an operator's output CTIs depend on the events it holds (``OperatorUnit.data_ctis``: a
snapshot window that clips to its windows, TopK or a user-defined operator over one, a
time-sensitive operator over a count window, a clip by another stream). Such a plan is
spread only where it reads ONE input stream and each of its operators keeps its CTIs' tags
(``OperatorUnit.tags``): each shard's output CTIs then carry the input CTI they answer, and
the runtime combines the shards' levels after them (``cti.engine.hold``: the query's CTI at
an input CTI is the least of the shards'). Two streams meeting (a clip by another stream, a
union, a join) could make one input CTI answer several output CTIs, which a tag per CTI
cannot say: such a plan runs in one shard.
"""

from __future__ import annotations

from typing import Any

from cti.operators import plan
from cti.operators.registry import UNITS


def _unit_says(node: plan.Node, what: str) -> bool:
    """Whether ``node``'s operator declares ``what`` (``keeps_payload``, ``per_event``)."""
    unit = UNITS.get(type(node))
    return unit is not None and getattr(unit, what)


def _data_ctis(node: plan.Node) -> bool:
    """Whether ``node``'s output CTIs depend on the events it holds (``OperatorUnit.data_ctis``);
    a window operator's (``apply_operator``) are its inner window's."""
    unit = UNITS.get(type(node))
    if unit is not None and unit.data_ctis is not None and unit.data_ctis(node):
        return True
    return isinstance(node, plan.WindowOperator) and _data_ctis(node.inner)


def data_ctis(root: plan.Node) -> bool:
    """Whether a plan has an operator whose output CTIs depend on the events it holds (its
    shards' CTIs must be combined: ``cti.engine.hold``)."""
    return any(_data_ctis(n) for n in plan.walk(root))


def _keeps_tags(node: plan.Node) -> bool:
    """Whether ``node``'s operator (and a window operator's window) keeps its CTIs' tags."""
    if isinstance(node, plan.Input | plan.GroupInput):
        return True
    unit = UNITS.get(type(node))
    inner = node.inner if isinstance(node, plan.WindowOperator) else None
    return unit is not None and unit.tags and (inner is None or _keeps_tags(inner))


def _payload_paths(node: plan.Node) -> list[Any] | None:
    """The input streams below ``node`` if every path to them keeps payloads, else None."""
    if isinstance(node, plan.Input):
        return [node.stream]
    if _unit_says(node, "keeps_payload"):
        found: list[Any] = []
        for child in node.children:
            below = _payload_paths(child)
            if below is None:
                return None
            found += below
        return found
    return None


def shard_fields(root: plan.Node, inputs: list[Any]) -> list[Any] | None:
    """Per input (by position in ``inputs``) the field (or ``group_by(key=fn)``'s function)
    to shard it by, or None: one shard."""
    if data_ctis(root) and (len(inputs) != 1 or not all(
            _keeps_tags(n) for n in plan.walk(root))):
        # Shards holding different keys give different CTIs, combined by their tags, which
        # only a single-input plan of operators that keep them gives: else one shard.
        return None
    node = root
    while _unit_says(node, "per_event"):
        node = node.source
    assigned: dict[int, Any] = {}

    def assign(streams: list[Any] | None, field: Any) -> bool:
        if streams is None or field is None:
            return False
        for s in streams:
            i = next(k for k, x in enumerate(inputs) if x is s)
            if assigned.setdefault(i, field) != field:
                return False
        return True

    unit = UNITS.get(type(node))
    ok = unit is not None and unit.spreads is not None and all(
        assign(_payload_paths(child), field) for child, field in unit.spreads(node))
    if not ok or len(assigned) != len(inputs):
        return None
    return [assigned[i] for i in range(len(inputs))]
