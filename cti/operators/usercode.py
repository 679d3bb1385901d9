"""Exceptions raised by the user's functions (``where``, ``select``, join predicates and
selectors, aggregates): the same exception, with a note naming the operator, the stream and the
payload it failed on, and the user's own frames (which a Spark worker's exception loses on its
way to the driver).

On Spark the exception travels to the driver pickled inside the worker's error text
(``carry``), and the driver raises it again as itself (``recover``): the same class, message
and notes on both runtimes.
"""

from __future__ import annotations

import base64
import os
import re
import traceback
from typing import Any

from cti.errors import CtiError
from cti.forms.schema import shown

_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cti's own files
_NOTE = "cti: "
_CARRIED = re.compile(r"cti-error\[([A-Za-z0-9+/=]+)\]")


def note(exc: BaseException, operator: str, stream: str, payload: Any,
         what: str = "payload") -> None:
    """Add to ``exc`` (raised by the user's function in ``operator`` on ``stream``) a note
    naming them, the payload (JSON text, or what the function got) and the user's frames."""
    if any(str(n).startswith(_NOTE) for n in getattr(exc, "__notes__", ())):
        return  # noted where it was raised first (a function inside a function)
    mine = [f for f in traceback.extract_tb(exc.__traceback__)
            if not os.path.abspath(f.filename).startswith(_OURS)]
    text = payload if isinstance(payload, str) else repr(payload)
    message = (f"{_NOTE}{operator} on stream {stream} raised {type(exc).__name__} "
               f"on the {what} {shown(text)}")
    if mine:
        message += "\n" + "".join(traceback.format_list(mine)).rstrip()
    exc.add_note(message)


def noted(exc: BaseException) -> bool:
    """Whether ``exc`` comes from the user's function (``note``) or is a cti error."""
    return isinstance(exc, CtiError) or any(
        str(n).startswith(_NOTE) for n in getattr(exc, "__notes__", ()))


def carry(exc: BaseException) -> str:
    """``exc`` as text that survives Spark's error message (pickled, base64)."""
    from pyspark import cloudpickle

    try:
        blob = cloudpickle.dumps(exc)
    except Exception:  # an exception that does not pickle: its text, as a cti error
        blob = cloudpickle.dumps(CtiError("".join(traceback.format_exception_only(exc))
                                          + "\n".join(getattr(exc, "__notes__", ()))))
    return f"cti-error[{base64.b64encode(blob).decode()}]"


def recover(text: str) -> BaseException | None:
    """The exception ``carry`` put in an error message, or None."""
    import pickle

    match = _CARRIED.search(text)
    if match is None:
        return None
    try:
        exc = pickle.loads(base64.b64decode(match.group(1)))
    except Exception:
        return None
    return exc if isinstance(exc, BaseException) else None
