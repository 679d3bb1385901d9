"""Ship a query's user functions to Spark's workers by value where workers cannot import them.

A query's functions (predicates, selectors, aggregates) are pickled with cloudpickle, which
pickles a function of an importable module by reference. A function from the user's script
(``__main__``) travels by value; one from a helper module next to the script, a notebook's
module or a test module does not, and the worker fails with ``ModuleNotFoundError``. So every
module that defines such a function, or a function or module it uses, and that does not live in
the Python installation (standard library, site-packages) or in cti, is registered with
``cloudpickle.register_pickle_by_value``.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types
from collections.abc import Iterator
from typing import Any

import attrs
from pyspark import cloudpickle

from cti.operators import plan

_INSTALLED = tuple(os.path.realpath(p) for p in {
    sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})
_OURS = ("cti", "pyspark")


def _shipped_by_reference(module: types.ModuleType | None) -> bool:
    """Would the workers import ``module`` themselves (so it may travel by reference)?"""
    if module is None or module.__name__ == "__main__":
        return True  # __main__ travels by value anyway
    if module.__name__.split(".")[0] in _OURS:
        return True
    file = getattr(module, "__file__", None)
    return file is None or os.path.realpath(file).startswith(_INSTALLED)


def _functions(root: plan.Node) -> Iterator[Any]:
    for node in plan.walk(root):
        for field in attrs.fields(type(node)):
            value = getattr(node, field.name)
            values = value.values() if isinstance(value, dict) else [value]
            for v in values:
                if callable(v) and not isinstance(v, plan.Node | type):
                    yield v
                elif attrs.has(type(v)):  # aggregates hold their functions in fields
                    yield from (getattr(v, f.name) for f in attrs.fields(type(v))
                                if callable(getattr(v, f.name)))


def ship_user_functions(root: plan.Node) -> None:
    """Register by value the user modules the plan's functions come from or refer to."""
    seen: set[int] = set()
    todo = list(_functions(root))
    while todo:
        fn = todo.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        module = sys.modules.get(getattr(fn, "__module__", None) or "")
        if not _shipped_by_reference(module):
            cloudpickle.register_pickle_by_value(module)
        code = getattr(fn, "__code__", None)
        if code is None:
            continue
        glob = getattr(fn, "__globals__", {})
        for name in code.co_names:
            ref = glob.get(name)
            if isinstance(ref, types.ModuleType):
                if not _shipped_by_reference(ref):
                    cloudpickle.register_pickle_by_value(ref)
            elif isinstance(ref, types.FunctionType):
                todo.append(ref)
        for cell in fn.__closure__ or ():
            try:
                inner = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            if isinstance(inner, types.FunctionType):
                todo.append(inner)
