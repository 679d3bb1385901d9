"""Input rows as Arrow batches: an adapter's rows read (columnar where it can), and a batch
routed to the shards of a query.

A batch of input rows has ``IN_ARROW`` columns (``cti.forms.layout.IN_COLUMNS``), maybe with
the typed payload columns a columnar adapter gives (``cti.adapters.FIELD_COLUMN``; where they
are a row's payload, its text is null: written only where needed, ``text_rows``). Routed to a
query's shard it has ``own`` (the shard owning each event, -1 for rows that are no events of a
stream the query spreads: ``ROUTED_ARROW``) and the typed payload columns of the events it
keeps the payloads of. Both runtimes read and route this way: Spark's source for each piece of
input it reads, the in-process runtime for each micro-batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.adapters import FIELD_COLUMN, InputAdapter
from cti.engine.route import QueryRoute, ShardKey
from cti.events import EVENT_KINDS, SHAPE_KINDS, EventShape
from cti.forms.frame import exact_field, filled, framed, payload_objects, value_json
from cti.forms.json_text import exact_texts, filled_payloads, repeats, scattered
from cti.forms.layout import IN_COLUMNS, NULLABLE, in_row_to_tuple
from cti.forms.rows import (
    InRow,
    adapter_item_to_row,
    clock_row,
    eos_row,
    payload_from_json,
    payload_to_json,
)
from cti.ingress.progress import progress_points
from cti.ingress.timed import generation_points

_TYPES = {"int": pa.int32(), "long": pa.int64(), "string": pa.string()}
IN_ARROW = pa.schema([pa.field(name, _TYPES[t], nullable=name in NULLABLE)
                      for name, t in IN_COLUMNS])
ROUTED_ARROW = pa.schema([*IN_ARROW, pa.field("own", pa.int32(), nullable=False)])


def read_rows(index: int, adapter: InputAdapter, start: int, end: int) -> list[InRow]:
    """Rows [start, end) of stream ``index``'s adapter, one ``InRow`` per item."""
    return [adapter_item_to_row(index, start + k, item)
            for k, item in enumerate(adapter.read(start, end))]


def rows_table(rows: list[InRow]) -> pa.Table:
    """Input rows as a batch (``IN_ARROW``)."""
    if not rows:
        return IN_ARROW.empty_table()
    tuples = [in_row_to_tuple(r) for r in rows]
    return pa.table(dict(zip(IN_ARROW.names, zip(*tuples, strict=True), strict=True)),
                    schema=IN_ARROW)


def piece(adapter: Any, index: int, start: int, end: int, eos: bool,
          tick: int | None = None, fields: frozenset[str] | None = None) -> pa.Table:
    """Input rows [start, end) of stream ``index`` (and its end of input, and its recorded
    clock tick ``tick``) as a batch (``IN_ARROW``), and the ``field:`` columns
    a columnar adapter gives (null on rows that have none, such as the end-of-input row). The
    clock and end-of-input rows are no events: ``routed`` sends them to every shard.
    ``fields``: the payload fields the run needs (None: all), for an adapter that can leave
    the others out (``projects_fields``)."""
    projected = {"fields": fields} if fields is not None and getattr(
        adapter, "projects_fields", False) else {}
    frame = adapter.read_frame(start, end, **projected) \
        if hasattr(adapter, "read_frame") else None  # (None: the rows come from ``read``)
    tables = [] if frame is None else [_in_table(frame, index, start)]
    rows = [] if frame is not None or adapter is None else read_rows(index, adapter, start, end)
    if eos:
        rows.append(eos_row(index, end))
    if tick is not None:
        rows.append(clock_row(index, end, tick))
    if rows:
        tables.append(rows_table(rows))
    if not tables:
        return IN_ARROW.empty_table()
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


def text_rows(table: pa.Table) -> pa.Table:
    """A batch's ``IN_ARROW`` columns alone, each payload as its text (``filled_payloads``:
    written from the typed columns where it was left out)."""
    return filled_payloads(table).select(IN_ARROW.names)


def _in_table(frame: pa.Table, index: int, first_seq: int) -> pa.Table:
    """A columnar adapter's rows (``read_frame``: kind, start, end, payload, arrival,
    partition, error, and maybe typed payload columns) as ``IN_ARROW`` columns and those."""
    n = frame.num_rows
    fields = field_columns(frame)
    return pa.table({
        "stream": np.full(n, index, np.int32),
        "seq": np.arange(first_seq, first_seq + n, dtype=np.int64),
        **{f.name: frame.column(f.name).cast(f.type) for f in IN_ARROW
           if f.name not in ("stream", "seq")},
        **{name: frame.column(name) for name in fields},
    }, schema=pa.schema([*IN_ARROW, *(frame.schema.field(name) for name in fields)]))


