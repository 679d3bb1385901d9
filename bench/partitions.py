"""Benchmark: the ingress of an event-ordering stream whose input partitions are combined by
their minimum watermark, with many partitions first seen in one micro-batch.

    python bench/partitions.py [--partitions 100,5000,20000] [--events 200000]

Each partition seen for the first time starts a step of its own in the vectorised ingress
(``cti.ingress.ordered``: its watermark starts at the CTI in force at its first event). For
each partition count this runs two micro-batches of ``--events`` events (every partition
new in the first, known in the second) through the vectorised ingress and through the row
machine (``IngressMachine.process``, one Python step per row, the definition both are
tested against), checks they give the same rows, and prints one JSON line: seconds and
events/s of each, and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import pandas as pd

from cti.events import EventShape
from cti.forms.layout import IN_COLUMNS, in_rows_from_pandas, out_rows_to_pandas
from cti.ingress import ordered
from cti.ingress.spec import StreamSpec
from cti.settings import EventOrderingPolicy
from cti.time import MIN_TIME, ticks

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the row machine
from ingress_machine import IngressMachine  # noqa: E402


def _batch(first: int, events: int, partitions: int) -> pd.DataFrame:
    """Points arriving one tick apart, a little out of order, partition ``i % partitions``."""
    rows = [(0, first + i, first + i, "point", first + i - i % 7, MIN_TIME,
             f'{{"k":{i % 5}}}', None, f"p{i % partitions}") for i in range(events)]
    return pd.DataFrame(rows, columns=[name for name, _ in IN_COLUMNS])


def _timed(machine: IngressMachine, batch: pd.DataFrame, vectorised: bool
           ) -> tuple[float, pd.DataFrame]:
    start = time.perf_counter()
    out = ordered.process_group(machine, batch) if vectorised else \
        out_rows_to_pandas(machine.process(in_rows_from_pandas(batch)))
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="100,5000,20000")
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    spec = StreamSpec.from_settings("s", EventShape.POINT, None, ordering=EventOrderingPolicy(
        late_arrival_tolerance=ticks(50), out_of_order_tolerance=ticks(5)))
    for partitions in (int(p) for p in args.partitions.split(",")):
        fast, rows = IngressMachine([spec]), IngressMachine([spec])
        result = {"partitions": partitions, "events": args.events}
        for name, first in (("new", 0), ("known", args.events)):
            batch = _batch(first, args.events, partitions)
            took, got = _timed(fast, batch, vectorised=True)
            took_rows, want = _timed(rows, batch, vectorised=False)
            order = ["seq"]
            pd.testing.assert_frame_equal(got.sort_values(order).reset_index(drop=True),
                                          want.sort_values(order).reset_index(drop=True),
                                          check_dtype=False)
            result[name] = {"vectorised_s": round(took, 2),
                            "vectorised_events_per_s": round(args.events / took),
                            "row_machine_s": round(took_rows, 2),
                            "row_machine_events_per_s": round(args.events / took_rows)}
        result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
