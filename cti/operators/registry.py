"""Every operator, by the plan node type it runs (``OperatorUnit``). Adding an operator: its
plan node in ``cti.operators.plan``, its module ending with ``UNITS``, that module in the list
below, and its builder method on the stream API (``cti.query.methods``)."""

from __future__ import annotations

from cti.operators import (
    clip,
    count_window,
    group,
    join,
    merge,
    scan,
    snapshot,
    stateless,
    top_k,
    udo,
    window,
)
from cti.operators.projection import leaves_read
from cti.operators.unit import OperatorUnit, Wanted

UNITS: dict[type, OperatorUnit] = {
    unit.node: unit for module in (stateless, window, merge, join, group, clip, udo, scan,
                                   snapshot, count_window, top_k)
    for unit in module.UNITS}


def inputs_read(root: object, wanted: Wanted = None) -> dict[int, Wanted]:
    """The payload fields of each leaf of a plan (by ``id``) its output needs, given the
    fields ``wanted`` of the output's payloads (None: every field; ``projection``)."""
    return leaves_read(root, wanted, unit_of)


def unit_of(node: object) -> OperatorUnit:
    """The operator of a plan node; a node type without one is refused by name."""
    unit = UNITS.get(type(node))
    if unit is None:
        raise TypeError(f"no operator runs plan node {type(node).__name__} "
                        "(cti.operators.registry)")
    return unit