def field_columns(table: pa.Table) -> list[str]:
    """The typed payload columns of a batch (``cti.adapters.FIELD_COLUMN``), the marker
    ``field:`` first."""
    return sorted(name for name in table.column_names if name.startswith(FIELD_COLUMN))


def field_texts(values: pa.Array, given: np.ndarray) -> pa.Array:
    """Each row's JSON text of its value of a typed payload column (``json.dumps``'s: the text
    ``key_shards`` hashes), null on the rows not ``given``; dictionary-encoded where the
    column's values are texts of their own (``exact_texts``), else one per row."""
    texts = exact_texts(values)
    if not pa.types.is_dictionary(texts.type):
        return pc.if_else(pa.array(given), texts, None)
    codes = texts.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    return pa.DictionaryArray.from_arrays(pa.array(codes, mask=~given), texts.dictionary)


def key_shards(payloads: pa.Array, field: str, shards: int, texts: pa.Array | None = None
               ) -> np.ndarray:
    """The shard of each payload's ``field`` value (JSON text, not null): a hash of the value's
    JSON, the same in every process, so equal values meet in one shard. ``texts``: the value's
    JSON text per row where the adapter gave it (null: not given; maybe dictionary-encoded
    already), so its payload is not read.
    """
    if texts is not None and texts.null_count:  # some rows without: read those payloads
        given = texts.is_valid()
        out = np.empty(len(payloads), np.int32)
        mask = given.to_numpy(zero_copy_only=False)
        out[mask] = key_shards(payloads.filter(given), field, shards, texts.filter(given))
        out[~mask] = key_shards(payloads.filter(pc.invert(given)), field, shards)
        return out
    if texts is not None and not pa.types.is_dictionary(texts.type) and not repeats(texts):
        # (the values' own JSON texts, nearly all distinct: hashed row by row, not hashed
        # first to find the distinct ones)
        return (text_hashes(texts) % np.uint64(shards)).astype(np.int32)
    if texts is not None:  # the value's own JSON text: one per distinct value
        encoded = texts.dictionary_encode()  # (itself, if it is encoded)
        distinct = encoded.dictionary
        codes = encoded.indices.to_numpy(zero_copy_only=False)
    elif (values := exact_field(payloads, field)) is not None:  # Arrow's parse of the payloads
        encoded = values.dictionary_encode()
        distinct = pa.array([json.dumps(v) for v in encoded.dictionary.to_pylist()] + ["null"],
                            pa.string())
        codes = encoded.indices.fill_null(len(distinct) - 1).to_numpy(zero_copy_only=False)
    else:  # row by row (1, 1.0 and True are equal in Python, not in JSON)
        distinct = pa.array([json.dumps(payload_from_json(p).get(field), sort_keys=True)
                             for p in payloads.to_pylist()], pa.string())
        codes = np.arange(len(distinct))
    return (text_hashes(distinct) % np.uint64(shards)).astype(np.int32)[codes]


def text_hashes(texts: pa.Array) -> np.ndarray:
    """A 64-bit hash of each string's UTF-8 bytes (not null), the same in every process:
    the bytes as a polynomial (wrapping), and the length, through MurmurHash3's 64-bit
    finaliser so that every bit depends on every byte. Vectorised: no Python per text."""
    texts = texts.cast(pa.large_string())
    offsets = np.frombuffer(texts.buffers()[1], np.int64)[
        texts.offset:texts.offset + len(texts) + 1]
    data = np.frombuffer(texts.buffers()[2] or b"", np.uint8)[offsets[0]:offsets[-1]]
    lengths = np.diff(offsets)
    starts = offsets[:-1] - offsets[0]
    h = lengths.astype(np.uint64)
    with np.errstate(over="ignore"):
        if len(data):
            powers = np.cumprod(np.full(int(lengths.max()), _MULTIPLIER, np.uint64))
            within = np.arange(len(data)) - np.repeat(starts, lengths)
            weighted = data.astype(np.uint64) * powers[within]
            filled = lengths > 0  # reduceat's segment of a text runs to the next one's start
            h[filled] += np.add.reduceat(weighted, starts[filled])
        for shift, factor in _FMIX64:
            h ^= h >> np.uint64(shift)
            if factor:
                h *= np.uint64(factor)
    return h


