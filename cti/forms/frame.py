"""Event frames: the pandas form in which operators pass events to each other.

A frame has one row per event item: ``kind`` (point, interval, edge_start, edge_end), ``start``,
``end`` (an edge start's end is MAX_TIME: not known yet), ``payload`` (canonical JSON; null
in a chunk's frame where its typed columns are the payload: ``Chunk``) and
``key`` (the group key inside ``group_by``: a JSON list of the group values, "" outside).
A chunk is what one input delivers in one step: a frame and the CTIs that came with it.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.json as pa_json

from cti.errors import CtiError
from cti.forms.json_text import json_lines, payload_objects, payload_texts
from cti.forms.numbers import Numbers, column_numbers, value_numbers
from cti.forms.rows import OutRow, payload_from_json, payload_to_json
from cti.forms.schema import shown
from cti.time import MAX_TIME

# Order of kinds at equal sync time within a release block (docs/operators.md).
KIND_RANK = {"point": 0, "interval": 1, "edge_end": 2, "edge_start": 3}


def empty() -> pd.DataFrame:
    return make([], [], [], [], [])


def _objects(values: Iterable[Any]) -> np.ndarray:
    if isinstance(values, pd.Series):  # (its array, not a Python loop over the Series)
        values = values.array if isinstance(values.dtype, pd.ArrowDtype) else \
            values.to_numpy(object)
    if isinstance(values, np.ndarray) and values.dtype == object or isinstance(
            values, pd.arrays.ArrowExtensionArray):
        return values
    out = np.empty(len(values) if hasattr(values, "__len__") else 0, dtype=object)
    if not hasattr(values, "__len__"):
        return np.asarray(list(values), dtype=object)
    out[:] = values if isinstance(values, list) else list(values)
    return out


def filled(n: int, value: Any) -> np.ndarray:
    """An object array of ``n`` times ``value`` (``np.full`` takes ten times as long)."""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


_REPEATED: dict[Any, np.ndarray] = {}
_REPEATED_MOST = 1 << 22  # (rows of the longest kept: 32 MiB of pointers per value)
_REPEATED_TEXTS: dict[str, pa.Array] = {}
_REPEATED_TEXTS_MOST = 1 << 20  # (rows of the longest kept: 4 MiB of offsets, a value each)


def repeated(n: int, value: str | None) -> np.ndarray:
    """A read-only object array of ``n`` times ``value`` (an event kind, an empty key): a view
    into one kept per value, so the constant columns of a step's millions of rows are not
    written afresh each step; ``filled`` for one to write into."""
    def made(size: int) -> np.ndarray:
        out = filled(size, value)
        out.flags.writeable = False
        return out
    return _kept(_REPEATED, _REPEATED_MOST, value, n, made)[:n]


def repeated_text(n: int, value: str) -> pa.Array:
    """An Arrow string array of ``n`` times ``value`` (an output row's kind): a slice of one
    kept per value, as ``repeated`` keeps its object arrays, so a step's millions of results
    do not write their kind afresh."""
    return _kept(_REPEATED_TEXTS, _REPEATED_TEXTS_MOST, value, n,
                 lambda size: pa.repeat(pa.scalar(value, pa.string()), size)).slice(0, n)


def _kept(kept: dict[Any, Any], most: int, value: Any, n: int, made: Callable[[int], Any]
          ) -> Any:
    """The array of ``value`` kept in ``kept``, at least ``n`` long: made anew (``made`` of a
    length) where it is shorter, at least twice as long up to ``most`` rows, and kept where
    it is no longer than that (a longer one is this caller's alone)."""
    have = kept.get(value)
    if have is None or len(have) < n:
        grown = min(2 * len(have), most) if have is not None else 0
        have = made(max(n, grown))
        if len(have) <= most:
            kept[value] = have
    return have


def _repeated_value(columns: list[Any]) -> tuple[bool, Any]:
    """Whether these columns hold nothing but one value that ``repeated`` keeps (some of them
    views into its array, the rest equal to it: a few rows copied from one), and that value."""
    views = [c for c in columns if isinstance(c, np.ndarray) and c.base is not None
             and not c.flags.writeable]
    found = [v for v, have in _REPEATED.items() if all(c.base is have for c in views)]
    if not views or not found:
        return False, None
    rest = [c for c in columns if not any(c is v for v in views)]
    return all(isinstance(c, np.ndarray) and c.dtype == object and bool((c == found[0]).all())
               for c in rest), found[0]


def make(kind: Iterable[str], start: Iterable[int], end: Iterable[int],
         payload: Iterable[str], key: Iterable[str]) -> pd.DataFrame:
    """A frame of these columns; numpy arrays become its columns as they are (no copy)."""
    return framed({
        "kind": _objects(kind),
        "start": np.asarray(start if isinstance(start, np.ndarray) else list(start),
                            dtype=np.int64),
        "end": np.asarray(end if isinstance(end, np.ndarray) else list(end), dtype=np.int64),
        "payload": _objects(payload),
        "key": _objects(key),
    })


def framed(columns: dict[str, Any]) -> pd.DataFrame:
    """A pandas frame of these columns as they are (no copy); an object array stays one,
    without pandas' look through it for times (a pass over each object column that holds no
    string, such as payloads left out: ``Chunk``). One that starts with a string is given to
    pandas as it is (its look stops at the string: nothing to convert), the others as a
    ``Series`` of object dtype (a Series costs tens of microseconds, a step makes hundreds)."""
    # (A Series among the columns brings its index, as pandas aligns it: no index of ours.)
    index = None if any(isinstance(v, pd.Series) for v in columns.values()) else \
        pd.RangeIndex(len(next(iter(columns.values()), ())))
    return pd.DataFrame({name: _as_column(values, index) for name, values in columns.items()},
                        index=index, copy=False)


def _as_column(values: Any, index: pd.RangeIndex | None) -> Any:
    """``values`` for ``framed``: an object array that does not start with a string as a
    Series on the frame's index (pandas then leaves its values as they are)."""
    if isinstance(values, np.ndarray) and values.dtype == object and not (
            len(values) and isinstance(values[0], str)):
        return pd.Series(values, index=index, dtype=object, copy=False)
    return values


def with_payloads(frame: pd.DataFrame, payloads: np.ndarray) -> pd.DataFrame:
    """``frame`` with these payloads (its other columns shared, not copied)."""
    out = frame.copy(deep=False)
    out["payload"] = pd.Series(payloads, dtype=object, index=frame.index, copy=False)
    return out


def rows_where(frame: pd.DataFrame, mask: np.ndarray) -> pd.DataFrame:
    """``frame[mask]``, where the rows kept are one run (every row; a stream's rows in a
    batch of several, such as a million reference rows beside a micro-batch's events) a
    slice whose columns are shared, not copied, and other rows taken column by column
    (pandas copies a frame whole for a mask, first joining its columns of a type into one
    block: a second and 100 MB per million rows of text)."""
    kept = np.flatnonzero(mask)
    if not len(kept):
        return frame.iloc[:0].copy(deep=False)
    if int(kept[-1]) - int(kept[0]) + 1 == len(kept):
        return frame.iloc[int(kept[0]):int(kept[-1]) + 1].copy(deep=False)
    out = framed({c: _taken(frame[c], kept) for c in frame.columns})
    out.index = frame.index[kept]
    return out


def _taken(column: pd.Series, rows: np.ndarray) -> Any:
    """A column's values at ``rows`` (an Arrow or other extension column stays one)."""
    if isinstance(column.dtype, np.dtype):
        return column.to_numpy()[rows]
    return column.array.take(rows)


def concat(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return empty()
    return stack(frames)


def stack(frames: list[pd.DataFrame], names: Sequence[str] | None = None) -> pd.DataFrame:
    """Frames with the same columns (or these ``names`` of theirs) one under the other, column
    by column (``pd.concat`` checks every value of an object column for missing values:
    seconds for millions)."""
    if names is None:
        if len(frames) == 1:
            return frames[0].reset_index(drop=True)
        names = list(frames[0].columns)
    arrays = [column_arrays(f, names) for f in frames]
    return pd.DataFrame({name: _stacked([a[i] for a in arrays])
                         for i, name in enumerate(names)}, copy=False)


def column_arrays(frame: pd.DataFrame, names: Sequence[str]) -> list[Any]:
    """The named columns' values as the frame stores them (numpy or extension arrays), without
    the ``Series`` that ``frame[name]`` makes of each (tens of microseconds apiece: a step
    reads hundreds). pandas' own accessor of a column's array (pandas 2, as pinned)."""
    loc = frame.columns.get_loc
    return [frame._get_column_array(loc(name)) for name in names]


def _stacked(columns: list[Any]) -> Any:
    """One column of several frames one under the other (``column_arrays``): an Arrow string
    column where one of them is (``arrow_texts``), dictionary-encoded where all of them are
    (Arrow unifies their dictionaries: a window's repeated texts not written out), else a
    numpy array."""
    if not any(isinstance(c, pd.arrays.ArrowExtensionArray) for c in columns):
        constant, value = _repeated_value(columns)
        if constant:  # (an event kind or an empty key: one view, not a column written)
            return repeated(sum(len(c) for c in columns), value)
        return np.concatenate([c if isinstance(c, np.ndarray) else c.to_numpy()
                               for c in columns])
    texts = [_texts(c, encoded=True) for c in columns]
    if len({t.type for t in texts}) > 1:  # (some plain: the encoded ones written out)
        texts = [t.cast(pa.string()) if pa.types.is_dictionary(t.type) else t for t in texts]
    return pd.arrays.ArrowExtensionArray(pa.concat_arrays(texts))


def arrow_texts(column: pd.Series, encoded: bool = False) -> pa.Array:
    """A text column (payloads) as an Arrow string array: as it is where it is one (the
    payloads a window of built-in aggregates writes: ``json_text.object_texts``), else from
    its Python strings. A dictionary-encoded one (a window's repeated texts:
    ``window._distinct_texts``) written out, unless ``encoded``: then it stays so."""
    return _texts(column.array, encoded)


def _texts(values: Any, encoded: bool = False) -> pa.Array:
    """``arrow_texts`` of a column's array."""
    if isinstance(values, pd.arrays.ArrowExtensionArray):
        texts = pa.array(values)  # (chunked where pandas stacked several)
        if pa.types.is_dictionary(texts.type) and not encoded:
            texts = texts.cast(pa.string())
        return texts.combine_chunks() if isinstance(texts, pa.ChunkedArray) else texts
    return pa.array(np.asarray(values, dtype=object), pa.string())


def plain_texts(events: pd.DataFrame) -> pd.DataFrame:
    """``events`` with their payloads written out where they come dictionary-encoded
    (``arrow_texts``), for an operator that reads them; else as they are."""
    column = events["payload"] if "payload" in events else None
    if column is None or not isinstance(column.dtype, pd.ArrowDtype) or \
            not pa.types.is_dictionary(column.dtype.pyarrow_dtype):
        return events
    out = events.copy(deep=False)
    out["payload"] = pd.Series(pd.arrays.ArrowExtensionArray(arrow_texts(column)),
                               index=events.index, copy=False)
    return out


def take_few(data: pa.Table | pa.ChunkedArray, at: np.ndarray
             ) -> pa.Table | pa.ChunkedArray | pa.Array:
    """``data.take(at)`` for a few rows of a large chunked column or table, chunk by chunk:
    Arrow's take of a chunked array first joins its chunks (a copy of every text of millions
    of rows, to read a few thousand)."""
    column = data.column(0) if isinstance(data, pa.Table) else data
    if not isinstance(column, pa.ChunkedArray) or column.num_chunks < 2 or not len(at):
        return data.take(at)
    lengths = [len(c) for c in column.chunks]
    firsts = np.cumsum(lengths) - lengths
    local, back = positions_in_parts(lengths, at)
    parts = [data.slice(int(firsts[i]), lengths[i]).take(pa.array(rows))
             for i, rows in enumerate(local) if len(rows)]
    joined = pa.concat_tables(parts) if isinstance(data, pa.Table) else pa.chunked_array(
        parts, type=column.type)
    return joined if back is None else joined.take(pa.array(back))


def positions_in_parts(lengths: Sequence[int], at: np.ndarray
                       ) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Rows ``at`` of parts of these ``lengths`` laid one after the other: each part's rows
    as its own positions (in ``at``'s order among them), and the order that puts the rows,
    taken part after part, back in ``at``'s (None where they come so: each row's part no
    earlier than the one before's)."""
    which, local = places_in_parts(lengths, at)
    back = None
    if len(at) and (np.diff(which) < 0).any():
        by_part = np.argsort(which, kind="stable")
        back = np.empty(len(at), np.int64)
        back[by_part] = np.arange(len(at))
        which, local = which[by_part], local[by_part]
    cuts = np.searchsorted(which, np.arange(len(lengths) + 1)).tolist()
    return [local[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)], back


def places_in_parts(lengths: Sequence[int], at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of rows ``at`` of parts of these ``lengths`` laid one after the other: its part
    (a non-empty one) and its place in that part."""
    firsts = np.cumsum(lengths) - lengths
    which = np.searchsorted(firsts, at, side="right") - 1
    return which, at - firsts[which]


def stable_order(values: np.ndarray) -> np.ndarray:
    """``argsort(values, kind="stable")`` (numpy's radix sort of integers), by one of 32-bit
    offsets where the values span less than 2**32: half the passes of one over 64 bits; of
    values that rise but for a few rows out of place around one long rising run (a step's
    results with the rows held from the step before ahead of them and their CTIs after
    them), those few put into the run by a search (``_merged``)."""
    falling = values[1:] < values[:-1]
    if np.count_nonzero(falling) <= _MERGED_MOST:
        edges = np.concatenate([[0], np.flatnonzero(falling) + 1, [len(values)]])
        longest = int(np.argmax(np.diff(edges)))
        lo, hi = int(edges[longest]), int(edges[longest + 1])
        if len(values) - (hi - lo) <= _MERGED_MOST:
            return _merged(values, lo, hi)
    if len(values) and int(values.max()) - int(values.min()) < 1 << 32:
        return np.argsort((values - values.min()).astype(np.uint32), kind="stable")
    return np.argsort(values, kind="stable")


def stable_order_near(values: np.ndarray, near: np.ndarray) -> np.ndarray:
    """``stable_order(values)`` from ``near``, an order of the rows that nearly sorts them
    (a few rows out of place): numpy's stable sort of the values in that order, which merges
    its long runs (a tenth of a sort afresh), then the runs of equal values out of position
    order by position."""
    order = near[np.argsort(values[near], kind="stable")]
    ranked = values[order]
    tied = ranked[1:] == ranked[:-1]
    misplaced = np.flatnonzero(tied & (order[1:] < order[:-1]))
    if len(misplaced):  # (only the runs of ties out of position order: sorted by it)
        at, run = tie_runs(tied)
        redo = np.isin(run, run[np.searchsorted(at, misplaced)])
        at, run = at[redo], run[redo]
        order[at] = order[at][np.lexsort((order[at], run))]
    return order


_MERGED_MOST = 4096  # (the most rows out of the run that ``stable_order`` merges by a search)


def _merged(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The stable order of ``values`` that rise from row ``lo`` to ``hi`` (the run), the few
    rows outside it put in among the run's by a search: a row before the run ahead of the
    run's rows of its value, a row after it behind them; the run's rows keep their order."""
    n = len(values)
    few = np.concatenate([np.arange(lo), np.arange(hi, n)])
    few = few[np.argsort(values[few], kind="stable")]  # (ties: by position)
    run, value = values[lo:hi], values[few]
    at = np.where(few < lo, np.searchsorted(run, value, side="left"),
                  np.searchsorted(run, value, side="right"))
    order = np.empty(n, np.int64)
    placed = at + np.arange(len(few))  # (each one's place: run rows before it, and the few)
    order[placed] = few
    rest = np.ones(n, bool)
    rest[placed] = False
    order[rest] = np.arange(lo, hi)
    return order


def tie_runs(tied: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For rows in a sorted order (``tied``: whether each row ties with the next), the
    positions of the rows in some run of ties and each one's run number (rising, one per
    run): what a sort of the ties by further keys takes, run by run."""
    in_run = np.zeros(len(tied) + 1, bool)  # (a row ties with the next, or the one before)
    in_run[:-1] = tied
    in_run[1:] |= tied
    at = np.flatnonzero(in_run)  # (no sort: a window's results tie on nearly every row)
    # (a row starts a run where the row before it does not tie with it)
    starts = np.ones(len(at), bool)
    starts[1:] = ~tied[at[1:] - 1]
    return at, np.cumsum(starts)


def sync(frame: pd.DataFrame) -> np.ndarray:
    """Each item's sync time: the end of an edge end, the start of anything else."""
    return np.where(frame["kind"].to_numpy() == "edge_end", frame["end"].to_numpy(),
                    frame["start"].to_numpy())


def map_payloads(frame: pd.DataFrame, fn: Callable[[dict[str, Any]], Any]) -> list[Any]:
    """``fn`` of each row's payload: called once per distinct payload text, in the order of
    their first rows (the rows told apart by hashing, not by a Python loop over them)."""
    codes, texts = pd.factorize(frame["payload"].to_numpy(object), use_na_sentinel=False)
    results = np.empty(len(texts), dtype=object)
    for i, text in enumerate(texts.tolist()):
        results[i] = fn(payload_from_json(text))
    return results[codes].tolist()


def payload_frame(texts: np.ndarray, columns: dict[str, pa.Array] | None = None
                  ) -> pd.DataFrame:
    """Payloads (JSON texts) as a pandas frame: a row per payload, a column per field, as
    pandas builds it from the parsed payloads (a field missing from a payload is null, NaN in
    a column of numbers). From their typed columns where known (``Chunk.columns``); else read
    by Arrow's JSON reader, column-wise, where its types are the ones pandas would infer (no
    nested objects; strings that look like times stay strings); else parsed one by one."""
    n = len(texts)
    if columns:
        return _frame_of(pa.table({name: columns[name] for name in sorted(columns)}))
    if n and not pd.isna(texts).any():
        lines = "\n".join(texts).encode()
        try:
            table = pa_json.read_json(io.BytesIO(lines))
            timed = [f.name for f in table.schema if pa.types.is_timestamp(f.type)]
            if timed:  # (Arrow reads ISO-like strings as times; ``json.loads`` does not;
                # the fields given a type come first in what it reads: put back in place)
                table = pa_json.read_json(io.BytesIO(lines), parse_options=pa_json.ParseOptions(
                    explicit_schema=pa.schema([(name, pa.string()) for name in timed]))
                ).select(table.column_names)
        except pa.ArrowInvalid:  # (a field of two types)
            table = None
        if table is not None and table.num_rows == n and not any(
                pa.types.is_nested(f.type) for f in table.schema):
            return _frame_of(table)
    return pd.DataFrame.from_records([payload_from_json(t) for t in texts], index=range(n))


def _frame_of(table: pa.Table) -> pd.DataFrame:
    """A table of payload fields as pandas makes the frame of their parsed values: a column
    of nulls alone holds None (Arrow's JSON reader gives it no type)."""
    if not table.num_columns:
        return pd.DataFrame(index=range(table.num_rows))
    return pa.table({name: pa.nulls(table.num_rows) if column.null_count == len(column)
                     else column for name, column in zip(table.column_names, table.columns,
                                                         strict=True)}).to_pandas()


def payloads_of_frame(result: Any, rows: int, what: str) -> list[str]:
    """A user function's frame of new payloads (``rows`` rows, a column per field) as each
    payload's JSON text; a null (None, NaN, NaT) is a JSON null. ``what`` names the function
    in the error for anything else."""
    if not isinstance(result, pd.DataFrame) or len(result) != rows or not all(
            isinstance(c, str) for c in result.columns):
        raise CtiError(f"{what} must return a frame of {rows} rows (one per event) whose "
                       f"columns are field names, got {type(result).__name__} "
                       f"{shown(repr(result))}")
    return [payload_to_json({k: None if _null(v) else v for k, v in row.items()})
            for row in result.to_dict("records")]


def mask_of(result: Any, rows: int, what: str, per: str = "event") -> np.ndarray:
    """A user function's booleans, one per row of the ``rows`` it was given (a Series is
    taken by position); ``what`` names the function in the error for anything else, ``per``
    what a row is (an event; a pair of a join)."""
    keep = np.asarray(result.to_numpy() if isinstance(result, pd.Series | pd.Index)
                      else result)
    if keep.shape != (rows,) or keep.dtype != bool:
        raise CtiError(f"{what} must return one boolean per {per} ({rows}), got "
                       f"{type(result).__name__} {shown(repr(result))}")
    return keep


def _null(value: Any) -> bool:
    return value is None or value is pd.NA or value is pd.NaT or (
        isinstance(value, float) and value != value)


def arrow_to_pandas(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as a pandas frame; its ``payload`` texts become Python strings shared by
    equal texts (pandas' deduplication, which hashes them all) only where ``repeats`` says
    they repeat, one per row otherwise."""
    at = table.schema.get_field_index("payload")
    out = table.remove_column(at).to_pandas()
    out.insert(at, "payload", payload_objects(table.column(at)))
    return out


def exact_field(payloads: pa.Array, field: str) -> pa.Array | None:
    """``field`` of each JSON payload of a string array (``lines_field``), or None."""
    if not len(payloads) or payloads.null_count:
        return None
    return lines_field(pa.BufferReader(json_lines(payloads)), len(payloads), field)


def lines_field(lines: Any, rows: int, field: str) -> pa.Array | None:
    """``field`` of each of ``rows`` JSON payloads, one per line of the readable ``lines``, by
    Arrow's JSON reader, where its values come out as strings, integers or booleans: the types
    in which Arrow's values equal ``json.loads``'s. None otherwise (other types, unreadable
    payloads)."""
    return _exact(_lines_column(lines, rows, field))


def _exact(column: pa.Array | None) -> pa.Array | None:
    """A column of Arrow's JSON reader where its values equal ``json.loads``'s (strings,
    integers, booleans; all null: as strings), else None."""
    if column is None:
        return None
    if pa.types.is_null(column.type):
        return pa.nulls(len(column), pa.string())
    return column if column.type in (pa.string(), pa.int64(), pa.bool_()) else None


def _lines_column(lines: Any, rows: int, field: str) -> pa.Array | None:
    """``field`` of each of ``rows`` JSON payloads (``lines_field``) in the type Arrow's JSON
    reader gives it (null where absent), or None (unreadable payloads)."""
    try:
        table = pa_json.read_json(lines)
    except pa.ArrowInvalid:
        return None
    if table.num_rows != rows:
        return None
    if field not in table.column_names:
        return pa.nulls(rows)
    return table.column(field).combine_chunks()


def field_values(frame: pd.DataFrame, field: str | Callable[[dict[str, Any]], Any],
                 column: pa.Array | None = None) -> list[Any]:
    """A payload field (by name) or a function of the payload, per row: a named field from its
    typed ``column`` where known (``Chunk.columns``), or of a large frame by Arrow's JSON reader
    (``lines_field``); anything else row by row."""
    if column is not None:
        return column.to_pylist()
    column = _exact(_field_column(frame, field))
    return column.to_pylist() if column is not None else _row_values(frame, field)


def field_numbers(frame: pd.DataFrame, field: str | Callable[[dict[str, Any]], Any],
                  column: pa.Array | None = None) -> Numbers:
    """A payload field's (by name) or a function of the payload's number per row, each value
    read on its own (``cti.forms.numbers``): from the field's typed ``column`` where known
    (``Chunk.columns``) or a large frame's column as Arrow's JSON reader gives it (whose
    whole floats, which may have been written as integers, are read again one by one);
    anything else row by row."""
    typed = column is not None
    column = column if typed else _field_column(frame, field)
    got = column_numbers(column) if column is not None else None
    if got is None:
        return value_numbers(_row_values(frame, field))
    if not typed and pa.types.is_floating(column.type):
        whole = got.is_float & (np.floor(got.floats) == got.floats)
        if whole.any():  # (Arrow reads a column's integers as floats once a float is among them)
            got = got.replaced(whole, value_numbers(_row_values(frame[whole], field)))
    return got


def _row_values(frame: pd.DataFrame, field: str | Callable[[dict[str, Any]], Any]) -> list[Any]:
    """A payload field (by name) or a function of the payload, per row, one payload at a time."""
    if callable(field):
        return map_payloads(frame, field)
    return map_payloads(frame, lambda p: p.get(field))


def _field_column(frame: pd.DataFrame, field: str | Callable[[dict[str, Any]], Any]
                  ) -> pa.Array | None:
    """A named field of a large frame's payloads as an Arrow column, in the type Arrow's JSON
    reader gives it (``_lines_column``), or None (a function, a small frame, payloads Arrow
    does not read)."""
    if callable(field) or len(frame) < 256:
        return None
    try:
        lines = "\n".join(frame["payload"]).encode()
    except TypeError:  # a payload that is not text
        return None
    return _lines_column(io.BytesIO(lines), len(frame), field)


def field_codes(frame: pd.DataFrame, field: str | Callable[[dict[str, Any]], Any],
                column: pa.Array | None = None) -> tuple[np.ndarray, list[Any]]:
    """Each row's code for its value of a payload field (or of a function of the payload), and
    the value of each code. Values share a code when their JSON is equal (1, 1.0 and True do
    not). ``column``: the field's typed column, where known (``Chunk.columns``)."""
    typed = column
    column = _exact(column if column is not None else _field_column(frame, field))
    if column is not None:  # one Arrow type: its equal values are JSON-equal
        encoded = column.dictionary_encode()
        values = [*encoded.dictionary.to_pylist(), None]
        codes = encoded.indices.fill_null(len(values) - 1).to_numpy(zero_copy_only=False)
        return codes.astype(np.int64), values
    values = field_values(frame, field, typed)
    types = set(map(type, values))
    plain = len(types) == 1 and types <= {str, int}
    # Else each value's JSON text stands in for it (1, 1.0 and True differ there, and so do
    # -0.0 and 0.0; NaN is equal to itself).
    codes, uniques = pd.factorize(_objects(values if plain else [
        value_json(v) for v in values]))
    return codes.astype(np.int64), [values[i] for i in first_of(codes, len(uniques))]


def dense_codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` of integers, by counting where their range is no wider than their
    number (no hashing); the codes then follow the values' order, not first appearance."""
    if not len(values):
        return np.empty(0, np.int64), values[:0]
    low, high = int(values.min()), int(values.max())
    if high - low > max(len(values), 1024):
        return pd.factorize(values)
    offsets = values - low
    used = np.flatnonzero(np.bincount(offsets, minlength=high - low + 1))
    code_of = np.zeros(high - low + 1, np.int64)
    code_of[used] = np.arange(len(used))
    return code_of[offsets], used + low


def renumbered(codes: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes into a table of ``n`` entries renumbered to the entries they use, in the table's
    order: the new codes, and the places of the used entries in the table."""
    used = np.flatnonzero(np.bincount(codes, minlength=n))
    code_of = np.zeros(n, np.int64)
    code_of[used] = np.arange(len(used))
    return code_of[codes], used


def first_of(codes: np.ndarray, n: int) -> np.ndarray:
    """For each of the ``n`` codes, the first position that has it."""
    first = np.zeros(n, np.int64)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    return first


def key_codes_with(frame: pd.DataFrame, codes: np.ndarray, values: list[Any]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group key extended by a value (``group_by``), given as each row's code and
    the value of each code (``field_codes``): each row's code and the key of each code, a
    JSON list computed once per distinct (key, value) (a code no row has may have None)."""
    if not len(frame):
        return np.empty(0, np.int64), np.empty(0, object)
    keys = frame["key"].to_numpy(object)
    if (keys == "").all():  # no key yet (a group_by outside any other): one key per value
        table = np.empty(len(values), object)
        used = np.flatnonzero(np.bincount(codes, minlength=len(values)))
        table[used] = ["[" + value_json(values[v]) + "]" for v in used.tolist()]
        return codes, table
    k_codes, k_uniques = pd.factorize(keys)
    pair = k_codes.astype(np.int64) * len(values) + codes
    p_codes, p_uniques = pd.factorize(pair)
    # key_json([*parent, value]) from texts: the parent list's text opened, the value's text.
    heads = ["[" if not k else k[:-1] + "," for k in k_uniques]  # "": no key yet
    texts = [value_json(v) for v in values]
    table = np.asarray([heads[k] + texts[v] + "]" for k, v in zip(
        (p_uniques // len(values)).tolist(), (p_uniques % len(values)).tolist(), strict=True)],
        dtype=object)
    return p_codes, table


_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def key_json(values: list[Any]) -> str:
    """A group key's canonical text: the JSON list of its values (keys sorted, no spaces)."""
    return _JSON.encode(values)


def value_json(value: Any) -> str:
    """``value``'s text inside ``key_json``: plain ASCII strings and integers directly."""
    kind = type(value)
    if kind is str and value.isascii() and value.isprintable() and '"' not in value \
            and "\\" not in value:
        return '"' + value + '"'
    if kind is int:
        return str(value)
    return _JSON.encode(value)


@attrs.define
class Chunk:
    """One step of a stream: new event items and the CTIs (increasing) that came with them.
    ``columns`` may hold the events' payloads as typed columns, one per field of the
    payloads, in the type ``json.loads`` gives each value (an adapter's:
    ``cti.adapters.FIELD_COLUMN``), and ``keys`` each event's code for its ``key`` with the
    key of each code (``key_codes_with``), known already. An operator that makes new payloads
    gives a chunk without them; one that passes events on as they are (``where``) keeps
    them.

    Where ``columns`` are known, an event's payload text may be left out (null) of the frame
    as given (``raw_events``): ``events`` writes it from the columns, once, when an operator
    asks for it. An operator that reads only the columns (a window's built-in aggregates, a
    ``group_by`` key, a frame of payloads) or passes the events on with them takes
    ``raw_events``, and no text is written.

    ``tags``: each output CTI's tag, the input CTI it answers (``cti_tags``; None: the CTIs
    are the input's own, each its own tag). An operator whose CTIs depend on its events tags
    each with the CTI it answers, one that maps, pushes back or drops CTIs keeps each one's
    tag (``OperatorUnit.tags``), so the levels of shards that hold different keys line up on
    CTIs that every shard computes alike (``cti.engine.hold``)."""

    _events: pd.DataFrame
    ctis: list[int]
    columns: dict[str, pa.Array] = attrs.field(factory=dict)
    keys: tuple[np.ndarray, np.ndarray] | None = None
    tags: list[int] | None = None
    _written: bool = attrs.field(default=False, init=False)

    @property
    def cti_tags(self) -> list[int]:
        """Each CTI's tag: ``tags``, or the CTIs themselves (the input's own)."""
        return self.ctis if self.tags is None else self.tags

    @property
    def events(self) -> pd.DataFrame:
        """The events, each payload's text written."""
        if not self._written:
            self._written = True
            if self.columns and self._events["payload"].isna().any():
                self._events = with_payloads(self._events, self.payload_texts(
                    np.arange(len(self._events))))
        return self._events

    @property
    def raw_events(self) -> pd.DataFrame:
        """The events as given: a payload may be null where ``columns`` are its payload."""
        return self._events

    def payload_texts(self, rows: np.ndarray) -> np.ndarray:
        """The payload texts of the events at ``rows`` (positions)."""
        texts = self._events["payload"].to_numpy(object)[rows]
        lazy = pd.isna(texts)
        if self.columns and lazy.any():
            at = pa.array(np.asarray(rows, np.int64)[lazy])
            texts = texts.copy()
            texts[lazy] = payload_objects(payload_texts(
                {name: column.take(at) for name, column in self.columns.items()}, len(at)))
        return texts

    def reads(self, fields: Iterable[Any]) -> pd.DataFrame:
        """The events for an operator that reads ``fields`` of the payloads: as given where
        the typed columns hold each of them (names), else with their texts (``events``)."""
        return self._events if self.columns and all(
            isinstance(f, str) and f in self.columns for f in fields) else self.events

    @classmethod
    def empty(cls) -> Chunk:
        return cls(empty(), [])

    @staticmethod
    def stacked(chunks: Sequence[Chunk], ctis: list[int]) -> Chunk:
        """Chunks' events one under the other (``concat``) with ``ctis``: with their typed
        columns where every chunk with events has the same ones, else with their texts."""
        full = [c for c in chunks if len(c.raw_events)]
        kinds = {tuple((name, column.type) for name, column in sorted(c.columns.items()))
                 for c in full}
        if len(kinds) == 1 and (kind := kinds.pop()):
            return Chunk(concat([c.raw_events for c in full]), ctis, {
                name: pa.concat_arrays([c.columns[name] for c in full]) for name, _ in kind})
        return Chunk(concat([c.events for c in full]), ctis)

    def taken(self, rows: np.ndarray) -> dict[str, pa.Array]:
        """``columns`` of the events at ``rows`` (positions or a mask)."""
        at = pa.array(np.flatnonzero(rows) if rows.dtype == bool else rows)
        return {name: column.take(at) for name, column in self.columns.items()}


def rising(values: Iterable[int], tags: Iterable[int], after: int | None = None
           ) -> tuple[list[int], list[int]]:
    """Of CTIs mapped one to one from their tagged inputs (``values``, with ``tags``), those
    that rise above ``after`` (if given) and every earlier one, with their tags: an
    operator's output CTIs (``Chunk.tags``)."""
    out: list[int] = []
    kept: list[int] = []
    for t, tag in zip(values, tags, strict=True):
        if (after is None or t > after) and (not out or t > out[-1]):
            out.append(t)
            kept.append(tag)
    return out, kept


def chunk_of(status: np.ndarray, kind: np.ndarray, start: np.ndarray, end: np.ndarray,
             payload: np.ndarray) -> Chunk:
    """An ingress output (rows in their stream's order) as a chunk: accepted and adjusted
    events, and CTIs; every other status (dropped, invalid, metrics, ...) is left out."""
    is_event = (status == "accepted") | (status == "adjusted")
    ctis = [int(c) for c in start[status == "cti"]]
    kind = kind[is_event]
    start = start[is_event].astype(np.int64)
    raw_end = end[is_event]
    end = np.where(kind == "point", start + 1, np.where(
        kind == "edge_start", MAX_TIME,
        np.where(pd.isna(raw_end), 0, raw_end).astype(np.int64))).astype(np.int64)
    pays = np.asarray(payload[is_event], object)  # (a copy: its missing ones filled in place)
    pays[pd.isna(pays)] = "{}"
    return Chunk(make(kind, start, end, pays, repeated(len(kind), "")), ctis)


def from_out_rows(rows: Iterable[OutRow]) -> Chunk:
    """An ingress output (accepted/adjusted events and CTIs, in order) as a chunk."""
    rows = list(rows)
    cols = list(zip(*[(r.status, r.kind, r.start, r.end, r.payload) for r in rows], strict=True)) \
        if rows else [[], [], [], [], []]
    return chunk_of(*(np.asarray(c, dtype=object) for c in cols))

