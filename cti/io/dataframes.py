"""Spark DataFrames as input: a stream bound to a (streaming) DataFrame's columns.

``CepStream.from_dataframe(name, df, shape, start=..., ...)`` binds a stream to a DataFrame
with a ``DataFrameInputConfig`` naming its columns' roles. The conversion to cti's input rows
is Spark SQL (``input_rows``), so it runs in the JVM, column-wise:

- ``start`` (and ``end`` for intervals and edge ends; ``edge`` holds ``start``/``end`` for
  edges): timestamp columns (exact to the microsecond, the tick) or integer ticks;
- ``arrival``: the time the row arrived (a timestamp or integer ticks), for the merge with
  the group's other streams and for event-ordering policies; ``partition``: the input
  partition (event-ordering policies);
- ``order_by``: the columns that, after ``arrival``, give the rows' order (Kafka: partition and
  offset; the rate source: value);
- the payload: the ``payload`` columns, by default every column not named above, as canonical
  JSON (sorted keys, nulls kept; timestamps as Spark's ``to_json`` writes them).

A row that is not an event (a null time, an interval whose end is not after its start, an
edge kind that is neither ``start`` nor ``end``) becomes bad input naming the stream, the column
and the rule, raised or dead-lettered as ``on_bad_input`` says.

A streaming DataFrame runs on ``SparkRuntime`` only (``cti.runtime.spark.dataframes``);
``LocalRuntime`` reads a batch (non-streaming) DataFrame as a bounded input, in the same order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs

from cti.adapters import AdapterItem, Arriving, InvalidInput
from cti.errors import InvalidSettingsError
from cti.events import Cti, EventShape, item_from_kind
from cti.forms.rows import INVALID
from cti.time import MIN_TIME

ORDER = "order:"  # prefix of the sort-key columns of ``input_rows``
_TIME_TYPES = ("timestamp", "bigint", "int", "smallint", "tinyint")


def _names(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.frozen(eq=False)
class DataFrameInputConfig:
    """Which columns of ``frame`` play which role (see the module doc)."""

    frame: Any
    start: str
    end: str | None = None
    edge: str | None = None
    arrival: str | None = None
    order_by: tuple[str, ...] = attrs.field(default=(), converter=_names)
    partition: str | None = None
    payload: tuple[str, ...] | None = attrs.field(
        default=None, converter=lambda v: None if v is None else _names(v))

    @property
    def roles(self) -> dict[str, str]:
        """Role -> column, for the columns given."""
        named = {"start": self.start, "end": self.end, "edge": self.edge,
                 "arrival": self.arrival, "partition": self.partition}
        return {role: col for role, col in named.items() if col is not None}

    @property
    def payload_columns(self) -> list[str]:
        if self.payload is not None:
            return list(self.payload)
        taken = {*self.roles.values(), *self.order_by}
        return [c for c in self.frame.columns if c not in taken]

    @property
    def streaming(self) -> bool:
        return bool(self.frame.isStreaming)

    def check(self, name: str, shape: EventShape) -> None:
        """Refuse what cannot be read, naming the stream and the column."""
        if not hasattr(self.frame, "isStreaming") or not hasattr(self.frame, "schema"):
            raise InvalidSettingsError(f"stream {name!r}: from_dataframe needs a Spark "
                                       f"DataFrame, got {type(self.frame).__name__}")
        types = {f.name: f.dataType.simpleString() for f in self.frame.schema.fields}
        for role, col in [*self.roles.items(), *(("order_by", c) for c in self.order_by),
                          *(("payload", c) for c in self.payload or ())]:
            if not isinstance(col, str) or col not in types:
                raise InvalidSettingsError(
                    f"stream {name!r}: {role} column {col!r} is not a column of the DataFrame "
                    f"(it has {sorted(types)})")
        for role in ("start", "end", "arrival"):
            col = self.roles.get(role)
            if col is not None and types[col] not in _TIME_TYPES:
                raise InvalidSettingsError(
                    f"stream {name!r}: {role} column {col!r} is {types[col]}; give a timestamp "
                    "or integer ticks (microseconds since the Unix epoch): cast or parse it "
                    "first, e.g. with to_timestamp")
        if shape is EventShape.INTERVAL and self.end is None:
            raise InvalidSettingsError(f"stream {name!r}: an interval input needs end=")
        if shape is EventShape.EDGE and (self.end is None or self.edge is None):
            raise InvalidSettingsError(f"stream {name!r}: an edge input needs edge= (the "
                                       "column holding 'start' or 'end') and end=")
        if shape is not EventShape.EDGE and self.edge is not None:
            raise InvalidSettingsError(f"stream {name!r}: edge= is for edge streams")
        if self.arrival is None and not self.order_by:
            raise InvalidSettingsError(
                f"stream {name!r}: name the column(s) that give the input's order: arrival= "
                "(the time each row arrived) and/or order_by= (e.g. a Kafka source's "
                "['partition', 'offset'], the rate source's ['value']), so that the result "
                "does not depend on how the input is cut into micro-batches")
        if self.partition is not None and self.arrival is None:
            raise InvalidSettingsError(
                f"stream {name!r}: partition= needs arrival= (a partition travels with an "
                "arrival time)")


def _ticks(col: str, typ: str) -> str:
    quoted = f"`{col.replace('`', '``')}`"
    return f"unix_micros({quoted})" if typ == "timestamp" else f"CAST({quoted} AS BIGINT)"


def input_rows(config: DataFrameInputConfig, name: str, shape: EventShape, stream: int) -> Any:
    """The DataFrame as cti input rows (``IN_SCHEMA`` columns, ``seq`` -1: numbered where the
    stream's micro-batch meets, in order), and its sort key: ``order:arrival`` (when given),
    ``order:0``... (``order_by``) and ``order:hash``, a hash of the row that orders rows the
    key leaves tied the same way on every shard and in every run."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType.simpleString() for f in config.frame.schema.fields}
    q = _quote
    t = {role: _ticks(col, types[col]) for role, col in config.roles.items()
         if role in ("start", "end", "arrival")}
    prefix = f"stream {name!r}: "
    if shape is EventShape.POINT:
        kind, checks = "'point'", [(f"{t['start']} IS NULL", f"{config.start} is null (rule: no "
                                    "null timestamps)")]
    elif shape is EventShape.INTERVAL:
        kind = "'interval'"
        checks = [(f"{t['start']} IS NULL", f"{config.start} is null (rule: no null timestamps)"),
                  (f"{t['end']} IS NULL", f"{config.end} is null (rule: no null timestamps)"),
                  (f"{t['end']} <= {t['start']}", f"{config.end} is not after {config.start} "
                   "(rule: an interval ends after it starts)")]
    else:
        edge = f"lower(trim(CAST({q(config.edge)} AS STRING)))"
        kind = f"CASE {edge} WHEN 'start' THEN 'edge_start' WHEN 'end' THEN 'edge_end' END"
        checks = [(f"({kind}) IS NULL", f"{config.edge} is not 'start' or 'end' (rule: edge "
                   "type)"),
                  (f"{t['start']} IS NULL", f"{config.start} is null (rule: no null timestamps)"),
                  (f"({kind}) = 'edge_end' AND {t['end']} IS NULL",
                   f"{config.end} of an edge end is null (rule: no null timestamps)"),
                  (f"({kind}) = 'edge_end' AND {t['end']} <= {t['start']}",
                   f"{config.end} is not after {config.start} (rule: an edge ends after it "
                   "starts)")]
    error = "CASE " + " ".join(
        f"WHEN {cond} THEN {_sql_text(prefix + why)}" for cond, why in checks) + " END"
    fields = ", ".join(f"{_sql_text(c)}, {q(c)}" for c in sorted(config.payload_columns))
    payload = (f"to_json(named_struct({fields}), map('ignoreNullFields', 'false'))"
               if fields else "'{}'")
    raw = "to_json(struct(*), map('ignoreNullFields', 'false'))"
    end = (f"CASE WHEN ({kind}) IN ('interval', 'edge_end') THEN {t['end']} END"
           if "end" in t else "NULL")
    null = str(MIN_TIME)
    exprs = {
        "stream": f"CAST({stream} AS INT)",
        "seq": "CAST(-1 AS BIGINT)",
        "arrival": f"IF(__error IS NULL, coalesce({t.get('arrival', 'NULL')}, {null}), {null})",
        "kind": f"IF(__error IS NULL, {kind}, '{INVALID}')",
        "start": f"IF(__error IS NULL, {t['start']}, {null})",
        "end": f"IF(__error IS NULL, coalesce({end}, {null}), {null})",
        "payload": f"IF(__error IS NULL, {payload}, __raw)",
        "error": "__error",
        "partition": (f"CAST({q(config.partition)} AS STRING)" if config.partition
                      else "CAST(NULL AS STRING)"),
    }
    order = {}
    if "arrival" in t:
        order[ORDER + "arrival"] = f"coalesce({t['arrival']}, {null})"
    order |= {f"{ORDER}{k}": q(c) for k, c in enumerate(config.order_by)}
    order[ORDER + "hash"] = "xxhash64(__raw)"
    frame = config.frame.select("*", F.expr(f"{error} AS __error"), F.expr(f"{raw} AS __raw"))
    return frame.select(*(F.expr(f"{e} AS `{c}`") for c, e in {**exprs, **order}.items()))


def _quote(col: str) -> str:
    return f"`{col.replace('`', '``')}`"


def _sql_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


class DataFrameInputAdapter:
    """A batch DataFrame as a bounded input, in the order of its sort key (LocalRuntime)."""

    def __init__(self, config: DataFrameInputConfig, shape: EventShape, name: str) -> None:
        if config.streaming:
            raise InvalidSettingsError(
                f"stream {name!r} reads a streaming DataFrame: run it on SparkRuntime "
                "(LocalRuntime reads batch DataFrames only)")
        rows = input_rows(config, name, shape, 0).toArrow()
        self.rows = rows.take(key_order(rows)).to_pylist()

    def latest_offset(self) -> int:
        return len(self.rows)

    def read(self, start: int, end: int) -> Iterator[AdapterItem]:
        for r in self.rows[start:end]:
            if r["kind"] == INVALID:
                yield InvalidInput(r["error"], r["payload"])
                continue
            item = Cti(r["start"]) if r["kind"] == "cti" else item_from_kind(
                r["kind"], r["start"], None if r["end"] == MIN_TIME else r["end"],
                json.loads(r["payload"]))
            yield item if r["arrival"] == MIN_TIME else Arriving(item, r["arrival"],
                                                                 r["partition"])

    def is_complete(self) -> bool:
        return True


def key_order(rows: Any) -> Any:
    """The indices that put rows (an Arrow table with ``input_rows``' ``order:`` columns) in
    the order of their sort key."""
    import pyarrow.compute as pc

    keys = [c for c in rows.column_names if c.startswith(ORDER)]
    return pc.sort_indices(rows.select(keys), sort_keys=[(k, "ascending") for k in keys])


class DataFrameInputAdapterFactory:
    """The factory of streams bound with ``CepStream.from_dataframe`` (config:
    ``DataFrameInputConfig``). On Spark the runtime reads the DataFrame itself; ``create``
    serves LocalRuntime (batch DataFrames)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def create(self, config: DataFrameInputConfig, shape: EventShape) -> DataFrameInputAdapter:
        return DataFrameInputAdapter(config, EventShape(shape), self.name)


def is_dataframe_input(stream: Any) -> bool:
    """Is this bound stream read from a DataFrame?"""
    return isinstance(getattr(stream, "config", None), DataFrameInputConfig)