_EVENT_KINDS = pa.array(sorted(EVENT_KINDS))
_EDGE_KINDS = pa.array(sorted(SHAPE_KINDS[EventShape.EDGE]))
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd: the golden ratio's 64-bit fraction
_FMIX64 = ((33, 0xFF51AFD7ED558CCD), (33, 0xC4CEB9FE1A85EC53), (33, 0))


def owners(payloads: pa.Array, field: ShardKey, shards: int,
           texts: pa.Array | None = None) -> np.ndarray:
    """The shard that owns each event, by its payload (not null): the hash of its ``field``
    value (``key_shards``) or of its key function's value (``computed_key_shards``), or shard
    0 when the query is not spread (``field`` None, one shard)."""
    if field is None or shards == 1:
        return np.zeros(len(payloads), np.int32)
    if callable(field):
        return computed_key_shards(payloads, field, shards)
    return key_shards(payloads, field, shards, texts)


def computed_key_shards(payloads: pa.Array, key: Callable[[Any], Any], shards: int
                        ) -> np.ndarray:
    """The shard of each payload's ``key(payload)`` (``group_by(key=fn)``): the hash of the
    value's JSON (``frame.value_json``, the text the group_by tells groups apart by), so equal
    keys meet in one shard. The function runs once per distinct payload text, the hashing
    column-wise; a payload it fails on goes to shard 0, whose group_by raises the error
    naming the stream and the payload (``QueryMachine.group_apply``)."""
    encoded = payloads.dictionary_encode()
    texts = []
    for text in encoded.dictionary.to_pylist():
        try:
            texts.append(value_json(key(payload_from_json(text))))
        except Exception:
            texts.append(None)
    known = np.asarray([t is not None for t in texts], bool)
    by_text = np.zeros(len(texts), np.int32)
    if known.any():
        hashed = text_hashes(pa.array([t for t in texts if t is not None], pa.string()))
        by_text[known] = (hashed % np.uint64(shards)).astype(np.int32)
    return by_text[encoded.indices.to_numpy(zero_copy_only=False)]


