"""cti: Microsoft StreamInsight's temporal model (CTIs, advance-time settings) on Apache Spark.

The names whose modules import pandas (queries, results, user-defined operators) load on
first use (``__getattr__``), so that a process that only plans or reads (the data source's
planning workers, the Python streaming source runner) does not import pandas with ``cti``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cti.adapters import (
    Arriving,
    EnqueuingInputAdapter,
    InputAdapter,
    InputAdapterFactory,
    InvalidInput,
    OutputAdapter,
    OutputAdapterFactory,
)
from cti.errors import (
    BadInputError,
    BindingError,
    CtiError,
    CtiViolationError,
    InvalidEventError,
    InvalidSettingsError,
    NullKeyError,
    UnknownFieldError,
)
from cti.events import (
    Cti,
    EdgeEvent,
    EdgeType,
    EventShape,
    IntervalEvent,
    PointEvent,
    StreamItem,
)
from cti.lazy import lazy_names
from cti.operators import aggregates as agg
from cti.operators.plan import WindowOutputPolicy
from cti.runtime.base import set_default_runtime
from cti.settings import (
    AdapterAdvanceTimeSettings,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventOrderingPolicy,
)
from cti.time import (
    MAX_TIME,
    MIN_TIME,
    TICK,
    Ticks,
    format_time,
    parse_duration,
    ticks,
    to_datetime,
    to_duration_ticks,
    to_ticks,
)

if TYPE_CHECKING:
    from cti.operators.scan import StreamOperator
    from cti.query import Application, CepStream
    from cti.query.methods import DerivedStream
    from cti.results import Diagnostic, RunResult, StreamResult

# name -> the module it loads from, on first use
_LAZY = {"StreamOperator": "cti.operators.scan", "Application": "cti.query",
         "CepStream": "cti.query", "DerivedStream": "cti.query.methods",
         "Diagnostic": "cti.results", "RunResult": "cti.results", "StreamResult": "cti.results"}
__getattr__, __dir__ = lazy_names(globals(), _LAZY)


__all__ = [
    "MAX_TIME", "MIN_TIME", "TICK",
    "AdapterAdvanceTimeSettings", "AdvanceTimeGenerationSettings", "AdvanceTimeImportSettings",
    "AdvanceTimePolicy", "AdvanceTimeSettings", "Application", "Arriving", "BadInputError",
    "BindingError", "CepStream", "Cti", "CtiError", "CtiViolationError", "DerivedStream",
    "Diagnostic",
    "EdgeEvent", "EdgeType", "EnqueuingInputAdapter", "EventOrderingPolicy", "EventShape",
    "InputAdapter",
    "InputAdapterFactory", "IntervalEvent", "InvalidEventError", "InvalidInput",
    "InvalidSettingsError", "OutputAdapter", "OutputAdapterFactory", "PointEvent", "RunResult",
    "NullKeyError", "StreamItem", "StreamOperator", "StreamResult", "Ticks", "UnknownFieldError",
    "WindowOutputPolicy", "agg", "format_time", "parse_duration", "set_default_runtime", "ticks",
    "to_datetime", "to_duration_ticks", "to_ticks",
]
