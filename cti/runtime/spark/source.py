"""Input adapters as one Spark streaming source (PySpark Python Data Source API).

One source reads every stream of a query: its options carry the pickled list of streams
(group, index in group, factory, config, shape, wall clock or not). The driver asks each
adapter how far its input goes (``latestOffset``: one entry per stream), executors re-create
the adapters and read the rows of their offset ranges (each stream's new rows cut into pieces,
``cuts``), so a micro-batch can be replayed after a failure. When a bounded adapter
(``is_complete()``) is exhausted, its last batch ends with an end-of-input row, where ingress
flushes at shutdown. Factories are pickled with cloudpickle, so classes defined in a script or
notebook work too.

Clock ticks (``arrival_clock="wall"``, ``cti.forms.rows.clock_row``): the driver decides them and
records each in the stream's end offset (``"tick"``), so they land in Spark's offset log and a
replayed micro-batch reads the same tick; the executor reading the range yields the clock row.
A live wall-clock stream (adapter not complete) that did not move in a trigger gets a tick

- when another stream of its ingress group moved in the same trigger;
- in the first trigger in which its whole group is quiet (the tick "nothing more came", as the
  in-process runtime gives one when a run stops), once per quiet spell;
- with ``tick_interval`` (long-running queries only), again whenever its last tick or movement
  is at least that long ago by the clock.

So a query driven to "all available input processed" (``processAllAvailable``) ends: after the
quiet spell's tick, a trigger finds nothing new.
"""

from __future__ import annotations

import base64
import pickle
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from pyspark import cloudpickle
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import BinaryType, IntegerType, LongType, StructField, StructType

from cti.runtime.spark.schema import IN_SCHEMA

if TYPE_CHECKING:
    from cti.engine.route import QueryRoute

FORMAT = "cti_adapter"
READ_CHUNK = 500_000  # at most this many rows per input partition of one stream
MIN_PIECE = 10_000  # a range is not cut into pieces smaller than this to fill the cores

# group, index in group, factory, config, shape, and whether the stream's arrival clock is the
# wall clock (``arrival_clock="wall"``: it gets clock ticks while silent)
SourceStream = tuple[int, int, Any, Any, Any, bool]


@attrs.frozen
class Ticking:
    """How the source makes clock ticks: ``clock()`` is now in ticks (None: the wall clock);
    ``interval`` (ticks, None: never) the quiet time after which a silent wall-clock stream
    ticks again (long-running queries)."""

    clock: Any = None
    interval: int | None = None

    def now(self) -> int:
        return self.clock() if self.clock is not None else time.time_ns() // 1000


def encode_sources(streams: Sequence[SourceStream], caps: Sequence[list[int] | None] | None,
                   routes: Sequence[QueryRoute] | None = None, cores: int = 1,
                   ticking: Ticking | None = None) -> str:
    """The source's ``spec`` option. ``caps``: each stream's micro-batch caps, in turn (None:
    all it has; ``cti.runtime.base.stream_caps``). With ``routes`` the source reads for
    queries: it sends each query shard packed rows (``cti.runtime.spark.packing``), else one
    row per input row. ``cores``: how many read tasks can run at once (a large range is cut
    into a multiple). ``ticking``: the clock ticks of wall-clock streams (see the module's
    docstring).

    Three pickles in one, each unpickled only where it is needed (``_Spec``): the driver's
    processes that plan the source need neither the routes (whose modules import pandas) nor,
    to give the schema, the streams (their adapters' modules)."""
    blob = pickle.dumps(_Spec(routes is not None, cloudpickle.dumps(
        (list(streams), list(caps or []), max(1, cores), ticking or Ticking())),
        None if routes is None else cloudpickle.dumps(routes)))
    return base64.b64encode(blob).decode("ascii")


@attrs.frozen
class _Spec:
    """The source's spec: whether it reads for queries (``routes`` given), the pickled
    (streams, caps, cores, ticking), the pickled routes."""

    packed: bool
    streams: bytes
    routes: bytes | None


def _spec(text: str) -> _Spec:
    return pickle.loads(base64.b64decode(text))


def _streams(spec: _Spec) -> tuple[list[SourceStream], list[list[int] | None], int, Ticking]:
    return pickle.loads(spec.streams)


