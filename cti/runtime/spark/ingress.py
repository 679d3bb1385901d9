"""Ingress as a Spark stateful function: one group key per ingress group.

The rows of all streams of a group (the streams linked by CTI imports) meet in one
``applyInPandasWithState`` call per micro-batch; the group's ingress state (plain data,
``GroupState.to_data``, pickled into one binary column, since array/map state columns break in
PySpark 4.3) lives in Spark's state store and is checkpointed with the query.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

from cti.engine.shard import ingress_step
from cti.ingress.group import GroupRun
from cti.ingress.spec import StreamSpec
from cti.ingress.state import GroupState
from cti.runtime.spark.schema import OUT_SCHEMA
from cti.runtime.spark.state import dump_state, load_state
from cti.runtime.spark.worker import settle

STATE_SCHEMA = StructType([StructField("machine", BinaryType(), False)])
GROUP_OUT_SCHEMA = StructType([StructField("group", IntegerType(), False), *OUT_SCHEMA.fields])


def ingress_function(specs: Sequence[Sequence[StreamSpec]]) -> Callable:
    """The stateful function; ``specs[g]`` are the stream specs of group ``g``."""
    specs = [list(s) for s in specs]

    def run(key: tuple, batches: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        settle("ingress")
        group = int(key[0])
        saved = load_state(state.get[0]) if state.exists else None
        machine = GroupRun(specs[group], GroupState.from_data(saved, specs[group]))
        pdf = ingress_step(machine, pd.concat(list(batches), ignore_index=True))
        state.update((dump_state(machine.state.to_data()),))
        pdf.insert(0, "group", pd.Series([group] * len(pdf), dtype="int32"))
        yield pdf

    return run


def apply_ingress(inputs: DataFrame, specs: Sequence[Sequence[StreamSpec]]) -> DataFrame:
    """Ingress output rows (``GROUP_OUT_SCHEMA``) for input rows that carry a ``group`` column.

    Each group is one key: its streams' rows meet in one call, in one state.
    """
    return inputs.groupBy("group").applyInPandasWithState(
        ingress_function(specs), GROUP_OUT_SCHEMA, STATE_SCHEMA, "append",
        GroupStateTimeout.NoTimeout,
    )
