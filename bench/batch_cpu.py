"""Each micro-batch's CPU seconds of cti-local (a query of ``bench/run.py`` on its data).

```
python bench/batch_cpu.py --query long-window --events 1000000 --keys 100000 --batches 50
```

``bench/run.py`` reports wall seconds per micro-batch, which on a shared machine measure the
other processes as much as this one. This runs the same query on ``LocalRuntime`` (after the
same warm-up) into the same counting adapter, which notes the process's CPU time
(``time.process_time``: this process's threads, Arrow's included) at each micro-batch it is
given: one JSON line with the run's CPU seconds, each micro-batch's and the medians of the
first and of the last ten (``first10_cpu_s``, ``last10_cpu_s``). Options as ``bench/run.py``
(``--query``, ``--events``, ``--keys``, ``--batches``, ``--seed``, ``--key-rate``).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import run  # noqa: E402  (the repository on the path first)

_TICKS: list[float] = []  # the CPU time at each micro-batch's output


class TimedCountingAdapterFactory(run.CountingOutputAdapterFactory):
    """The bench's counting adapter, noting the CPU time at each batch it writes."""

    def create(self, directory: str, shape: Any) -> Any:
        adapter = super().create(directory, shape)
        write_table = adapter.write_table

        def timed(table: Any, batch_id: int, partition: int | None = None) -> None:
            write_table(table, batch_id, partition)
            _TICKS.append(time.process_time())

        adapter.write_table = timed
        return adapter


def cpu_line(root: Path, args: Any) -> dict[str, Any]:
    """The timed run's CPU seconds, per micro-batch and in all (after a warm-up run)."""
    from cti.runtime.local import LocalRuntime

    run.OUTPUTS["cpu-timed"] = TimedCountingAdapterFactory
    source = run._cti_source(root / "warmup", "parquet", "count")
    run._cti_run(*source[:2], LocalRuntime(), "none", "count", None, args.query, "cpu-timed")
    factory, config, _ = run._cti_source(root / "events", "parquet", "count")
    _TICKS[:] = [time.process_time()]
    _, rows, _ = run._cti_run(factory, config, LocalRuntime(run._batch_sizes(args)), "none",
                              "count", None, args.query, "cpu-timed")
    seconds = list(np.diff(_TICKS))
    times = run.batch_times(seconds)
    return {"system": "cti-local", "query": args.query, "events": args.events,
            "keys": args.keys, "batches": args.batches, "output_rows": rows,
            "cpu_s": round(_TICKS[-1] - _TICKS[0], 3),
            "first10_cpu_s": times["first10_batch_s"], "last10_cpu_s": times["last10_batch_s"],
            "batch_cpu_s": [round(s, 4) for s in seconds]}


def main(argv: list[str] | None = None) -> int:
    args = run.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="cti-bench-cpu-"))
    try:
        run.generate(args.events, args.keys, args.seed, args.batches, tmp / "events",
                     args.key_rate)
        run.generate(run.WARMUP_EVENTS, min(args.keys, 10), args.seed + 1, 1, tmp / "warmup")
        print(json.dumps(cpu_line(tmp, args)), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
