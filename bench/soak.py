"""Soak: does ingress state stay flat while substream keys come and go?

    python bench/soak.py [--events 10000000] [--keys 1000000] [--batch 100000] [--seed 0]
                         [--no-purge]

One event-ordering stream with ``over="key"`` (late-arrival tolerance 1 s, out-of-order
tolerance 100 ms, ADJUST, ``purge_idle_timelines=True``) runs through ingress as each runtime
runs it per ingress group (``cti.engine.shard.ingress_step``: vectorised, the row machine for
the silent batches' clock ticks) in micro-batches of ``--batch`` rows. Events arrive 100 us
apart; each new key appears every events/keys events and is used, at random, by the events of
the next ``SPREAD`` keys' worth of time, then never again. Every
``SILENT_EVERY`` batches the input is silent for one batch: the batch is a single recorded
wall-clock tick (``clock_row``) a second on, so the timelines still held by buffered events
are released and purged without data.

After each batch one line on stderr: events so far, live timelines, buffered events, the
pickled state (what a checkpoint stores), events/s. At the end one JSON line on stdout:
events, keys, events/s, peak RSS, and the largest and last state sizes.
"""

from __future__ import annotations

import argparse
import json
import pickle
import random
import resource
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from cti import AdvanceTimePolicy, EventOrderingPolicy, EventShape  # noqa: E402
from cti.engine.batch import IN_ARROW, rows_table  # noqa: E402
from cti.engine.shard import ingress_step  # noqa: E402
from cti.forms.frame import arrow_to_pandas  # noqa: E402
from cti.forms.rows import InRow, clock_row  # noqa: E402
from cti.ingress.group import GroupRun  # noqa: E402
from cti.ingress.spec import StreamSpec  # noqa: E402

BASE = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in ticks
STEP = 100  # ticks (us) between arrivals
SPREAD = 100  # a key is used during the time of this many new keys
MAX_JITTER = 50_000  # an event's application time is up to 50 ms before its arrival
SILENT_EVERY = 10  # every 10th batch is a silent one (a clock tick only)


def policy(purge: bool = True) -> EventOrderingPolicy:
    return EventOrderingPolicy(late_arrival_tolerance=timedelta(seconds=1),
                               out_of_order_tolerance=timedelta(milliseconds=100),
                               action=AdvanceTimePolicy.ADJUST, over="key",
                               purge_idle_timelines=purge)


def machine(purge: bool = True) -> GroupRun:
    return GroupRun([StreamSpec.from_settings("s", EventShape.POINT, None,
                                                    ordering=policy(purge))])


def batches(events: int, keys: int, batch: int, seed: int = 0) -> Iterator[list[InRow]]:
    """The input in micro-batches: events with their keys, and now and then a silent batch."""
    rng = random.Random(seed)
    per_key = max(1, events // keys)  # events between two new keys
    k = 0
    n = 0  # micro-batches so far
    while k < events:
        n += 1
        if n % SILENT_EVERY == 0:
            yield [clock_row(0, k, BASE + k * STEP + 1_000_000)]
            continue
        rows = []
        for i in range(k, min(events, k + batch)):
            key = min(keys - 1, i // per_key + rng.randrange(SPREAD))
            arrival = BASE + i * STEP
            rows.append(InRow(0, i, arrival, "point", arrival - rng.randrange(MAX_JITTER), None,
                              f'{{"key":{key},"v":{i}}}'))
        k += len(rows)
        yield rows


def soak(events: int, keys: int, batch: int, seed: int = 0, purge: bool = True,
         report: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Run the soak; ``report`` gets each batch's line. Returns the summary."""
    m = machine(purge)
    done = out = 0
    peak_state = 0
    sizes = []
    began = time.perf_counter()
    for rows in batches(events, keys, batch, seed):
        out += len(ingress_step(m, arrow_to_pandas(rows_table(rows).select(IN_ARROW.names))))
        done += sum(1 for r in rows if r.kind == "point")
        ost = m.state.streams[0].ordering
        size = len(pickle.dumps(m.state.to_data(), protocol=pickle.HIGHEST_PROTOCOL))
        peak_state = max(peak_state, size)
        sizes.append(size)
        line = {"events": done, "timelines": len(ost.timelines),
                "buffered": len(ost.buffer), "purged": ost.purged, "state_bytes": size,
                "events_per_s": round(done / (time.perf_counter() - began))}
        if report:
            report(line)
    seconds = time.perf_counter() - began
    return {"events": done, "keys": keys, "batch": batch, "purge": purge,
            "output_rows": out, "seconds": round(seconds, 1),
            "events_per_s": round(done / seconds),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "peak_state_bytes": peak_state, "last_state_bytes": sizes[-1],
            "state_bytes_at_quarter": sizes[len(sizes) // 4]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-purge", action="store_true")
    args = ap.parse_args()
    summary = soak(args.events, args.keys, args.batch, args.seed, not args.no_purge,
                   report=lambda line: print(json.dumps(line), file=sys.stderr, flush=True))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
