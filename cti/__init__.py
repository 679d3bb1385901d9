"""cti: Microsoft StreamInsight's temporal model (CTIs, advance-time settings) on Apache Spark."""

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
from cti.operators import aggregates as agg
from cti.operators.plan import WindowOutputPolicy
from cti.operators.scan import StreamOperator
from cti.query import Application, CepStream
from cti.query.methods import DerivedStream
from cti.results import Diagnostic, RunResult, StreamResult
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
