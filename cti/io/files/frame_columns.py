"""The columns of ``read_frame``'s tables, built from a file's Arrow table column by column:
cells read where they are plain (ticks, CTI markers, edge types, partitions), payload texts,
and files' frames joined."""

from __future__ import annotations

from typing import Any

from cti.adapters import FIELD_COLUMN
from cti.events import EventShape
from cti.forms.rows import payload_to_json
from cti.io.files.cells import _FALSE, _TRUE
from cti.time import MIN_TIME

_FRAME_KINDS = {EventShape.POINT: "point", EventShape.INTERVAL: "interval",
                EventShape.EDGE: "edge_end"}  # (an edge's kind: its type column's)
NULL_TIME = MIN_TIME  # a missing time in cti's row form


def _plain_ticks(column: Any) -> tuple[Any, Any]:
    """A string column's values as int ticks where each is plain: ASCII digits (maybe signed,
    maybe between spaces or tabs), at most 18 of them (so strictly between the sentinels);
    and which rows are. The others read 0: ``parse_time`` gives their time or their error."""
    import numpy as np
    import pyarrow.compute as pc

    plain = pc.match_substring_regex(column, r"^[ \t]*[+-]?[0-9]{1,18}[ \t]*$")
    digits = pc.replace_substring_regex(pc.utf8_trim(column, " \t"), r"^\+", "")
    ticks = pc.cast(pc.if_else(plain, digits, "0"), "int64").to_numpy()
    mask = plain.to_numpy(zero_copy_only=False)
    return np.where(mask, ticks, 0), mask


def column_payloads(table: Any) -> list[str]:
    """Each row's payload text (``payload_to_json`` of its fields: the table's columns) built
    by Arrow column by column, where it writes every value exactly (``json_text``); else row
    by row."""
    from cti.forms.json_text import column_texts, objects

    fields = {n: column_texts(table.column(n)) for n in table.column_names}
    if all(t is not None for t in fields.values()):
        return objects(fields, table.num_rows)
    return [payload_to_json(r) for r in table.to_pylist()]


def _joined(frames: list[Any]) -> Any:
    """Files' ``read_frame`` tables one under the other; their typed payload columns only
    where the files' types agree (a field of integers in one file and of strings in another:
    none, and the engine reads the payloads' text, written here)."""
    import pyarrow as pa

    from cti.forms.json_text import filled_payloads

    try:
        return pa.concat_tables(frames, promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.concat_tables([filled_payloads(f).drop_columns([
            c for c in f.column_names if c.startswith(FIELD_COLUMN)]) for f in frames])


def _type_of(column: Any) -> str:
    """``"string"``, ``"int"`` or ``"bool"``: the type of a table's column as the readers
    of ``arrow_tables`` take it (``json_table`` gives JSON's; a CSV's are strings); ``""`` for
    any other."""
    import pyarrow as pa

    t = column.type
    return "string" if pa.types.is_string(t) else "int" if pa.types.is_int64(t) else \
        "bool" if pa.types.is_boolean(t) else ""


def _none(n: int) -> tuple[Any, Any]:
    import numpy as np

    return np.zeros(n, bool), np.zeros(n, bool)


def _word(column: Any) -> Any:
    """A string column's values in ASCII lower case, without the spaces and tabs around them
    (the plain forms of the words ``_flag`` and ``_edge`` read)."""
    import pyarrow.compute as pc

    return pc.ascii_lower(pc.utf8_trim(column, " \t"))


def _plain_flags(column: Any) -> tuple[Any, Any]:
    """A CTI marker column's values as booleans where each is plain: a boolean, 0 or 1, or a
    word of ``_TRUE`` or ``_FALSE`` in any ASCII case, maybe between spaces or tabs; and which
    rows are. The others read False: ``_flag`` gives their value or their error."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _type_of(column)
    if kind == "bool":
        return column.to_numpy(zero_copy_only=False), np.ones(len(column), bool)
    if kind == "int":
        values = column.to_numpy(zero_copy_only=False)
        return values == 1, (values == 0) | (values == 1)
    if kind != "string":
        return _none(len(column))
    word = _word(column)
    plain = pc.is_in(word, value_set=pa.array(sorted(_TRUE | _FALSE)))
    true = pc.is_in(word, value_set=pa.array(sorted(_TRUE)))
    return true.to_numpy(zero_copy_only=False), plain.to_numpy(zero_copy_only=False)


def _plain_edge_types(column: Any) -> tuple[Any, Any]:
    """Which rows of an edge type column are ``start`` and which ``end``, in any ASCII case,
    maybe between spaces or tabs (``_edge`` reads any other value, or finds its error)."""
    import pyarrow.compute as pc

    if _type_of(column) != "string":
        return _none(len(column))
    word = _word(column)
    return (pc.equal(word, "start").to_numpy(zero_copy_only=False),
            pc.equal(word, "end").to_numpy(zero_copy_only=False))


def _blank(column: Any) -> Any:
    """Which cells are empty or spaces and tabs alone (so ``_missing``)."""
    import pyarrow.compute as pc

    if _type_of(column) != "string":
        return _none(len(column))[0]
    return pc.match_substring_regex(column, r"^[ \t]*$").to_numpy(zero_copy_only=False)


def _plain_partitions(column: Any) -> tuple[Any, Any]:
    """A partition column's values where each is plain (printable ASCII, spaces and tabs; an
    integer, as its digits), None where it is blank (``_missing``); and which rows are plain.
    The others: ``to_item``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = _type_of(column)
    if kind == "int":
        column = pc.cast(column, pa.string())
    elif kind != "string":
        return np.full(len(column), None, object), _none(len(column))[1]
    plain = pc.match_substring_regex(column, r"^[\x20-\x7e\t]*$")
    values = column.to_numpy(zero_copy_only=False).astype(object)
    return np.where(_blank(column), None, values), plain.to_numpy(zero_copy_only=False)
