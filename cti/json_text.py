"""JSON text of Arrow columns, exactly as ``json.dumps`` (and so ``cti.rows.payload_to_json``)
writes their values, where Arrow can write it: integers, booleans and strings of plain
printable ASCII. Adapters build payload texts from columns with it, and the join merges
payloads column by column."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pyarrow as pa

from cti.rows import PLAIN_JSON_CHARS

_PLAIN_TEXT = rf"^{PLAIN_JSON_CHARS}*$"  # a string quoted is its own JSON text


def value_texts(column: pa.ChunkedArray) -> tuple[pa.Array, pa.Array | None] | None:
    """A column's values as JSON text, where Arrow's text of them is exactly ``json.dumps``'s
    (integers, booleans, strings of plain printable ASCII); else None. A string column's as
    the texts of its distinct values (and ``null``) and each row's index into them (keys
    repeat: checked and quoted once per value), another's as one text per row and None."""
    import pyarrow.compute as pc

    t = column.type
    if pa.types.is_integer(t):
        return pc.cast(column, pa.string()).fill_null("null"), None
    if pa.types.is_boolean(t):
        return pc.if_else(column, "true", "false").fill_null("null"), None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        encoded = column.combine_chunks().dictionary_encode()
        values = encoded.dictionary
        if len(values) and not pc.all(pc.match_substring_regex(values, _PLAIN_TEXT)).as_py():
            return None
        texts = pa.concat_arrays([pc.binary_join_element_wise('"', values, '"', "").cast(
            pa.string()), pa.array(["null"], pa.string())])
        return texts, encoded.indices.fill_null(len(values))
    return None


def column_texts(column: pa.ChunkedArray | pa.Array) -> pa.Array | pa.ChunkedArray | None:
    """Each value's JSON text (``value_texts``, one per row), or None."""
    got = value_texts(column)
    if got is None:
        return None
    texts, indices = got
    return texts if indices is None else texts.take(indices)


def objects(fields: Mapping[str, pa.Array | pa.ChunkedArray], rows: int) -> list[str]:
    """Each row's canonical JSON object (sorted keys, no spaces: ``payload_to_json``) from
    each field's JSON value texts."""
    import pyarrow.compute as pc

    if not fields:
        return ["{}"] * rows
    parts: list = []
    for i, name in enumerate(sorted(fields)):
        parts += [("{" if i == 0 else ",") + json.dumps(name) + ":", fields[name]]
    return pc.binary_join_element_wise(*parts, "}", "").to_pylist()
