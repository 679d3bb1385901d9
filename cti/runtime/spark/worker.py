"""What cti's code does once in each Python worker process of Spark.

PySpark's daemon reuses a worker process for task after task and runs a full garbage
collection (``gc.collect()``) after each one. A worker that ran cti's code holds pandas,
pyarrow, pyspark and cti's modules: some 90,000 objects tracked by the collector, which each
of those collections walked again (about 40 ms of CPU per task, four tasks per micro-batch of
a query, more on a busy machine), although none of them is ever garbage. ``settle`` moves the
objects alive when cti's code first runs in the process (the modules it imported, the
function Spark unpickled) into the collector's permanent generation (``gc.freeze``), so the
daemon's collections walk only what the tasks themselves made. An object frozen this way is
still freed when nothing refers to it; only a reference cycle among them would stay, and
there are none to speak of at that moment (the daemon collected after the task before).
"""

from __future__ import annotations

import gc

_SETTLED: set[str] = set()


def settle(entry: str) -> None:
    """Freeze the objects alive now, once per process and ``entry`` (each executor-side entry
    point of cti imports its own modules first, then calls this)."""
    if entry not in _SETTLED:
        _SETTLED.add(entry)
        gc.freeze()
