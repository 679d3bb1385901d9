"""The held snapshot query's output path replayed in one process: the CPU seconds of the
shards' packing for the hold stage (``hold.routed_rows``), the hold stage's step per slot
(``hold._step``, its state in memory) and the sink's (``unpack_output`` and ``deliver`` to a
counting adapter), and the hold stage writing to the adapter itself (a partitioned adapter,
one shard per task), on the shards' output of ``bench/run.py``'s snapshot query over its
1,000,000 events (2 shards, one micro-batch), with the Spark workers' allocators
(``worker.lean_allocators``). Spark's own costs (the exchange, the JVM, its Python runners)
are not in it: the bench's ``task_run_s`` and ``process_cpu_s`` are.

    python bench/hold_replay.py [KEYS] [REPEAT]
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for path in (REPO, REPO / "tests"):
    sys.path.insert(0, str(path))

import numpy as np  # noqa: E402
from shard_runs import run_shards  # noqa: E402

import cti  # noqa: E402
from bench import run as bench  # noqa: E402
from bench.queries import cti_query  # noqa: E402
from cti.io.memory import MemoryInputAdapter, MemoryInputAdapterFactory  # noqa: E402
from cti.operators.output import deliver  # noqa: E402
from cti.runtime.spark import hold as hold_module  # noqa: E402
from cti.runtime.spark.hold import routed_rows  # noqa: E402
from cti.runtime.spark.hold_processor import Hold  # noqa: E402
from cti.runtime.spark.operators import OUTPUT_SCHEMA, _held  # noqa: E402
from cti.runtime.spark.packing import unpack_output  # noqa: E402
from cti.runtime.spark.worker import lean_allocators  # noqa: E402


class _State:
    """A ``ValueState`` in memory."""

    def __init__(self) -> None:
        self.value: Any = None

    def exists(self) -> bool:
        return self.value is not None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value


class _Count:
    def write_table(self, table: Any, batch_id: int, partition: int | None = None) -> None:
        self.rows = table.num_rows


def shard_outputs(keys: int) -> tuple[Any, list]:
    """The snapshot query's route and each of 2 shards' output of its one micro-batch."""
    data = Path(f"/tmp/cti-hold-replay-{keys}")
    if not bench.cti_file(data).exists():
        bench.generate(1_000_000, keys, 0, 1, data)
    events = bench.load_events(data)
    settings = cti.AdvanceTimeSettings(cti.AdvanceTimeGenerationSettings(
        bench.CTI_EVERY, delay=timedelta(microseconds=bench.DELAY_US),
        advance_to_infinity_on_shutdown=True), policy=cti.AdvanceTimePolicy.DROP)
    point = cti.EventShape.POINT
    stream = cti.CepStream.create("events", MemoryInputAdapterFactory(), events, point,
                                  settings, application=cti.Application())
    route, outs, _, _ = run_shards(cti_query("snapshot", stream),
                                   {"events": MemoryInputAdapter(events, point)},
                                   [{"events": [(0, len(events), True)]}], 2)
    return route, [o[0] for o in outs]


def _holds(route: Any, sent: list, sink: Any) -> list:
    """The hold stage's step for each slot (its state in memory); the blobs it passes on."""
    columns = [f.name for f in OUTPUT_SCHEMA.fields]
    blobs = []
    for slot in range(route.shards):
        rows = _held([r for per in sent for r in per if r[0] == slot])
        rows.insert(0, "query", np.int32(0))
        hold = Hold([route.shards], columns, [sink])
        hold.state = _State()
        got = hold_module._step(hold, 0, slot, rows)
        if got is not None:
            blobs.append(got["blob"].iloc[0])
    return blobs


def replay(route: Any, outs: list) -> str:
    """One pass of the output path, the hold stage's rows packed on to the sink's task and
    written there; its seconds, as a line."""
    t0 = time.process_time()
    sent = [routed_rows(route, s, o.events, o.ctis, o.tags) for s, o in enumerate(outs)]
    t1 = time.process_time()
    blobs = _holds(route, sent, None)
    t2 = time.process_time()
    written = 0
    for blob in blobs:
        count = _Count()
        deliver(count, unpack_output([blob]), 0, 0)
        written += count.rows
    t3 = time.process_time()
    return (f"shards' packing {t1 - t0:.3f} s, hold {t2 - t1:.3f} s, sink {t3 - t2:.3f} s, "
            f"total {t3 - t0:.3f} s; {written} rows, "
            f"{sum(len(r[2]) for per in sent for r in per)} bytes into the hold stage")


def replay_writing(route: Any, outs: list) -> str:
    """One pass of the output path with the hold stage writing the rows itself (a
    partitioned adapter, one shard per task: ``Hold``'s ``sink``); its seconds, as a line."""
    count = _Count()
    hold_module.write_partition = lambda sink, rows: deliver(count, rows, 0, 0)
    sent = [routed_rows(route, s, o.events, o.ctis, o.tags) for s, o in enumerate(outs)]
    t0 = time.process_time()
    _holds(route, sent, ("factory", "config", "shape"))
    t1 = time.process_time()
    return f"hold writing {t1 - t0:.3f} s"


def main() -> None:
    keys = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    route, outs = shard_outputs(keys)
    lean_allocators()
    for r in range(repeat):
        print(f"keys {keys}, run {r}: {replay(route, outs)}; "
              f"{replay_writing(route, outs)}", flush=True)


if __name__ == "__main__":
    main()
