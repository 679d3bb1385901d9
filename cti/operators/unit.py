"""``OperatorUnit``: what the engine needs of one operator, declared by the operator's module.

An operator's module (``stateless``, ``window``, ``join``, ``merge``, ``group``) holds its
step over columnar chunks, its state (made by ``new_state``, purged by the step itself as the
CTIs complete what it holds) and its output-CTI rule (SPEC 8, in the step and the module's
docstring); it ends with its ``UNITS``. ``cti.operators.registry`` collects them by plan node
type: the query machine runs nodes through it and the sharding rule reads it. The plan nodes
themselves are declared in ``cti.operators.plan`` (the stream API builds them there, with no
engine import).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from cti.events import EventShape
from cti.forms.schema import Fields, field_names

Wanted = frozenset[str] | None  # payload fields a consumer needs (None: every field)


@attrs.frozen
class OperatorUnit:
    """One plan node type's operator.

    ``step(node, inputs, state, machine)``: the output chunk of one step, from the chunks of
    the node's children (in ``node.children`` order), the node's state (changed in place) and
    the running ``QueryMachine`` (for what only it knows: a ``group_by``'s body, the field a
    window under a ``group_by`` writes). ``new_state(node)``: the node's state at the start
    (None: stateless). ``resume(node, state)``: a state read from a checkpoint (perhaps
    written by an earlier release, in an earlier form) as this release keeps it.
    ``keeps_payload``: every output event carries its input event's payload unchanged, so a
    payload field keeps its value through it (sharding). ``per_event``: it looks at one
    event at a time, with no state, so it may sit above the operator that spreads a query.
    ``spreads(node)``: for an operator that keeps its state per value of a payload field,
    each child with the field it is keyed by (None: no such field, one shard).
    ``output_fields(node)``: the payload fields of its output where known when the query is
    built (None: unknown); by default its input's (``node.source.fields``).
    ``data_ctis(node)``: whether its output CTIs depend on the events it holds (a clip by another
    stream; a snapshot window that clips to its windows), so shards holding different keys
    would disagree on them: the shards' CTIs are then combined after them, where the plan
    allows it (``sharding``, ``cti.engine.hold``), else the query runs in one shard.
    ``tags``: it keeps each output CTI's tag, the input CTI it answers (``Chunk.tags``; one
    with ``data_ctis`` tags each CTI with the one it answers), so a plan with ``data_ctis``
    can be spread (``sharding``).
    ``output_shape(node)``: its output's ``EventShape`` from its inputs' (None: mixed); by
    default its input's (``node.source.shape``). ``input_fields(node, wanted, read)``: for
    each child, the payload fields of its events that the operator's output needs, given the
    fields ``wanted`` of the output's payloads (None: all fields, the default for both); by
    default each child's ``wanted`` where the operator keeps payloads, else all. ``read(root,
    wanted)`` gives the same of a plan's leaves (``registry.inputs_read``), for an operator
    with a plan of its own (a ``group_by``'s body).
    """

    node: type
    step: Callable[[Any, list[Any], Any, Any], Any]
    new_state: Callable[[Any], Any] | None = None
    resume: Callable[[Any, Any], Any] | None = None
    keeps_payload: bool = False
    per_event: bool = False
    spreads: Callable[[Any], tuple[tuple[Any, Any], ...]] | None = None
    output_fields: Callable[[Any], Fields] | None = None
    output_shape: Callable[[Any], EventShape | None] | None = None
    input_fields: Callable[[Any, Wanted, Any], tuple[Wanted, ...]] | None = None
    data_ctis: Callable[[Any], bool] | None = None
    tags: bool = False

    def fields_of(self, node: Any) -> Fields:
        """``output_fields(node)``, or the input's fields."""
        return self.output_fields(node) if self.output_fields is not None else \
            node.source.fields

    def fields_read(self, node: Any, wanted: Wanted, read: Any) -> tuple[Wanted, ...]:
        """``input_fields(node, wanted, read)``, or ``wanted`` for each child where the
        operator keeps payloads (else all fields)."""
        if self.input_fields is not None:
            return self.input_fields(node, wanted, read)
        return tuple(wanted if self.keeps_payload else None for _ in node.children)

    def shape_of(self, node: Any) -> EventShape | None:
        """``output_shape(node)``, or the input's shape."""
        return self.output_shape(node) if self.output_shape is not None else node.source.shape


def same_shape(a: Any, b: Any) -> EventShape | None:
    """Two nodes' output shape together: theirs if they agree, else mixed (None)."""
    return a.shape if a.shape == b.shape else None


def both_fields(a: Any, b: Any) -> Fields:
    """The fields of two nodes' outputs together (None if either is unknown)."""
    return None if a.fields is None or b.fields is None else field_names([*a.fields, *b.fields])
