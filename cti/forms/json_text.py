"""JSON text of Arrow columns, exactly as ``json.dumps`` (and so ``cti.forms.rows.payload_to_json``)
writes their values, where it can be written column by column: integers, booleans, floats
and strings of plain printable ASCII. Adapters build payload texts from columns with
it, and the join merges payloads column by column. And a column's values in the type
``json.loads`` gives them back (``json_typed``): the typed payload columns an adapter gives
in place of the payloads' text (``cti.adapters.FIELD_COLUMN``), and the payloads' text
built from those columns where the engine needs it (``payload_texts``, ``filled_payloads``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa

from cti.adapters import FIELD_COLUMN
from cti.forms.rows import PLAIN_JSON_CHARS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

_PLAIN_TEXT = rf"^{PLAIN_JSON_CHARS}*$"  # a string quoted is its own JSON text


def value_texts(column: pa.ChunkedArray | pa.Array) -> tuple[pa.Array, pa.Array | None] | None:
    """A column's values as JSON text, where it is written exactly as ``json.dumps`` writes
    them (integers, booleans, floats, strings of plain printable ASCII); else None. A
    string column whose values repeat (``repeats``: keys) as the texts of its distinct values
    (and ``null``) and each row's index into them (checked and quoted once per value),
    another's as one text per row and None (hashing a million distinct texts to find that
    they are distinct costs four times writing them)."""
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_integer(t):
        return pc.cast(column, pa.string()).fill_null("null"), None
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return float_texts(column), None
    if pa.types.is_boolean(t):
        return pc.if_else(column, "true", "false").fill_null("null"), None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        column = (column.combine_chunks() if isinstance(column, pa.ChunkedArray)
                  else column).cast(pa.string())
        if not repeats(column):
            if len(column) and not pc.all(pc.match_substring_regex(column, _PLAIN_TEXT)).as_py():
                return None
            return pc.binary_join_element_wise('"', column, '"', "").fill_null("null"), None
        encoded = column.dictionary_encode()
        values = encoded.dictionary
        if len(values) and not pc.all(pc.match_substring_regex(values, _PLAIN_TEXT)).as_py():
            return None
        texts = pa.concat_arrays([pc.binary_join_element_wise('"', values, '"', "").cast(
            pa.string()), pa.array(["null"], pa.string())])
        return texts, encoded.indices.fill_null(len(values))
    return None


def json_typed(column: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """A column's values as the Arrow type of what ``json.loads`` gives back from their JSON
    text (``value_texts`` or ``json.dumps``): 64-bit integers, floats (as float64: their text
    is the float64's), booleans and strings; None for any other type (a timestamp's JSON is a
    string in some layout, a decimal's a float) or an unsigned integer beyond 64 signed bits."""
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_boolean(t) or pa.types.is_string(t):
        return column
    if pa.types.is_large_string(t):
        return column.cast(pa.string())
    if pa.types.is_floating(t):
        return column.cast(pa.float64())
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t) and len(column) and (pc.max(column).as_py() or 0) >= 2 ** 63:
            return None
        return column.cast(pa.int64())
    return None


def typed_payloads(table: pa.Table, names: list[str]) -> dict[str, pa.Array]:
    """The payload columns ``names`` of an adapter's table as typed payload columns
    (``json_typed``), where there are some and each has such a type; else none (the
    payloads are then written as text)."""
    typed = {name: json_typed(table.column(name)) for name in names}
    return typed if names and all(c is not None for c in typed.values()) else {}


