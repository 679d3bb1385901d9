"""The query API users write: streams bound to adapters (``binding``: ``Application``,
``CepStream.create``) and the query methods every stream has (``methods``: StreamInsight's LINQ
operators, ``where`` ... ``group_by``, returning derived streams)."""

from cti.query.binding import Application, CepStream, IngressGroup, OutputBinding, Query
from cti.query.methods import (
    DerivedQuery,
    DerivedStream,
    GroupedStream,
    GroupInputStream,
    QueryOperators,
    WindowedStream,
)

__all__ = ["Application", "CepStream", "DerivedQuery", "DerivedStream", "GroupInputStream",
           "GroupedStream", "IngressGroup", "OutputBinding", "Query", "QueryOperators",
           "WindowedStream"]
