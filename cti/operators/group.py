"""``group_by(field).apply(body)``: the body runs once for all groups, each event keyed by its
group's value of ``field`` (``QueryMachine.group_apply``: the body is a plan of its own, run by
the machine). Its state is its body's operators'; its output CTIs are the body's. It keeps its
state per value of ``field`` (or of its key function), so it spreads a query over shards by
that value.
"""

from __future__ import annotations

from typing import Any

from cti.forms.frame import Chunk
from cti.forms.schema import Fields, field_names
from cti.operators import plan
from cti.operators.projection import group_read
from cti.operators.unit import OperatorUnit


def group_apply(node: plan.GroupApply, inputs: list[Chunk], state: Any, machine: Any) -> Chunk:
    return machine.group_apply(node, inputs[0])


def _fields(node: plan.GroupApply) -> Fields:
    """The body's output fields and the group's field (put back into each payload)."""
    return None if node.body.fields is None else field_names([*node.body.fields,
                                                                        node.key_name])


def _spreads(node: plan.GroupApply) -> tuple[tuple[plan.Node, Any], ...]:
    """Spread by the group's field, or by its key function's value (the source computes it
    from each payload: ``cti.engine.batch.computed_key_shards``)."""
    return ((node.source, node.field),)


UNITS = [OperatorUnit(plan.GroupApply, group_apply,
                      spreads=_spreads, output_fields=_fields,
                      output_shape=lambda node: node.body.shape,
                      input_fields=lambda node, wanted, read: (group_read(node, wanted, read),),
                      tags=True)]
