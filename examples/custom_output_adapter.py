"""A custom output adapter that takes each batch as one Arrow table: cars and tolls per booth per
3 minutes, written as one CSV file per batch by pyarrow (no pandas frame, no Python object per
result).

An output adapter needs ``write(items, batch_id)`` and ``close()``
(``cti.io.outputs.TableOutputAdapter`` gives both from ``write_table``). A query's output
goes to ``write_table(table, batch_id)`` instead where the adapter has it: the batch in
output order, an Arrow table of ``kind``, ``start``, ``end`` (ticks) and ``payload``
(canonical JSON; null on CTIs). A batch may come again (Spark replays a micro-batch after a
failure): writing it must replace, not append, and one file per batch id does that.
``partitioned = True`` lets each of Spark's tasks write its shard partition's part of a
batch at once (``partition=``). On Spark the booths' windows and those that took more than
20 in tolls go to two adapters from one streaming query (``SparkRuntime.write_queries``: the
entries read and ingested once for both).

Run: ``python examples/custom_output_adapter.py`` (in-process with ``--runtime local``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from _tolldata import bind_entries, hhmm, read_json, ticks
from toll_booth import MINUTE, per_booth

from cti import Application, EventShape, agg
from cti.io.outputs import TableOutputAdapter


class CsvOutputAdapter(TableOutputAdapter):
    """Each batch's events (CTIs are punctuation, not rows) as ``batch-NNNNNN.csv``. The
    base class gives ``write`` (items, as a plain stream's output comes) and ``write_frame``,
    both through ``write_table``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write_table(self, table: pa.Table, batch_id: int, partition: int | None = None) -> None:
        events = table.filter(pc.not_equal(table.column("kind"), "cti"))
        name = f"batch-{batch_id:06d}" + ("" if partition is None else f"-{partition:05d}")
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{name}.tmp"
        pacsv.write_csv(events, tmp)
        tmp.replace(self.directory / f"{name}.csv")  # atomic: a replayed batch replaces it


class CsvOutputAdapterFactory:
    partitioned = True

    def create(self, config: str, shape: EventShape) -> CsvOutputAdapter:
        return CsvOutputAdapter(Path(config))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runtime", default="spark", choices=["spark", "local"])
    args = parser.parse_args()

    booths = per_booth(bind_entries(Application("toll-csv")), cars=agg.count(),
                       tolls=agg.sum("TollAmount"))
    busy = booths.where(lambda p: p["tolls"] > 20)
    with tempfile.TemporaryDirectory() as tmp:
        out, busy_out = Path(tmp) / "cars_per_booth", Path(tmp) / "busy_booths"
        bound = [booths.to(CsvOutputAdapterFactory(), str(out)),
                 busy.to(CsvOutputAdapterFactory(), str(busy_out))]
        if args.runtime == "spark":
            from cti.runtime.spark import SparkRuntime

            SparkRuntime().write_queries(bound)  # both in one streaming query
        else:
            for query in bound:
                query.run(args.runtime)
        files = sorted(out.glob("batch-*.csv"))
        rows = pa.concat_tables([pacsv.read_csv(f) for f in files]).to_pylist()
        busy_rows = pa.concat_tables([pacsv.read_csv(f) for f in busy_out.glob("batch-*.csv")]
                                     ).to_pylist()
    print(f"== {len(rows)} rows in {len(files)} CSV file(s); the first few:")
    for row in rows[:5]:
        print(f"  {hhmm(row['start'])}-{hhmm(row['end'])} {row['payload']}")

    # The same numbers, straight from the data.
    want: dict[tuple, list] = defaultdict(list)
    for entry in read_json("Entry.json"):
        t = ticks(entry["EntryTime"])
        want[(t - t % (3 * MINUTE), entry["TollId"])].append(entry["TollAmount"])
    got = {(row["start"], json.loads(row["payload"])["TollId"]): json.loads(row["payload"])
           for row in rows}
    assert {row["kind"] for row in rows} == {"interval"}
    assert set(got) == set(want) and len(got) == len(rows)
    for key, tolls in want.items():
        assert got[key]["cars"] == len(tolls)
        assert abs(got[key]["tolls"] - sum(tolls)) < 1e-9
    busy_want = sorted((k, v["tolls"]) for k, v in got.items() if v["tolls"] > 20)
    assert sorted(((row["start"], json.loads(row["payload"])["TollId"]),
                   json.loads(row["payload"])["tolls"]) for row in busy_rows) == busy_want
    print(f"\n{len(got)} booth windows match the data, {len(busy_rows)} of them took more than "
          f"20 in tolls; runtime: {args.runtime}")


if __name__ == "__main__":
    main()