def float_texts(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each float's JSON text as ``json.dumps`` writes it: Python's ``repr`` of it, ``NaN``,
    ``Infinity`` or ``-Infinity``; null as ``null``. Arrow's own text has the same shortest
    digits but another layout (no ``.0`` on whole numbers, exponents elsewhere and unpadded):
    it is taken where ``repr`` is positional too (zero, or 1e-4 <= |x| < 1e16) and Arrow's is,
    with ``.0`` added to whole numbers; the rest is printed by pandas, which uses ``repr``."""
    import numpy as np
    import pandas as pd
    import pyarrow.compute as pc

    column = pc.cast(column, pa.float64())
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    arrow = pc.cast(column, pa.string())
    size = pc.abs(column)
    positional = pc.and_(pc.or_(pc.equal(size, 0.0), pc.and_(
        pc.greater_equal(size, 1e-4), pc.less(size, 1e16))),
        pc.invert(pc.match_substring(arrow, "e")))
    whole = pc.invert(pc.match_substring(arrow, "."))
    texts = pc.if_else(whole, pc.binary_join_element_wise(arrow, ".0", ""), arrow)
    other = np.flatnonzero(~pc.fill_null(positional, False).to_numpy(zero_copy_only=False))
    if not len(other):
        return texts
    values = column.to_numpy(zero_copy_only=False)[other]
    printed = pd.Series(values).astype(str).to_numpy(object)
    printed[np.isnan(values)] = "NaN"
    printed[values == np.inf] = "Infinity"
    printed[values == -np.inf] = "-Infinity"
    printed[~pc.is_valid(column).to_numpy(zero_copy_only=False)[other]] = "null"
    out = texts.to_numpy(zero_copy_only=False).astype(object)
    out[other] = printed
    return pa.array(out, pa.string())


def scattered(values: pa.Array, mask: np.ndarray) -> pa.Array:
    """``values`` (one per true row of ``mask``) at the rows of ``mask``, null elsewhere."""
    import numpy as np

    at = np.full(len(mask), -1, np.int64)
    at[mask] = np.arange(len(values))
    return values.take(pa.array(at, mask=~mask))


def read_exactly(column: pa.ChunkedArray | pa.Array) -> bool:
    """Whether Arrow's JSON reader gave a column's values as ``json.loads`` gives them:
    integers, booleans, strings, none null (or missing: Arrow cannot tell); floats where none
    is integral, so that each was written as a float (Arrow reads a column's integers as floats
    once a float, or an integer beyond 64 bits, is among them; ``json.loads`` does not)."""
    import pyarrow.compute as pc

    t = column.type
    if column.null_count:
        return False
    if pa.types.is_float64(t):
        return not len(column) or pc.all(pc.not_equal(column, pc.floor(column))).as_py()
    return pa.types.is_int64(t) or pa.types.is_boolean(t) or pa.types.is_string(t)


def column_texts(column: pa.ChunkedArray | pa.Array) -> pa.Array | pa.ChunkedArray | None:
    """Each value's JSON text (``value_texts``, one per row), or None."""
    got = value_texts(column)
    if got is None:
        return None
    texts, indices = got
    return texts if indices is None else texts.take(indices)


def exact_texts(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each value's JSON text exactly as ``json.dumps`` writes it (null: ``null``): column-wise
    where it can (``value_texts``), else one ``json.dumps`` per distinct value. A string
    column whose values repeat comes dictionary-encoded (its texts once per distinct
    value)."""
    got = value_texts(column)
    if got is None:
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        encoded = column.dictionary_encode()
        got = (pa.array([json.dumps(v) for v in encoded.dictionary.to_pylist()] + ["null"],
                        pa.string()), encoded.indices.fill_null(len(encoded.dictionary)))
    texts, indices = got
    return texts if indices is None else pa.DictionaryArray.from_arrays(indices, texts)


def payload_texts(columns: Mapping[str, pa.Array | pa.ChunkedArray], rows: int) -> pa.Array:
    """Each row's canonical JSON object (``payload_to_json``'s text) of the typed payload
    columns ``columns`` (``FIELD_COLUMN``'s: one per field, null a JSON null)."""
    import pyarrow.compute as pc

    if not columns:
        return pa.array(["{}"] * rows, pa.string())
    parts: list = []
    names = sorted(columns)
    for i, name in enumerate(names):
        sep = ("{" if i == 0 else ",") + json.dumps(name) + ":"
        end = "}" if i == len(names) - 1 else ""
        texts = _few_integer_texts(columns[name]) or exact_texts(columns[name])
        if pa.types.is_dictionary(texts.type):  # (the separators joined once per value)
            parts.append(pc.binary_join_element_wise(sep, texts.dictionary, end, "").take(
                texts.indices))
        else:
            parts += [sep, texts, end]
    # (every part an array where it can be: Arrow's join of one costs what the array's does)
    joined = pc.binary_join_element_wise(*(p for p in parts if p != ""), "")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


def _few_integer_texts(column: pa.ChunkedArray | pa.Array) -> pa.DictionaryArray | None:
    """An integer column whose values span no more than a quarter of its rows (ranks, small
    counts) as the texts of every integer in that span (and ``null``) and each row's index
    into them; None for another column."""
    import pyarrow.compute as pc

    if not pa.types.is_integer(column.type) or len(column) < 64:
        return None
    bounds = pc.min_max(column).as_py()
    low, high = bounds["min"], bounds["max"]
    if low is None or high - low + 1 > len(column) // 4:
        return None
    at = pc.subtract(column, pa.scalar(low, column.type)).cast(pa.int32())
    at = at.combine_chunks() if isinstance(at, pa.ChunkedArray) else at
    texts = pa.array([str(v) for v in range(low, high + 1)] + ["null"], pa.string())
    return pa.DictionaryArray.from_arrays(at.fill_null(high - low + 1), texts)


def filled_payloads(table: pa.Table) -> pa.Table:
    """A batch of input rows (``payload`` and maybe typed payload columns) whose payload is
    null on rows whose typed columns are their payload (the marker ``FIELD_COLUMN``: the
    fields' list): there with its text built from those columns (``payload_texts``)."""
    import pyarrow.compute as pc

    if FIELD_COLUMN not in table.column_names:
        return table
    payload = table.column("payload").combine_chunks()
    lazy = pc.and_(pc.is_null(payload), pc.is_valid(table.column(FIELD_COLUMN))).to_numpy(
        zero_copy_only=False)
    if not lazy.any():
        return table
    written = [payload]
    for fields, rows in _marked(table.column(FIELD_COLUMN), lazy):
        part = table.filter(pa.array(rows))
        written.append(scattered(payload_texts(
            {f: part.column(FIELD_COLUMN + f) for f in fields}, part.num_rows), rows))
    at = table.schema.get_field_index("payload")
    return table.set_column(at, table.schema.field(at), pc.coalesce(*written))


def frame_payloads(pdf: pd.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """The ``payload`` column (an object array) of a pandas batch of rows (at ``rows``:
    positions or a mask; else all), with the text of each payload that is its typed columns
    (``filled_payloads``) written."""
    import numpy as np
    import pandas as pd

    if rows is not None and np.asarray(rows).dtype == bool:
        rows = np.flatnonzero(rows)
    out = pdf["payload"].to_numpy(object)
    out = out.copy() if rows is None else out[rows]
    if FIELD_COLUMN not in pdf.columns or not len(out):
        return out
    at = np.arange(len(pdf)) if rows is None else np.asarray(rows, np.int64)
    marker = pa.array(pdf[FIELD_COLUMN].array).take(pa.array(at))
    lazy = pd.isna(out) & marker.is_valid().to_numpy(zero_copy_only=False)
    for fields, these in _marked(marker, lazy):
        taken = at[these]
        out[these] = payload_objects(payload_texts(
            {f: _taken(pa.array(pdf[FIELD_COLUMN + f].array), taken) for f in fields},
            len(taken)))
    return out


def _taken(column: pa.Array | pa.ChunkedArray, at: np.ndarray) -> pa.Array:
    """``column``'s values at the increasing positions ``at``: a slice where they are one run
    (a stream's rows in a batch of several), else taken."""
    if len(at) and int(at[-1]) - int(at[0]) + 1 == len(at):
        part = column.slice(int(at[0]), len(at))
        return part.combine_chunks() if isinstance(part, pa.ChunkedArray) else part
    return column.take(pa.array(at))


def _marked(marker: pa.Array | pa.ChunkedArray, rows: np.ndarray
            ) -> list[tuple[list[str], np.ndarray]]:
    """Of the ``rows`` (a mask) whose ``FIELD_COLUMN`` marker is set, each list of fields
    the marker names and the mask of the rows it names them on."""
    if not rows.any():
        return []
    if isinstance(marker, pa.ChunkedArray):
        marker = marker.combine_chunks()
    encoded = marker.dictionary_encode()
    codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False)
    return [(json.loads(value), these) for code, value in enumerate(
        encoded.dictionary.to_pylist()) if (these := rows & (codes == code)).any()]


def payload_objects(payload: pa.ChunkedArray) -> np.ndarray:
    """Payload texts as an object array of Python strings, shared by equal texts where they
    repeat (``repeats``); all null (typed columns are the payloads): Nones, made at once."""
    if payload.null_count == len(payload):
        import numpy as np

        return np.empty(len(payload), object)  # (an object array starts as Nones)
    return payload.to_pandas(deduplicate_objects=repeats(payload)).to_numpy()


def repeats(texts: pa.ChunkedArray | pa.Array, sample: int = 5000) -> bool:
    """Whether texts repeat enough that pandas is better off making one Python string per
    distinct text (hashing them all) than one per row: judged by the repeats in a sample of
    5,000 (drawn from 10,000 distinct texts, a fifth of it repeats; from 500,000, half a
    percent). It pays below about three rows per distinct text."""
    seen = texts.slice(0, 4 * sample).drop_null().slice(0, sample).to_pylist()
    return len(seen) - len(set(seen)) > 0.015 * len(seen)


def json_lines(texts: pa.Array | pa.ChunkedArray) -> pa.Buffer:
    """Texts (none null) one per line, as one buffer: what Arrow's JSON reader reads, with
    no Python string made."""
    import numpy as np
    import pyarrow.compute as pc

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    large = pa.large_string()  # (64-bit offsets: a batch may hold more than 2 GB of text)
    lines = pc.binary_join_element_wise(texts.cast(large), pa.scalar("\n", large),
                                        pa.scalar("", large))
    if not len(lines):
        return pa.py_buffer(b"")
    offsets = np.frombuffer(lines.buffers()[1], np.int64)
    return lines.buffers()[2][int(offsets[lines.offset]):int(offsets[lines.offset + len(lines)])]


def objects(fields: Mapping[str, pa.Array | pa.ChunkedArray], rows: int) -> list[str]:
    """``object_texts`` as Python strings."""
    return object_texts(fields, rows).to_pylist()


def object_texts(fields: Mapping[str, pa.Array | pa.ChunkedArray], rows: int) -> pa.Array:
    """Each row's canonical JSON object (sorted keys, no spaces: ``payload_to_json``) from
    each field's JSON value texts."""
    import pyarrow.compute as pc

    if not fields:
        return pa.repeat("{}", rows)
    parts: list = []
    for i, name in enumerate(sorted(fields)):
        parts += [("{" if i == 0 else ",") + json.dumps(name) + ":", fields[name]]
    return pc.binary_join_element_wise(*parts, "}", "")
