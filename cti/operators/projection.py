"""Which payload fields of its inputs a query's output depends on: an adapter that can leave
the others out (``projects_fields``: a Parquet file's other columns) then neither reads them
into the payloads nor ships them.

Each operator says what it needs of its children's payloads given what is wanted of its own
(``OperatorUnit.input_fields``): an operator that keeps payloads passes the wish on, a window
needs only its aggregates' fields, a user function (``where``, ``select``, a join's
``select``, a user-defined aggregate) needs every field. The query's output wants every field
of its payloads, so only a query whose output payloads are computed (a window's aggregates,
and a ``group_by``'s key) reads fewer fields than its inputs have.

Events whose payloads differ only in fields left out are indistinguishable downstream, so where
an operator pairs an edge end with an open start by payload (``cti.forms.edges``), taking one such
start for another changes no output. Ingress does more with an edge start (its own adjusted
start), so an edge input stream is read whole (``cti.engine.route``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cti.operators import plan
from cti.operators.unit import Wanted


def union(a: Wanted, b: Wanted) -> Wanted:
    """Both wishes (None, every field, wins)."""
    return None if a is None or b is None else a | b


def leaves_read(root: plan.Node, wanted: Wanted, unit_of: Callable[[plan.Node], Any]
                ) -> dict[int, Wanted]:
    """The fields of each leaf of ``root`` (an ``Input`` or the ``GroupInput``, by ``id``)
    that the output needs, given the fields ``wanted`` of the output's payloads, as each
    node's unit (``unit_of``) says (``cti.operators.registry.inputs_read``)."""

    def read(sub: plan.Node, want: Wanted) -> dict[int, Wanted]:
        return leaves_read(sub, want, unit_of)

    need: dict[int, Wanted] = {}
    todo: list[tuple[plan.Node, Wanted]] = [(root, wanted)]
    while todo:
        node, want = todo.pop()
        if not node.children:
            need[id(node)] = union(need.get(id(node), frozenset()), want)
            continue
        todo += zip(node.children, unit_of(node).fields_read(node, want, read), strict=True)
    return need


def group_read(node: plan.GroupApply, wanted: Wanted,
               read: Callable[[plan.Node, Wanted], dict[int, Wanted]]) -> Wanted:
    """What a ``group_by`` needs of its input: what its body needs of the group's stream,
    and the group's field."""
    if not isinstance(node.field, str):
        return None  # a key function reads whole payloads
    need: Wanted = frozenset({node.field})
    for fields in read(node.body, wanted).values():
        need = union(need, fields)  # (the body's only leaves are the group's stream)
    return need


def aggregates_read(aggregates: dict[str, Any]) -> Wanted:
    """The fields a window's aggregates read: a built-in aggregate's field by name; a
    user-defined one (or a field given as a function) reads whole payloads."""
    from cti.operators.aggregates import Aggregate

    fields: set[str] = set()
    for a in aggregates.values():
        if not isinstance(a, Aggregate) or callable(a.field):
            return None
        if a.field is not None:
            fields.add(a.field)
    return frozenset(fields)