def _routes(spec: _Spec) -> list[QueryRoute] | None:
    return None if spec.routes is None else pickle.loads(spec.routes)


def cuts(start: int, end: int, cores: int) -> list[int]:
    """Where rows [start, end) are cut into pieces read in parallel: pieces of at most
    ``READ_CHUNK`` rows, as many as a multiple of ``cores`` where that leaves each at least
    ``MIN_PIECE`` rows, of equal size. ``[start]`` for an empty range."""
    n = end - start
    needed = max(1, -(-n // READ_CHUNK))
    pieces = min(-(-needed // cores) * cores, max(needed, n // MIN_PIECE))
    return sorted({start + n * p // pieces for p in range(pieces)})


class _Range(InputPartition):
    def __init__(self, stream: int, start: int, end: int, eos: bool,
                 tick: int | None = None) -> None:
        super().__init__((stream, start, end, eos, tick))


class CtiAdapterStreamReader(DataSourceStreamReader):
    """Each stream's offset: ``pos`` (rows delivered), ``eos``, and for wall-clock streams
    ``tick`` (this micro-batch's clock tick, else None), ``at`` (the clock at its last
    movement or tick) and ``quiet`` (its quiet-spell tick given)."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self._decoded: tuple | None = None  # (the spec's streams, unpickled where used)

    def __getstate__(self) -> dict:
        return {"spec": self.spec, "_decoded": None}  # (what executors get: the spec alone)

    @property
    def streams(self) -> list[SourceStream]:
        return self._stream_spec()[0]

    @property
    def caps(self) -> list[list[int] | None]:
        return self._stream_spec()[1]

    @property
    def cores(self) -> int:
        return self._stream_spec()[2]

    @property
    def ticking(self) -> Ticking:
        return self._stream_spec()[3]

    def _stream_spec(self) -> tuple:
        """The streams, caps, cores and ticking, unpickled on first use: the process that
        plans the source's reads creates a reader, never asks it, and pickles it for the
        executors; that process then imports no adapter's module."""
        if self._decoded is None:
            self._decoded = _streams(_spec(self.spec))
        return self._decoded

    def initialOffset(self) -> dict:
        return {"batch": 0, **{str(k): {"pos": 0, "eos": False} for k in range(len(self.streams))}}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        start = start or self.initialOffset()
        end: dict[str, Any] = {"batch": start["batch"]}
        moved_groups: set[int] = set()
        for k, (group, _i, factory, config, shape, _wall) in enumerate(self.streams):
            s = start[str(k)]
            if s["eos"]:
                end[str(k)] = s
                continue
            adapter = factory.create(config, shape)
            available = adapter.latest_offset()
            cap = self.caps[k] if self.caps else None
            pos = available if cap is None else min(
                available, s["pos"] + cap[start["batch"] % len(cap)])
            eos = pos == available and adapter.is_complete()
            if eos and _release(adapter):  # (never read here again: its cache can go)
                from cti.runtime.spark.worker import release_memory

                release_memory()  # (a million reference rows' table: 100 MB of Arrow's pool)
            end[str(k)] = {"pos": pos, "eos": eos}
            if pos != s["pos"] or eos:
                moved_groups.add(group)
        wall = [k for k, stream in enumerate(self.streams) if stream[5] and not end[str(k)]["eos"]]
        now = self.ticking.now() if wall else 0
        ticked = False
        for k in wall:
            s, e, group = start[str(k)], end[str(k)], self.streams[k][0]
            if e["pos"] != s["pos"]:  # it delivered: no tick, and no quiet spell yet
                e.update(tick=None, at=now, quiet=False)
                continue
            tick = self._tick(s, group in moved_groups, now)
            ticked = ticked or tick is not None
            e.update(tick=tick, at=s.get("at") if tick is None else now,
                     quiet=group not in moved_groups
                     and (tick is not None or s.get("quiet", False)))
        if not moved_groups and not ticked:
            return start
        end["batch"] += 1
        return end

    def _tick(self, s: dict, group_moved: bool, now: int) -> int | None:
        """A silent live wall-clock stream's tick in this trigger (None: none): see the
        module's docstring."""
        interval = self.ticking.interval
        if group_moved or not s.get("quiet", False):
            return now
        if interval is not None and (s.get("at") is None or now - s["at"] >= interval):
            return now
        return None

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for k in range(len(self.streams)):
            s, e = start[str(k)], end[str(k)]
            if e["pos"] > s["pos"] or (e["eos"] and not s["eos"]):
                # Large ranges are read in pieces, in parallel (rows carry their sequence
                # numbers, so ingress restores the order); end of input rides on the last.
                at = cuts(s["pos"], e["pos"], self.cores)
                for a, b in zip(at, [*at[1:], e["pos"]], strict=True):
                    last = b == e["pos"]
                    parts.append(_Range(k, a, b, last and e["eos"] and not s["eos"]))
            elif e.get("tick") is not None:  # a silent stream's recorded clock tick
                parts.append(_Range(k, e["pos"], e["pos"], False, e["tick"]))
        return parts

    def read(self, partition: InputPartition) -> Iterator[tuple | Any]:
        spec = _spec(self.spec)
        streams, routes = _streams(spec)[0], _routes(spec)
        k, start, end, eos, tick = partition.value
        group, index, factory, config, shape, _ = streams[k]
        adapter = factory.create(config, shape) if end > start else None
        # Executor side only: the driver's source process never imports pandas or pyarrow.
        from cti.engine.batch import piece
        from cti.engine.route import stream_reads
        from cti.runtime.spark.packing import packed, with_group
        from cti.runtime.spark.worker import release_memory, settle

        settle("source")

        if routes is not None:
            events_only = getattr(adapter, "events_only", False)
            rows = piece(adapter, index, start, end, eos, tick,
                         stream_reads(routes, group, index))
            yield from packed(routes, group, rows, start, events_only and tick is None,
                              lambda: getattr(adapter, "arrivals_in_order", False))
        else:
            yield from with_group(piece(adapter, index, start, end, eos, tick),
                                  group).to_batches()
        if eos:  # (the last range of a bounded input: what the adapter cached can go)
            _release(adapter)
        release_memory()  # (a large range's rows and their Arrow buffers, freed by now)

    def commit(self, end: dict) -> None:
        pass


class CtiAdapterSource(DataSource):
    """``spark.readStream.format("cti_adapter").option("spec", encode_sources(...)).load()``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> Any:
        return PACKED_SCHEMA if _spec(self.options["spec"]).packed else SOURCE_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CtiAdapterStreamReader(self.options["spec"])


SOURCE_SCHEMA = StructType([*IN_SCHEMA.fields, StructField("group", IntegerType(), False)])
PACKED_SCHEMA = StructType([
    StructField("query", IntegerType(), False),
    StructField("slot", IntegerType(), False),
    StructField("group", IntegerType(), False),
    StructField("seq", LongType(), False),  # the piece's first sequence number
    StructField("blob", BinaryType(), False),
])


def _release(adapter: Any) -> bool:
    """An adapter's optional ``release()``: forget what it cached of an input read to its end
    (``ReferenceDataInputAdapter``: the file's table, kept per process otherwise). Whether
    it had one."""
    release = getattr(adapter, "release", None)
    if release is not None:
        release()
    return release is not None


def offset_log(checkpoint: str) -> list[tuple[int, list[str]]]:
    """A query checkpoint's offset log: each micro-batch's id and lines (the version, Spark's
    metadata, then each source's offset), in order; none before its first micro-batch."""
    from pathlib import Path

    logs = Path(checkpoint, "offsets")
    if not logs.is_dir():
        return []
    return [(int(p.name), p.read_text().splitlines())
            for p in sorted((p for p in logs.iterdir() if p.name.isdigit()),
                            key=lambda p: int(p.name))]


def recorded_ticks(checkpoint: str) -> list[tuple[int, int, int, int]]:
    """The clock ticks a query's checkpoint recorded (its offset log): (micro-batch id, the
    source's stream number, the sequence number the tick precedes, the tick), in order."""
    import json

    out = []
    for batch, lines in offset_log(checkpoint):
        for line in lines[2:]:  # the version, then Spark's metadata
            offset = json.loads(line) if line.startswith("{") else None
            if not isinstance(offset, dict) or "batch" not in offset:
                continue
            for k, e in sorted(((int(k), e) for k, e in offset.items() if k.isdigit())):
                if isinstance(e, dict) and e.get("tick") is not None:
                    out.append((batch, k, e["pos"], e["tick"]))
    return out
