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
time-sensitive operator over a count window, a clip by another stream). Such a plan is spread
where each shard's output CTIs carry *tags* that every shard gives alike (``Chunk.tags``),
and the runtime combines the shards' levels per tag after them (``cti.engine.hold``: the
query's CTI at a tag is the least of the shards'). A CTI every shard computes alike (an
input's, or an operator's over such CTIs: a union's, a join's, a window's) is its own tag; an
operator that answers such CTIs with CTIs that depend on its events tags each with the CTI it
answers; above it, every operator must keep the tags (``OperatorUnit.tags``) and read one
input: where two streams meet, one CTI of one input releases the other's pending CTIs, whose
values differ over the shards, so the output would carry CTIs that no tag names.
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


def _common_ctis(node: plan.Node, group_source: bool = True) -> bool | None:
    """Whether every shard computes ``node``'s output CTIs alike (each its own tag), or None
    where its shards' CTIs cannot be combined by tags: an operator over CTIs that differ over
    the shards that does not keep their tags or reads two inputs, or an operator with
    ``data_ctis`` that does not tag its CTIs. ``group_source``: the same of the enclosing
    ``group_by``'s input (a ``GroupInput`` stands for it)."""
    if isinstance(node, plan.Input):
        return True
    if isinstance(node, plan.GroupInput):
        return group_source
    below = [_common_ctis(c, group_source) for c in node.children]
    if any(b is None for b in below):
        return None
    if isinstance(node, plan.GroupApply):
        return _common_ctis(node.body, below[0])
    common, own = all(below), _data_ctis(node)
    if not common and not (_unit_tags(node) and len(below) == 1):
        return None
    if own and not _unit_tags(node):
        return None
    return common and not own


def _unit_tags(node: plan.Node) -> bool:
    """Whether ``node``'s operator (and a window operator's window) keeps its CTIs' tags."""
    unit = UNITS.get(type(node))
    inner = node.inner if isinstance(node, plan.WindowOperator) else None
    return unit is not None and unit.tags and (inner is None or _unit_tags(inner))


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
    if data_ctis(root) and _common_ctis(root) is None:
        # Shards holding different keys give different CTIs, combined by their tags, which
        # only such a plan gives (the module's docstring): else one shard.
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
