"""Each micro-batch's CPU seconds of cti-local, by function: where a later micro-batch pays more.

```
python bench/batch_functions.py --query long-window --events 1000000 --keys 100000 \
    --batches 50 --time cti.operators.window_partials:Partials.take \
    --time cti.operators.output:_order
```

``bench/batch_cpu.py``'s run (the same warm-up, data and counting adapter), with each
``--time module:function`` (or ``module:Class.method``) wrapped in a timer of the process's CPU
(``time.process_time``; a function called inside another is counted in both). One JSON line:
for the whole micro-batch (``total``) and for each function, the median CPU seconds of the
first ten micro-batches and of the last ten (``bench/run.py``'s ``first10_batch_s`` and
``last10_batch_s``), and the output rows of each micro-batch. A module that imports a function
by name keeps its own reference: time the function where it is called from.
"""

from __future__ import annotations

import functools
import importlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import batch_cpu, run  # noqa: E402  (the repository on the path first)

_SPENT: dict[str, float] = {}  # each timed function's CPU seconds so far
_MARKS: list[tuple[float, dict[str, float], int]] = []  # (CPU time, _SPENT, rows) per batch
# (a timer's label: the module's last name and the function's path, ``output:_order``)


def _timed(name: str) -> None:
    """Wrap the function ``name`` (``module:function`` or ``module:Class.method``) in place."""
    module, path = name.split(":")
    owner: Any = importlib.import_module(module)
    *outer, attr = path.split(".")
    for part in outer:
        owner = getattr(owner, part)
    original = getattr(owner, attr)
    label = f"{module.rsplit('.', 1)[-1]}:{path}"

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return original(*args, **kwargs)
        finally:
            _SPENT[label] = _SPENT.get(label, 0.0) + time.process_time() - start

    setattr(owner, attr, timed)


class MarkingAdapterFactory(batch_cpu.TimedCountingAdapterFactory):
    """``batch_cpu``'s adapter, noting also the timers and the rows at each batch it
    writes."""

    def create(self, directory: str, shape: Any) -> Any:
        adapter = super().create(directory, shape)
        write_table = adapter.write_table

        def marked(table: Any, batch_id: int, partition: int | None = None) -> None:
            write_table(table, batch_id, partition)
            _MARKS.append((time.process_time(), dict(_SPENT), table.num_rows))

        adapter.write_table = marked
        return adapter


def _medians(marks: list[tuple[float, dict[str, float], int]]) -> dict[str, Any]:
    """The first-ten and last-ten medians of each micro-batch's CPU, in all and by function."""
    names = sorted({n for _, spent, _ in marks for n in spent})
    per_batch = [{"total": t1 - t0} | {n: s1.get(n, 0.0) - s0.get(n, 0.0) for n in names}
                 for (t0, s0, _), (t1, s1, _) in zip(marks, marks[1:], strict=False)]
    return {name: [round(statistics.median(b[name] for b in part), 4)
                   for part in (per_batch[:10], per_batch[-10:])]
            for name in ["total", *names]}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    names = [argv[i + 1] for i, a in enumerate(argv) if a == "--time"]
    rest = [a for i, a in enumerate(argv) if a != "--time" and (i == 0 or argv[i - 1] != "--time")]
    args = run.parse_args(rest)
    for name in names:
        _timed(name)
    batch_cpu.TimedCountingAdapterFactory = MarkingAdapterFactory  # (cpu_line's adapter)
    tmp = Path(tempfile.mkdtemp(prefix="cti-bench-functions-"))
    try:
        run.generate(args.events, args.keys, args.seed, args.batches, tmp / "events",
                     args.key_rate)
        run.generate(run.WARMUP_EVENTS, min(args.keys, 10), args.seed + 1, 1, tmp / "warmup")
        line = batch_cpu.cpu_line(tmp, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    timed = len(line["batch_cpu_s"])  # (the timed run's marks, from its start on)
    marks = [(batch_cpu._TICKS[0], _MARKS[-timed - 1][1], 0), *_MARKS[-timed:]]
    print(json.dumps({"query": args.query, "events": args.events, "keys": args.keys,
                      "batches": args.batches, "cpu_s": line["cpu_s"],
                      "first10_last10_cpu_s": _medians(marks),
                      "batch_rows": [rows for _, _, rows in marks[1:]]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