def routed(route: QueryRoute, group: int, rows: pa.Table, events_only: bool = False,
           in_order: Callable[[], bool] = lambda: False) -> Iterable[tuple[int, pa.Table]]:
    """One piece of a group's input rows (``IN_ARROW`` columns, maybe typed payload columns),
    for each shard of the query: the rows with ``own`` set, an event's payload (and its typed
    payload columns, with the marker: where they are the payload, its text is null) kept only
    for the shard that owns it (edges too: an edge end finds its
    start by payload, and its start has the same owner; a shard needs others' events for
    their times only; a stream with an event-ordering policy over a key gives the others the
    key too, as each keeps every key's timeline, unless the query is spread by that key).
    Where the group's stream takes its time from generation points (``route.timed``) and its
    adapter yields only events (``events_only``: no CTIs, no arrival times), a shard gets only
    its own events and the piece's generation points (``cti.ingress.timed``). Likewise, of
    a stream that imports its CTIs (``route.referenced``), a piece of valid events (with
    arrival times only where its adapter says they never go back: ``in_order()``, asked
    only of such a piece with arrival times), a shard
    gets its own events and the piece's arrival progress (``cti.ingress.progress``)."""
    stream = rows.column("stream").to_numpy()
    kind = rows.column("kind").combine_chunks()
    payload = rows.column("payload").combine_chunks()
    n = rows.num_rows
    own = np.full(n, -1, np.int32)
    typed = field_columns(rows)  # (the marker first)
    given = rows.column(FIELD_COLUMN).combine_chunks().is_valid().to_numpy(
        zero_copy_only=False) if typed else np.zeros(n, bool)
    # (an event whose typed columns are its payload may have no text: ``full`` writes it)
    has_payload = payload.is_valid().to_numpy(zero_copy_only=False) | given
    written: list[pa.Array] = []

    def full() -> pa.Array:
        if not written:
            written.append(filled_payloads(rows).column("payload").combine_chunks())
        return written[0]
    # Rows of no event (CTIs, the end of input, rows the adapter could not read, whose
    # payload is the raw text) go to every shard whole; only an event has an owner.
    one_kind = _one_value(kind)  # (usually one: a piece of one stream's events)
    shared = ~_kinds_in(kind, _EVENT_KINDS, one_kind)
    for (g, i), field in route.fields.items():
        mine = (stream == i) & (g == group) & has_payload & ~shared
        if not mine.any():
            continue
        if field is None or route.shards == 1:  # one shard owns them all
            own[mine] = 0
            continue
        every = mine.all()  # (usually: a group of one stream with payloads)

        def chosen(values: pa.Array, every: bool = every, mine: np.ndarray = mine) -> pa.Array:
            return values if every else values.filter(pa.array(mine))

        column = FIELD_COLUMN + field if isinstance(field, str) else None
        if column in typed:
            own[mine] = owners(chosen(payload), field, route.shards, field_texts(
                chosen(rows.column(column).combine_chunks()), given[mine]))
        else:
            own[mine] = owners(chosen(full()), field, route.shards)
    narrow = None  # of an event whose key a shard keeps the timeline of, the key
    keyed = route.keyed_substreams(group)
    for (g, i), over in route.substreams.items():
        rows_i = (stream == i) & (g == group) & has_payload & ~shared
        if not rows_i.any() or route.shards == 1:
            continue
        chosen = full().filter(pa.array(rows_i))
        if i in keyed:
            # A key's events and timeline are its owner's: the other shards need an event's
            # times alone, but where the key is missing (bad input, which each must see).
            keyless = ~has_field(chosen, over)
            if not keyless.any():
                continue
            rows_i[rows_i] = keyless
            chosen = chosen.filter(pa.array(keyless))
        spread = route.fields.get((g, i)) or over
        # (a key function may read any field: the others get the whole payload to find the
        # event's owner by, as its owner does)
        texts = key_payloads(chosen, sorted({over, spread})) if isinstance(spread, str) \
            else chosen
        narrow = scattered(texts, rows_i) if narrow is None else pc.if_else(
            pa.array(rows_i), scattered(texts, rows_i), narrow)
    # An edge of a stream the query does not read: shard 0 pairs it (for the metrics).
    own[(own < 0) & ~shared & has_payload & _kinds_in(kind, _EDGE_KINDS, one_kind)] = 0
    timed = route.timed.get((group, int(stream[0]))) if n and events_only else None
    points = generation_points(rows, *timed, ROUTED_ARROW) if timed else None
    referenced = route.referenced.get((group, int(stream[0]))) \
        if n and (stream == stream[0]).all() else None
    if points is None and referenced is not None:
        points = progress_points(rows, referenced, in_order, has_payload, ROUTED_ARROW)
    if points is not None:  # (events of a stream read for its CTIs only: shard 0 counts them)
        own = np.where(shared, -1, np.maximum(own, 0))
    with_own = rows.select(IN_ARROW.names).append_column(ROUTED_ARROW.field("own"), pa.array(own))
    for name in typed:
        with_own = with_own.append_column(rows.schema.field(name), rows.column(name))
    if points is not None:  # each shard's own events by one sort, not a pass per shard
        order = np.argsort(own, kind="stable")  # the rows of no event (own -1) first
        bounds = np.searchsorted(own[order], np.arange(route.shards + 1))
        by_shard = with_own.take(pa.array(order))
        common = bounds[0]  # rows every shard gets (the end of input)
    at = with_own.schema.get_field_index("payload")
    for shard in range(route.shards):
        whole = route.with_inputs and shard == 0  # it passes the input on: every row
        if points is not None and not whole:  # its own events and the generation points
            a, b = bounds[shard], bounds[shard + 1]
            # (copied out of the sorted table: an IPC stream of a slice carries whole buffers)
            yield shard, pa.concat_tables([
                by_shard.slice(0, common), by_shard.slice(a, b - a), points],
                promote_options="default").combine_chunks()
            continue
        keep = shared | (own == shard) | whole
        if keep.all():
            yield shard, with_own
            continue
        kept = pa.array(keep)
        part = with_own.set_column(at, ROUTED_ARROW.field("payload"), pc.if_else(
            kept, payload, None if narrow is None else narrow))
        for name in typed:  # (another shard's events' payloads: not carried)
            k = part.schema.get_field_index(name)
            part = part.set_column(k, part.schema.field(name),
                                   pc.if_else(kept, part.column(name), None))
        yield shard, part


