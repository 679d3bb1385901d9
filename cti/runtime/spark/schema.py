"""Spark schemas of the input and output rows, and their pandas conversions.

Spark hands nullable longs to pandas as float64, which cannot hold every tick (MAX_TIME is
2**63 - 1). So time columns are never NULL in Spark: a missing time is stored as MIN_TIME,
which is never a legal event time (``NULL_TIME``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from cti.rows import InRow, OutRow
from cti.time import MIN_TIME

if TYPE_CHECKING:  # imported where used: the driver's source process stays light
    import pandas as pd
    import pyarrow as pa

NULL_TIME = MIN_TIME

IN_SCHEMA = StructType([
    StructField("stream", IntegerType(), False),
    StructField("seq", LongType(), False),
    StructField("arrival", LongType(), False),
    StructField("kind", StringType(), False),
    StructField("start", LongType(), False),
    StructField("end", LongType(), False),
    StructField("payload", StringType(), True),
    StructField("error", StringType(), True),
    StructField("partition", StringType(), True),
])

OUT_SCHEMA = StructType([
    StructField("stream", IntegerType(), False),
    StructField("seq", LongType(), False),
    StructField("in_seq", LongType(), False),
    StructField("kind", StringType(), False),
    StructField("start", LongType(), False),
    StructField("end", LongType(), False),
    StructField("payload", StringType(), True),
    StructField("status", StringType(), False),
    StructField("orig_start", LongType(), False),
    StructField("orig_end", LongType(), False),
    StructField("cti", LongType(), False),
    StructField("reason", StringType(), True),
    StructField("partition", StringType(), True),
])

_IN_TIMES = (2, 4, 5)
_OUT_TIMES = (4, 5, 8, 9, 10)


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of rows of a Spark schema of int, long and string columns."""
    import pyarrow as pa

    types = {IntegerType: pa.int32(), LongType: pa.int64(), StringType: pa.string()}
    return pa.schema([pa.field(f.name, types[type(f.dataType)], nullable=f.nullable)
                      for f in schema.fields])


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
    return [
        InRow(int(s), int(q), _dec(a), k, _dec(st), _dec(e), _text(p), _text(err), _text(part))
        for s, q, a, k, st, e, p, err, part in zip(
            pdf["stream"], pdf["seq"], pdf["arrival"], pdf["kind"], pdf["start"], pdf["end"],
            pdf["payload"], pdf["error"], pdf["partition"], strict=True)
    ]


def out_rows_to_pandas(rows: Iterable[OutRow]) -> pd.DataFrame:
    import pandas as pd

    cols = [f.name for f in OUT_SCHEMA.fields]
    data = [tuple(_enc(v) if i in _OUT_TIMES else v for i, v in enumerate(r)) for r in rows]
    pdf = pd.DataFrame.from_records(data, columns=cols)
    for f in OUT_SCHEMA.fields:
        if isinstance(f.dataType, LongType):
            pdf[f.name] = pdf[f.name].astype("int64")
        elif isinstance(f.dataType, IntegerType):
            pdf[f.name] = pdf[f.name].astype("int32")
    return pdf


def out_row_from_spark(row: object) -> OutRow:
    values = tuple(row)
    return OutRow(*(_dec(v) if i in _OUT_TIMES else v for i, v in enumerate(values)))
