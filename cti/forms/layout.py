"""The layouts of input and output rows in a batch, and their conversions from and to the
row machine's tuples (``cti.forms.rows.InRow``, ``OutRow``).

A time column is never null in a batch: a missing time is stored as MIN_TIME, which is never a
legal event time (``NULL_TIME``); Spark hands nullable longs to pandas as float64, which cannot
hold every tick. Light on purpose (pandas imported where used): Spark's driver-side source
process imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from cti.adapters import FIELD_COLUMN
from cti.forms.rows import InRow, OutRow
from cti.time import MIN_TIME

if TYPE_CHECKING:
    import pandas as pd

NULL_TIME = MIN_TIME

# Input rows: (name, type), type "int" (32 bits), "long" or "string"; the columns in NULLABLE
# may be null.
IN_COLUMNS = (("stream", "int"), ("seq", "long"), ("arrival", "long"), ("kind", "string"),
              ("start", "long"), ("end", "long"), ("payload", "string"), ("error", "string"),
              ("partition", "string"))
# Ingress output rows.
OUT_COLUMNS = (("stream", "int"), ("seq", "long"), ("in_seq", "long"), ("kind", "string"),
               ("start", "long"), ("end", "long"), ("payload", "string"), ("status", "string"),
               ("orig_start", "long"), ("orig_end", "long"), ("cti", "long"),
               ("reason", "string"), ("partition", "string"))

NULLABLE = frozenset({"payload", "error", "partition", "reason"})

_OUT_TIMES = (4, 5, 8, 9, 10)


def _enc(v: int | None) -> int:
    return NULL_TIME if v is None else v


def _dec(v: int) -> int | None:
    v = int(v)
    return None if v == NULL_TIME else v


def _text(v: object) -> str | None:
    return None if v is None or (isinstance(v, float) and v != v) else str(v)


def in_row_to_tuple(r: InRow) -> tuple:
    return (r.stream, r.seq, _enc(r.arrival), r.kind, _enc(r.start), _enc(r.end), r.payload,
            r.error, r.partition)


def in_rows_from_pandas(pdf: pd.DataFrame) -> list[InRow]:
    """Input rows of a batch (``IN_COLUMNS``, maybe typed payload columns: each payload left
    out is written from them, ``cti.forms.json_text.frame_payloads``) as ``InRow`` tuples."""
    from cti.forms.frame import column_arrays

    if FIELD_COLUMN in pdf.columns:
        from cti.forms.json_text import frame_payloads

        payloads = frame_payloads(pdf).tolist()
    else:
        payloads = pdf["payload"].tolist()
    # (the columns' values as lists: a tenth of the time of iterating pandas Series)
    stream, seq, arrival, kind, start, end, error, partition = (
        c.tolist() for c in column_arrays(pdf, ("stream", "seq", "arrival", "kind", "start",
                                                "end", "error", "partition")))
    return [
        InRow(int(s), int(q), _dec(a), k, _dec(st), _dec(e), _text(p), _text(err), _text(part))
        for s, q, a, k, st, e, p, err, part in zip(
            stream, seq, arrival, kind, start, end, payloads, error, partition, strict=True)
    ]


def out_rows_to_pandas(rows: Iterable[OutRow]) -> pd.DataFrame:
    """Output rows as a frame of ``OUT_COLUMNS`` (times NULL_TIME-coded), built column by
    column from the rows' values."""
    import numpy as np
    import pandas as pd

    values = list(zip(*rows, strict=True)) or [()] * len(OUT_COLUMNS)
    columns = {}
    for i, (name, typ) in enumerate(OUT_COLUMNS):
        if typ in ("long", "int"):
            columns[name] = np.asarray([_enc(v) for v in values[i]] if i in _OUT_TIMES
                                       else values[i], np.int64 if typ == "long" else np.int32)
        else:
            texts = np.empty(len(values[i]), object)
            texts[:] = values[i]
            columns[name] = texts
    return pd.DataFrame(columns, copy=False)


def out_row_from_values(values: Iterable[object]) -> OutRow:
    """An output row from its column values in ``OUT_COLUMNS`` order (times NULL_TIME-coded)."""
    return OutRow(*(_dec(v) if i in _OUT_TIMES else _text(v) if isinstance(v, float) else v
                    for i, v in enumerate(values)))


def out_rows_from_pandas(pdf: pd.DataFrame) -> list[OutRow]:
    """Output rows of a batch (``OUT_COLUMNS``, maybe more) as ``OutRow`` tuples, as
    ``out_row_from_values`` makes each: column by column (a missing time or text is None)."""
    import numpy as np
    import pandas as pd

    cols = []
    for i, (name, typ) in enumerate(OUT_COLUMNS):
        if i in _OUT_TIMES:
            ticks = pdf[name].to_numpy(np.int64)
            values = ticks.astype(object)
            values[ticks == NULL_TIME] = None
        elif typ == "string":
            values = pdf[name].to_numpy(object, copy=True)
            values[pd.isna(values)] = None
        else:
            values = pdf[name].to_numpy()
        cols.append(values.tolist())
    return list(map(OutRow._make, zip(*cols, strict=True)))
