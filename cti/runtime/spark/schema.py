"""Spark schemas of the input and output rows (``cti.forms.layout``'s layouts).

Spark hands nullable longs to pandas as float64, which cannot hold every tick (MAX_TIME is
2**63 - 1). So time columns are never NULL in Spark: a missing time is stored as MIN_TIME,
which is never a legal event time (``NULL_TIME``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

from cti.forms.layout import (  # noqa: F401 (the conversions, used with these schemas)
    NULL_TIME,
    in_row_to_tuple,
    in_rows_from_pandas,
    out_row_from_values,
    out_rows_to_pandas,
)
from cti.forms.rows import OutRow

if TYPE_CHECKING:  # imported where used: the driver's source process stays light
    import pyarrow as pa

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

def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema of rows of a Spark schema of int, long and string columns."""
    import pyarrow as pa

    types = {IntegerType: pa.int32(), LongType: pa.int64(), StringType: pa.string()}
    return pa.schema([pa.field(f.name, types[type(f.dataType)], nullable=f.nullable)
                      for f in schema.fields])


def out_row_from_spark(row: object) -> OutRow:
    return out_row_from_values(tuple(row))