def key_payloads(payloads: pa.Array, fields: list[str]) -> pa.Array:
    """Each payload (JSON text, not null) cut down to ``fields`` (sorted), as canonical JSON
    text: what a shard that does not own an event needs of it to keep its key's timeline (and
    to know it is not its own). Column-wise where every payload has every field as a string,
    an integer or a boolean (Arrow's values are then ``json.loads``'s); else one by one."""
    parts = []
    for f in fields:
        values = exact_field(payloads, f)
        if values is None or values.null_count:  # (a null or a missing field: told apart)
            return pa.array([payload_to_json({k: p[k] for k in fields if k in p})
                             for p in map(payload_from_json, payloads.to_pylist())],
                            pa.string())
        encoded = values.dictionary_encode()
        texts = pa.array([json.dumps(v) for v in encoded.dictionary.to_pylist()], pa.string())
        parts.append(json.dumps(f) + ":")
        parts.append(texts.take(encoded.indices))
        parts.append(",")
    if not parts:
        return pa.array(["{}"] * len(payloads), pa.string())
    return pc.binary_join_element_wise("{", *parts[:-1], "}", "")


def has_field(payloads: pa.Array, field: str) -> np.ndarray:
    """Whether each payload (JSON text, not null) has ``field`` with a value other than null:
    column-wise where Arrow reads them (``exact_field``), else one by one."""
    values = exact_field(payloads, field)
    if values is not None:
        return values.is_valid().to_numpy(zero_copy_only=False)
    return np.array([payload_from_json(p).get(field) is not None
                     for p in payloads.to_pylist()], bool)


def routed_cast(table: pa.Table) -> pa.Table:
    """Routed rows as ``ROUTED_ARROW`` columns, then their typed payload columns (decoded,
    where they travelled dictionary-encoded)."""
    typed = field_columns(table)
    fixed = table.select(ROUTED_ARROW.names).cast(ROUTED_ARROW)
    for name in typed:
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        fixed = fixed.append_column(name, column)
    return fixed


def _one_value(column: pa.Array | pa.ChunkedArray) -> Any:
    """The value every row of a column has (none null), found by one equality scan; else
    None."""
    if not len(column) or column.null_count:
        return None
    first = column[0]
    return first.as_py() if pc.all(pc.equal(column, first)).as_py() else None


def _kinds_in(kind: pa.Array, kinds: pa.Array, one_kind: str | None) -> np.ndarray:
    """Which rows' kind is one of ``kinds``: decided once where every row has the same kind,
    ``one_kind`` (``_one_value``), else row by row."""
    if one_kind is not None:
        return np.full(len(kind), one_kind in kinds.to_pylist())
    return pc.is_in(kind, kinds).to_numpy(zero_copy_only=False)


def routed_frame(table: pa.Table, group: int | None = None) -> pd.DataFrame:
    """A shard's routed rows (``ROUTED_ARROW``, maybe typed payload columns) of group
    ``group`` (None: the table's ``group`` column) as the pandas frame its step takes (with
    ``group``). The typed payload columns stay Arrow arrays (``pd.ArrowDtype``): their values
    and nulls as the adapter gave them."""
    fixed = routed_cast(table)
    few = ("kind", "error", "partition")  # few distinct texts, or none: converted apart
    columns: dict[str, Any] = {}
    for name in ROUTED_ARROW.names:  # column by column: no frame insert, no block copies
        if name in few:  # (object: pandas infers no type)
            columns[name] = _few_texts(fixed.column(name))
        elif name == "payload":
            columns[name] = payload_objects(fixed.column(name))
        else:
            columns[name] = fixed.column(name).to_pandas()
    columns["group"] = (np.full(table.num_rows, group, np.int32) if group is not None
                        else table.column("group").to_numpy().astype(np.int32))
    for name in field_columns(fixed):
        columns[name] = pd.arrays.ArrowExtensionArray(fixed.column(name).combine_chunks())
    return framed(columns)


def _few_texts(column: pa.ChunkedArray) -> np.ndarray:
    """A text column of few distinct values as an object array (one Python string per
    distinct value, no hashing of the rows' strings in Python)."""
    n = len(column)
    if column.null_count == n:
        out = np.empty(n, object)
        return out
    if (one := _one_value(column)) is not None:  # (usually: one kind of event)
        return filled(n, one)
    encoded = column.combine_chunks().dictionary_encode()
    values = np.asarray([*encoded.dictionary.to_pylist(), None], object)
    return values[encoded.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)]
