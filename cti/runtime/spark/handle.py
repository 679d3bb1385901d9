"""A started, long-running query: ``RunningQuery`` wraps Spark's ``StreamingQuery``."""

from __future__ import annotations

import re
import time
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming import StreamingQuery

from cti import errors
from cti.operators import usercode
from cti.runtime.spark.metrics import OBSERVATION


class RunningQuery:
    """What ``start()`` returns: a query that processes its input as it arrives, micro-batch
    by micro-batch, until stopped. Its state and input offsets are in ``checkpoint_location``:
    starting the same query again with the same location resumes there (no loss, no
    duplicates). Wraps any Spark ``StreamingQuery`` over a cti frame (``to_dataframe()``
    written with the user's own ``writeStream``) too: ``RunningQuery(query)``.
    """

    def __init__(self, query: StreamingQuery, checkpoint_location: str | None = None) -> None:
        self.query = query
        self.checkpoint_location = checkpoint_location

    @property
    def id(self) -> str:
        return str(self.query.id)

    @property
    def is_active(self) -> bool:
        return bool(self.query.isActive)

    @property
    def status(self) -> dict[str, Any]:
        """Spark's status (``message``, ``isDataAvailable``, ``isTriggerActive``) and
        ``isActive``."""
        return {**self.query.status, "isActive": self.is_active}

    @property
    def progress(self) -> list[dict[str, Any]]:
        """cti's ingress metrics of each recent micro-batch, oldest first: per input stream
        ``<stream>.<metric>`` (events accepted, adjusted, dropped and why, CTIs, watermark,
        arrival clock, watermark delay; ``cti.runtime.spark.metrics``), with the micro-batch's
        ``batchId``, ``timestamp`` and ``numInputRows`` (Spark rows: packed pieces, not
        events)."""
        out = []
        for p in self.query.recentProgress:
            observed = p.get("observedMetrics", {})
            if OBSERVATION in observed:
                out.append({"batchId": p["batchId"], "timestamp": p["timestamp"],
                            "numInputRows": p["numInputRows"],
                            **observed[OBSERVATION].asDict()})
        return out

    @property
    def last_progress(self) -> dict[str, Any] | None:
        """Spark's own progress report of the last micro-batch."""
        return self.query.lastProgress

    def process_all_available(self) -> None:
        """Block until all input available now is processed (a cti error raised in a worker
        is raised here as itself)."""
        with _cti_errors():
            self.query.processAllAvailable()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Wait until the query stops (or ``timeout`` seconds pass: False if still running)."""
        with _cti_errors():
            if timeout is None:
                self.query.awaitTermination()
                return True
            return bool(self.query.awaitTermination(timeout))

    def exception(self) -> BaseException | None:
        return self.query.exception()

    def stop(self, wait: float = 60.0) -> None:
        """Stop once the micro-batch in progress has finished (waiting up to ``wait``
        seconds). Spark cannot hold off the next trigger, so a micro-batch just begun may be
        interrupted: it is not lost, its offsets are in the checkpoint's write-ahead log and it
        runs again, exactly once, when the query is started again."""
        deadline = time.monotonic() + wait
        last = self._last_batch()
        while (self.query.isActive and self.query.status["isTriggerActive"]
               and self._last_batch() == last and time.monotonic() < deadline):
            time.sleep(0.05)
        self.query.stop()

    def _last_batch(self) -> int:
        progress = self.query.lastProgress
        return -1 if progress is None else int(progress["batchId"])

    def __enter__(self) -> RunningQuery:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class _cti_errors:
    """Re-raise a cti error that failed a Spark worker as itself."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, StreamingQueryException):
            raise_cti_error(exc)
        return False


_ERROR = re.compile(r"cti\.errors\.(\w+): (.*)")  # a cti error in a worker's text


def raise_cti_error(exc: Exception) -> None:
    """Re-raise a cti error, or an exception of the user's code, that failed inside a Spark
    worker as itself, on the driver (``usercode.carry``): one error, not Spark's traces."""
    carried = usercode.recover(str(exc))
    if carried is not None:
        raise carried from None
    match = _ERROR.search(str(exc))
    if match and isinstance(getattr(errors, match.group(1), None), type):
        raise getattr(errors, match.group(1))(match.group(2)) from None
    raise exc
