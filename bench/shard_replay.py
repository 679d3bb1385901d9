"""The shards' stateful stage of a ``bench/run.py`` query replayed in one process: the CPU
seconds of each shard's call of the stateful function (``operators.query_function``: unpack,
ingress, the query's step, the state's write, the packing of its output and metrics), on
the packed rows Spark's source makes of the bench's 1,000,000 events (``packing.packed``,
2 shards, one micro-batch, the state's parts in a temporary directory), with the Spark
workers' allocators (``worker.lean_allocators``). Spark's own costs (the exchange, the JVM,
its Python runners' Arrow conversion) are not in it: the bench's ``task_run_s`` is.

    python bench/shard_replay.py [QUERY] [KEYS] [REPEAT] [--profile FILE]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import pandas as pd  # noqa: E402

from bench import run as bench  # noqa: E402
from bench.queries import cti_query  # noqa: E402

SHARDS = 2


class _State:
    """A ``GroupState`` in memory (``applyInPandasWithState``'s)."""

    def __init__(self) -> None:
        self.value: Any = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value


def packed_input(query: Any) -> tuple[Any, dict[int, pd.DataFrame]]:
    """The stateful function for ``query`` (2 shards) and each slot's packed input rows."""
    from cti.engine.batch import piece
    from cti.engine.route import routes, stream_reads
    from cti.runtime.base import queries_inputs
    from cti.runtime.spark.operators import query_function
    from cti.runtime.spark.packing import packed
    from cti.runtime.spark.source import cuts
    from cti.runtime.spark.state import part_store

    groups, refs = queries_inputs([query])
    routed = routes([query], groups, refs, SHARDS, False)
    rows: dict[int, list[tuple]] = {}
    for g, group in enumerate(groups):
        for index, stream in enumerate(group.streams):
            adapter = stream.factory.create(stream.config, stream.shape)
            n = adapter.latest_offset()
            at = cuts(0, n, SHARDS)
            for a, b in zip(at, [*at[1:], n], strict=True):
                got = piece(adapter, index, a, b, b == n, None, stream_reads(routed, g, index))
                for r in packed(routed, g, got, a):
                    rows.setdefault(r[1], []).append(r)
    columns = ["query", "slot", "group", "seq", "blob"]
    frames = {slot: pd.DataFrame(r, columns=columns) for slot, r in rows.items()}
    parts = part_store(tempfile.mkdtemp(prefix="cti-shard-replay-"), 100)
    held = any(r.held for r in routed)
    return query_function([query], groups, refs, False, routed, parts, None, held), frames


def replay(query: Any) -> str:
    """One pass of the shards' stage on fresh state; its CPU seconds per shard, as a line."""
    run, frames = packed_input(query)
    from cti.runtime.spark.packing import unpack_output

    seconds, blobs = [], []
    for slot, frame in sorted(frames.items()):
        t0 = time.process_time()
        for out in run((0, slot), iter([frame]), _State()):
            blobs += [b for b in out["blob"] if b is not None]
        seconds.append(time.process_time() - t0)
    t0 = time.process_time()
    rows = sum(unpack_output([b]).num_rows for b in blobs)
    read = time.process_time() - t0
    return (f"shards {' + '.join(f'{s:.3f}' for s in seconds)} = {sum(seconds):.3f} CPU s; "
            f"{len(blobs)} blobs, {sum(map(len, blobs))} bytes, {rows} rows, read in "
            f"{read:.3f} s")


def stream_of(query_name: str, keys: int) -> Any:
    """The bench's query ``query_name`` over its Parquet input of 1,000,000 events."""
    import cti

    data = Path(tempfile.gettempdir()) / f"cti-shard-replay-{keys}"
    if not bench.cti_file(data).exists():
        bench.generate(1_000_000, keys, 0, 1, data)
    factory, config, _ = bench._cti_source(data, "parquet")
    settings = cti.AdvanceTimeSettings(cti.AdvanceTimeGenerationSettings(
        bench.CTI_EVERY, delay=pd.Timedelta(microseconds=bench.DELAY_US).to_pytimedelta(),
        advance_to_infinity_on_shutdown=True), policy=cti.AdvanceTimePolicy.DROP)
    stream = cti.CepStream.create("events", factory, config, cti.EventShape.POINT, settings,
                                  application=cti.Application())
    return cti_query(query_name, stream)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    name = args[0] if args else "snapshot"
    keys = int(args[1]) if len(args) > 1 else 10
    repeat = int(args[2]) if len(args) > 2 else 3
    profile = sys.argv[sys.argv.index("--profile") + 1] if "--profile" in sys.argv else None
    from cti.runtime.spark.worker import settle

    settle("query")
    query = stream_of(name, keys)
    for r in range(repeat):
        if profile and r == repeat - 1:
            import cProfile

            cProfile.runctx("line = replay(query)", globals(), ns := {"query": query}, profile)
            line = ns["line"]
        else:
            line = replay(query)
        print(f"{name}, keys {keys}, run {r}: {line}", flush=True)
    shutil.rmtree(Path(tempfile.gettempdir()) / "cti-shard-replay-parts", ignore_errors=True)


if __name__ == "__main__":
    main()
