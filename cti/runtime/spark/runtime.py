"""The Spark runtime: each ingress group runs as one Structured Streaming query."""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from functools import partial, reduce
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa
from pyspark import TaskContext
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from cti.engine.route import QueryRoute, routes
from cti.errors import BindingError
from cti.forms.rows import OUTPUT_STATUSES
from cti.io.dataframes import is_dataframe_input
from cti.operators.output import table_rows
from cti.results import DIAGNOSTIC_STATUSES, RunResult, derived_result
from cti.runtime.base import BatchSizes, queries_inputs, stream_caps
from cti.runtime.spark.dataframes import OUTPUT_COLUMNS, output_rows, packed_frame
from cti.runtime.spark.handle import RunningQuery, raise_cti_error
from cti.runtime.spark.hold_processor import hold_stage
from cti.runtime.spark.ingress import apply_ingress
from cti.runtime.spark.metrics import OBSERVATION, observe, observe_vectors
from cti.runtime.spark.operators import OP, PASS, apply_queries
from cti.runtime.spark.packing import unpack_output
from cti.runtime.spark.partitioning import default_tasks
from cti.runtime.spark.schema import out_row_from_spark
from cti.runtime.spark.session import get_spark
from cti.runtime.spark.shipping import ship_user_functions
from cti.runtime.spark.sink import Sink, write_output
from cti.runtime.spark.source import (
    FORMAT,
    CtiAdapterSource,
    Ticking,
    encode_sources,
    offset_log,
    recorded_ticks,
)
from cti.runtime.spark.state import CACHE_SETTING, PartStore, part_store
from cti.runtime.spark.worker import settle
from cti.time import positive_duration_ticks, to_duration_ticks

if TYPE_CHECKING:
    from cti.ingress.spec import StreamSpec
    from cti.query import IngressGroup, OutputBinding



def _write_partition(output: OutputBinding, batch_id: int, rows: Iterable[Any]) -> None:
    """Executor side: one stream's rows of one micro-batch, in order, to its output adapter."""
    settle("output")
    selected = output.select(out_row_from_spark(tuple(r)[1:]) for r in rows)
    if selected:
        adapter = output.factory.create(output.config, output.shape)
        adapter.write(selected, batch_id)
        adapter.close()


def _observed(query: StreamingQuery) -> list[dict[str, Any]]:
    """The ingress metrics of each micro-batch the query has reported, oldest first."""
    return [p["observedMetrics"][OBSERVATION].asDict() for p in query.recentProgress
            if OBSERVATION in p.get("observedMetrics", {})]


def batch_seconds(progress: Sequence[Any]) -> list[float]:
    """Each reported micro-batch's time (``durationMs.triggerExecution``), in seconds."""
    return [p["durationMs"].get("triggerExecution", 0) / 1000 for p in progress
            if "durationMs" in p]


# A stream that imports its CTIs (reference data) and that ``batch_sizes`` leaves uncapped
# comes at most this many rows per micro-batch (``SparkRuntime``).
REFERENCE_ROWS_PER_BATCH = 100_000


class SparkRuntime:
    """Runs ingress on Spark: adapters as streaming sources, ingress in the state store.

    ``checkpoint_location``: keep the query's checkpoint there (a run with the same location
    restarts from it, exactly once); by default a fresh temporary one per run.
    ``batch_sizes``: cap each source's micro-batches to these item counts, in turn (tests,
    back-pressure), or (a mapping) the named streams' only, by name; by default each
    micro-batch takes all that is available, except from a stream that imports its CTIs
    (reference data) and that ``batch_sizes`` leaves uncapped: at most
    ``reference_rows_per_batch`` items of it per micro-batch (None: all). A large table then
    loads over several micro-batches, each a shard's step over its share of the piece, not
    the whole table in one step (a worker's memory at a million rows: ``docs/performance.md``).
    The output is the same (rows merge by their arrival, not by micro-batch); the results
    that need the whole table wait for its last piece, as they wait for it anyway.
    After a run, ``progress`` holds the ingress metrics Spark reported per micro-batch
    (``observedMetrics["cti"]``, see ``cti.runtime.spark.metrics``) and ``batch_seconds``
    each micro-batch's time (Spark's ``triggerExecution``, in seconds; the benchmarks').
    Clock ticks of silent live ``arrival_clock="wall"`` streams (``cti.runtime.spark.source``):
    ``clock`` gives now in ticks (default: the wall clock; called on the driver, pickled with
    cloudpickle); ``tick_interval``, how long such a stream of a long-running query
    (``start()``, ``to_dataframe()``) stays quiet before it ticks again; ``recorded_ticks``
    reads the ticks a checkpoint's offset log holds.
    ``shards``: how many shards spread a query (its keys' state is split that way; fixed for a
    checkpoint's life). ``parallelism``: how many tasks run them (at most ``shards``; default:
    what the checkpoint last ran with, else as many as the session's cores, the largest
    divisor of ``shards`` up to them: ``partitioning.default_tasks``). A restart with another
    ``parallelism`` first re-spreads the checkpoint's state over that many tasks (Spark's
    offline state repartitioning), and gives the same output: the shards and their state are
    the same, only the tasks that run them change. A divisor of ``shards`` gives each task as
    many shards.
    """

    def __init__(self, spark: SparkSession | None = None,
                 checkpoint_location: str | None = None,
                 batch_sizes: BatchSizes | None = None, shards: int | None = None,
                 clock: Callable[[], int] | None = None,
                 tick_interval: Any = timedelta(seconds=1),
                 parallelism: int | None = None,
                 reference_rows_per_batch: int | None = REFERENCE_ROWS_PER_BATCH) -> None:
        self._spark = spark
        self.clock = clock
        self.tick_interval = to_duration_ticks(tick_interval, "tick_interval")
        for name, value in (("shards", shards), ("parallelism", parallelism),
                            ("reference_rows_per_batch", reference_rows_per_batch)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"SparkRuntime({name}=...) must be a whole number >= 1, "
                                 f"not {value!r}")
        if shards is not None and parallelism is not None and parallelism > shards:
            raise ValueError(f"SparkRuntime(parallelism={parallelism}) is more than its "
                             f"shards={shards}: a task runs whole shards, so the tasks past "
                             "the shards would stay idle; raise shards (a new checkpoint)")
        self.shards = shards
        self.parallelism = parallelism
        self.reference_rows_per_batch = reference_rows_per_batch
        self.checkpoint_location = checkpoint_location
        self.batch_sizes = (dict(batch_sizes) if isinstance(batch_sizes, Mapping)
                            else list(batch_sizes)) if batch_sizes else None
        self.progress: list[dict[str, Any]] = []
        self.batch_seconds: list[float] = []

    @property
    def shard_count(self) -> int:
        """How many shards spread a query: ``shards``; else the count an existing checkpoint
        at ``checkpoint_location`` was written with (a restart on a cluster of another size
        goes on with its state); else the session's default parallelism (its cores), never
        ``spark.sql.shuffle.partitions`` (a default session's 200 would mean 200 tasks per
        micro-batch, most of them idle)."""
        if self.shards:
            return self.shards
        recorded = (recorded_shards(self.checkpoint_location) if self.checkpoint_location
                    else None)
        return recorded or max(1, self.spark.sparkContext.defaultParallelism)

    def _start(self, writer: Any, checkpoint: str, sharded: bool = True,
               every: int | None = None) -> StreamingQuery:
        """Start a streaming write whose stateful stage has one partition per shard (Spark
        fixes a query's shuffle partitions when it starts and keeps them in the checkpoint);
        with ``sharded`` (its queries are spread over shards), after checking that the
        checkpoint, if it exists, was written with the same number of shards (a shard's state
        belongs to its keys: another count would give wrong results). ``every``: ticks
        between micro-batches (a trigger, ``trigger_ticks``; None: each as soon as the last is
        done)."""
        if every is not None:
            writer = writer.trigger(processingTime=f"{max(1, every // 1000)} milliseconds")
        if sharded:
            check_shard_layout(checkpoint, self.shard_count)
        recorded = recorded_partitions(checkpoint)
        tasks = self._tasks(checkpoint)
        if tasks > self.shard_count:
            raise BindingError(
                f"SparkRuntime(parallelism={tasks}) is more than the {self.shard_count} shards "
                f"of checkpoint {checkpoint}: a task runs whole shards, so the tasks past the "
                "shards would stay idle; a new checkpoint can have more shards")
        if self.parallelism is not None and recorded not in (None, tasks):
            respread(self.spark, checkpoint, recorded, tasks)
        conf = self.spark.conf
        before = conf.get("spark.sql.shuffle.partitions")
        conf.set("spark.sql.shuffle.partitions", str(tasks))
        try:
            return writer.option("checkpointLocation", checkpoint).start()
        finally:
            conf.set("spark.sql.shuffle.partitions", before)

    def _tasks(self, checkpoint: str) -> int:
        """How many tasks run the shards of a query with this checkpoint (``_start``)."""
        return self.parallelism or recorded_partitions(checkpoint) or default_tasks(
            self.shard_count, max(1, self.spark.sparkContext.defaultParallelism))

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = get_spark()
        self._spark.dataSource.register(CtiAdapterSource)
        return self._spark

    def source_frame(self, groups: Sequence[IngressGroup],
                     routes: Sequence[QueryRoute] | None = None,
                     long_running: bool = False) -> DataFrame:
        """The streaming DataFrame of every stream's input rows (one source for all adapter
        streams); with ``routes``, packed rows for each query shard
        (``cti.runtime.spark.packing``), the DataFrame inputs' among them
        (``cti.runtime.spark.dataframes``). ``long_running``: a silent wall-clock stream ticks
        again every ``tick_interval`` (else only with its group's movement and once when all
        is quiet, so processing all available input ends)."""
        specs = [group.specs() for group in groups]
        streams = [(g, i, s.factory, s.config, s.shape, specs[g][i].arrival_clock == "wall")
                   for g, group in enumerate(groups) for i, s in enumerate(group.streams)
                   if not is_dataframe_input(s)]
        caps = self._caps([(groups[g].streams[i].name, specs[g][i]) for g, i, *_ in streams])
        ticking = Ticking(self.clock, self.tick_interval if long_running else None)
        frames = [packed_frame(s, g, i, routes)
                  for g, group in enumerate(groups) for i, s in enumerate(group.streams)
                  if is_dataframe_input(s) and routes is not None]
        if streams or not frames:
            frames.insert(0, self.spark.readStream.format(FORMAT)
                          .option("spec", encode_sources(
                              streams, caps, routes,
                              self.spark.sparkContext.defaultParallelism, ticking)).load())
        return reduce(DataFrame.unionByName, frames)

    def _caps(self, streams: Sequence[tuple[str, StreamSpec]]) -> list[list[int] | None] | None:
        """The micro-batch caps of the source's ``streams`` ((name, spec) each):
        ``batch_sizes``', and ``reference_rows_per_batch`` for a stream that imports its CTIs
        where those leave it uncapped."""
        caps = stream_caps(self.batch_sizes, [name for name, _ in streams])
        if self.reference_rows_per_batch is None:
            return caps
        caps = [[self.reference_rows_per_batch] if cap is None and spec.import_from is not None
                else cap for cap, (_, spec) in zip(caps or [None] * len(streams), streams,
                                                   strict=True)]
        return caps if any(c is not None for c in caps) else None

    def ingress_frame(self, groups: Sequence[IngressGroup], long_running: bool = False
                      ) -> DataFrame:
        """The streaming DataFrame of the groups' ingress output rows (with a ``group`` column)."""
        frame = apply_ingress(self.source_frame(groups, long_running=long_running),
                              [group.specs() for group in groups])
        return observe(frame, groups)

    def write(self, group: IngressGroup, outputs: Sequence[OutputBinding]) -> None:
        """Run the group into output adapters, written by the executors, batch by batch."""
        self._drive(self._start_group(group, outputs))

    def _drive(self, query: StreamingQuery) -> None:
        """Process all available input, keep the reported metrics, stop; cti errors raised in a
        worker are raised again here as themselves."""
        try:
            query.processAllAvailable()
        except StreamingQueryException as exc:
            raise_cti_error(exc)
        finally:
            self.progress = _observed(query)
            self.batch_seconds = batch_seconds(query.recentProgress)
            query.stop()

    def _checkpoint(self) -> str:
        return self.checkpoint_location or tempfile.mkdtemp(prefix="cti-checkpoint-")

    def _parts(self, checkpoint: str | None) -> PartStore | None:
        """Where a query's shards keep their state's large arrays: ``cti-parts`` in its
        checkpoint, where that is a file system path (else None: in the state values), and
        for as many micro-batches after the state stops naming one as Spark keeps versions
        of the state; each Python worker's cache of parts holds at most the session's
        ``spark.cti.state.partCacheMB`` of its own memory (default ``state.CACHE_BYTES``)."""
        directory = parts_directory(checkpoint) if checkpoint else None
        if directory is None:
            return None
        retain = self.spark.conf.get("spark.sql.streaming.minBatchesToRetain", "100")
        cache = self.spark.conf.get(CACHE_SETTING, None)
        try:
            cache_bytes = None if not cache else int(float(cache) * (1 << 20))
        except ValueError:
            cache_bytes = -1
        if cache_bytes is not None and cache_bytes < 0:
            raise BindingError(f"{CACHE_SETTING} is a number of MB (0 or more), not {cache!r}")
        return part_store(directory, int(retain or 100), cache_bytes)

    def _start_group(self, group: IngressGroup, outputs: Sequence[OutputBinding],
                     checkpoint: str | None = None, long_running: bool = False,
                     every: int | None = None) -> StreamingQuery:
        """Start the group's query writing to output adapters; the caller stops it."""
        outputs = list(outputs)
        if any(is_dataframe_input(s) for s in group.streams):
            if len(outputs) != 1 or outputs[0].diagnostics:
                raise BindingError(
                    f"stream {outputs[0].name!r} reads a DataFrame: its diagnostics are in a "
                    "query's run() result (stream.run()), not an output adapter")
            o = outputs[0]
            return self._start_queries(
                [group.streams[o.stream].as_query().to(o.factory, o.config)], checkpoint,
                long_running, every)

        def write_batch(batch: DataFrame, batch_id: int) -> None:
            # The group is one key of the stateful stage, so its rows of the micro-batch are
            # all in that key's partition: each output gets them whole from that one task.
            batch.persist()
            for o in outputs:
                statuses = DIAGNOSTIC_STATUSES if o.diagnostics else OUTPUT_STATUSES
                rows = batch.filter((F.col("stream") == o.stream)
                                    & F.col("status").isin(*statuses))
                rows.foreachPartition(partial(_write_partition, o, batch_id))
            batch.unpersist()

        return self._start(self.ingress_frame([group], long_running).writeStream
                           .foreachBatch(write_batch), checkpoint or self._checkpoint(), False,
                           every)

    def start_write(self, group: IngressGroup, outputs: Sequence[OutputBinding],
                    every: Any = None, long_running: bool = True) -> RunningQuery:
        """Start writing the group's streams to output adapters as input arrives
        (``Query.start``); ``every`` and ``long_running`` as ``start_queries``'."""
        ticks = trigger_ticks(every, "SparkRuntime.start_write every")
        checkpoint = self._checkpoint()
        return RunningQuery(self._start_group(group, outputs, checkpoint, long_running, ticks),
                            checkpoint)

    def start_query(self, bound: Any) -> RunningQuery:
        """Start writing a query to its output adapter as input arrives
        (``DerivedQuery.start``)."""
        return self.start_queries([bound])

    def start_queries(self, bounds: Sequence[Any], every: Any = None,
                      long_running: bool = True) -> RunningQuery:
        """Start writing queries bound to output adapters as input arrives, in one streaming
        query (``write_queries``); ``every``: the time between micro-batches (a duration:
        ``timedelta(seconds=5)``, ``"5s"``; None: each as soon as the last is done).
        ``long_running`` (``source_frame``): False for a run that ends once the input
        available now is processed (``process_all_available``)."""
        ticks = trigger_ticks(every, "SparkRuntime.start_queries every")
        checkpoint = self._checkpoint()
        return RunningQuery(self._start_queries(bounds, checkpoint, long_running, ticks),
                            checkpoint)

    def run(self, group: IngressGroup) -> RunResult:
        return self.run_groups([group])[0]

    def run_groups(self, groups: Sequence[IngressGroup]) -> list[RunResult]:
        """Run several independent ingress groups in one streaming query (one key each)."""
        if any(is_dataframe_input(s) for g in groups for s in g.streams):
            # DataFrame inputs reach ingress through the query path (packed, numbered there).
            results = self.run_queries([g.streams[0].as_query() for g in groups])
            return [RunResult({n: r.streams[n] for n in g.names})
                    for g, r in zip(groups, results, strict=True)]
        per_group: list[list] = [[] for _ in groups]
        for r in self._run_to_memory(self.ingress_frame(groups), sharded=False):
            per_group[r[0]].append(out_row_from_spark(r[1:]))
        return [RunResult.from_rows(g.names, rows, g.overs)
                for g, rows in zip(groups, per_group, strict=True)]

    recorded_ticks = staticmethod(recorded_ticks)

    def _run_to_memory(self, frame: DataFrame, sharded: bool = True,
                       checkpoint: str | None = None) -> Iterator[Any]:
        """Run a streaming frame to the end of its input into the memory sink; its rows
        (``sharded``: see ``_start``; ``checkpoint``: the one the frame was built for, removed
        after the run unless it is ``checkpoint_location``)."""
        table = f"cti_{uuid.uuid4().hex}"
        checkpoint = checkpoint or self._checkpoint()
        query = self._start(frame.writeStream.format("memory").queryName(table)
                            .outputMode("append"), checkpoint, sharded)
        try:
            self._drive(query)
        finally:
            if self.checkpoint_location is None:
                shutil.rmtree(checkpoint, ignore_errors=True)
        try:
            # The memory sink is the query's output: read it back for the caller.
            yield from self.spark.table(table).toLocalIterator()
        finally:
            self.spark.sql(f"DROP VIEW IF EXISTS {table}")

    # ---- queries (temporal operators) -----------------------------------------------------------

    def query_frame(self, queries: Sequence[Any], with_inputs: bool = False,
                    long_running: bool = False, checkpoint: str | None = None
                    ) -> tuple[DataFrame, list[IngressGroup], list[list[tuple[int, int]]]]:
        """The streaming frame of the queries' output rows (``operators.OUTPUT_SCHEMA``);
        ``checkpoint``: where the query will keep its checkpoint (its shards' state parts go
        beside it; None: unknown, the state values hold everything)."""
        frame, groups, refs, _ = self._query_frame(queries, with_inputs, long_running,
                                                   checkpoint)
        return frame, groups, refs

    def _query_frame(self, queries: Sequence[Any], with_inputs: bool, long_running: bool,
                     checkpoint: str | None, sinks: Sequence[Sink | None] | None = None
                     ) -> tuple[DataFrame, list[IngressGroup], list[list[tuple[int, int]]],
                                list[bool]]:
        """``query_frame``, and which queries write their output to their ``sinks`` entry (a
        partitioned output adapter, or None) in the tasks that make it: where every task runs
        one shard, the shards themselves, or the hold stage where the plan has one. The
        frame then has no ``OP`` rows of those."""
        groups, refs = queries_inputs(queries)
        for q in queries:  # (before the routes are pickled: a group_by's key function)
            ship_user_functions(q.node)
        routed = routes(queries, groups, refs, self.shard_count, with_inputs)
        held = any(r.held for r in routed)
        if checkpoint is None or self._tasks(checkpoint) != self.shard_count or not any(
                sinks or ()):
            sinks = None
        # (a held query's shards never write: the hold stage does)
        frame = apply_queries(self.source_frame(groups, routed, long_running), queries,
                              groups, refs, with_inputs, routed, self._parts(checkpoint),
                              sinks, slotted=held)
        # Ingress metrics in the query's progress, from the shards' metric arrays.
        frame = observe_vectors(frame, groups)
        if held:  # (only a plan that needs it has the hold stage)
            frame = hold_stage(frame, routed, sinks)
        return frame, groups, refs, [sinks is not None and sinks[k] is not None
                                     for k in range(len(queries))]

    def run_query(self, query: Any, with_inputs: bool = True) -> RunResult:
        return self.run_queries([query], with_inputs)[0]

    def run_queries(self, queries: Sequence[Any], with_inputs: bool = True) -> list[RunResult]:
        """Run several queries in one streaming query; each one's result (with its input
        streams' own results when ``with_inputs``)."""
        checkpoint = self._checkpoint()
        frame, groups, refs = self.query_frame(queries, with_inputs, checkpoint=checkpoint)
        return query_results(self._run_to_memory(frame, checkpoint=checkpoint), queries, groups,
                             refs, with_inputs)

    def write_query(self, bound: Any) -> None:
        """Run a query into its output adapter (``write_queries``)."""
        self.write_queries([bound])

    def write_queries(self, bounds: Sequence[Any]) -> None:
        """Run queries bound to output adapters (``DerivedQuery``) in one streaming query, each
        written by the executors, batch by batch, in the streaming plan itself (then Spark's
        no-op sink), so a micro-batch costs no call back into the driver's Python."""
        self._drive(self._start_queries(bounds))

    def _start_queries(self, bounds: Sequence[Any], checkpoint: str | None = None,
                       long_running: bool = False, every: int | None = None
                       ) -> StreamingQuery:
        """Start one streaming query writing each bound query to its adapter: in the tasks
        that make its rows where the adapter is partitioned and every task runs one shard
        (``_query_frame``), else from its packed rows (an adapter that takes whole batches
        only: the micro-batch's rows meet in one task). ``every``: seconds between
        micro-batches (``_start``)."""
        checkpoint = checkpoint or self._checkpoint()
        sinks = [(b.factory, b.config, b.stream.shape) for b in bounds]  # (not the plans)
        parallel = [bool(getattr(b.factory, "partitioned", False)) for b in bounds]
        frame, _, _, written = self._query_frame(
            [b.stream for b in bounds], False, long_running, checkpoint,
            [s if p else None for s, p in zip(sinks, parallel, strict=True)])
        rest = {k: sinks[k] for k, w in enumerate(written) if not w}
        if rest:  # (else the shards or the hold stage wrote: the rows are the metrics' alone)
            blobs = frame.where(F.col("role") == OP).select("query", "blob")
            whole = not all(parallel[k] for k in rest)
            if whole:  # an adapter that takes whole batches only: they meet in one task
                blobs = blobs.repartition(1)
            frame = blobs.mapInArrow(partial(_write_query_partitions, rest, not whole),
                                     "written long")
        return self._start(frame.writeStream.format("noop").outputMode("append"), checkpoint,
                           every=every)

    def output_frame(self, stream: Any, payload_schema: Any = None) -> DataFrame:
        """A query's (or a bound stream's) output as a streaming DataFrame: a row per event and
        per output CTI, ``OUTPUT_COLUMNS`` (ticks), the payload JSON parsed into
        ``payload_schema``'s columns when given (``QueryOperators.to_dataframe``)."""
        query = stream if hasattr(stream, "node") else stream.as_query()
        frame, _, _ = self.query_frame([query], long_running=True)
        rows = (frame.where(F.col("role") == OP).select("blob")
                .mapInArrow(output_rows, OUTPUT_COLUMNS))
        if payload_schema is None:
            return rows
        parsed = F.from_json("payload", payload_schema)
        fields = parsed.alias("p")
        return rows.select("release", "kind", "start", "end", fields).select(
            "release", "kind", "start", "end", "p.*")


def trigger_ticks(every: Any, where: str) -> int | None:
    """``every`` (a duration, or None) as the ticks between a started query's micro-batches
    (``positive_duration_ticks``; ``where``: the parameter, for the message); None: each
    micro-batch as soon as the last is done."""
    return None if every is None else positive_duration_ticks(every, where)


def query_results(rows: Iterable[Any], queries: Sequence[Any], groups: Sequence[IngressGroup],
                  refs: Sequence[Sequence[tuple[int, int]]], with_inputs: bool
                  ) -> list[RunResult]:
    """Each query's result from the rows of a run of ``query_frame``'s frame (with its input
    streams' own results when ``with_inputs``)."""
    blobs: list[list[bytes]] = [[] for _ in queries]
    ingress: list[list] = [[] for _ in groups]
    for r in rows:
        query, role, group = r[0], r[1], r[4]
        if role == PASS:
            ingress[group].append(out_row_from_spark(r[5:-1]))
        elif role == OP:
            blobs[query].append(r[-1])
    outputs = [table_rows(unpack_output(b)) for b in blobs]
    results = [RunResult.from_rows(g.names, group_rows, g.overs)
               for g, group_rows in zip(groups, ingress, strict=True)]
    return [derived_result(q.name, [results[g] for g in sorted({g for g, _ in refs[k]})]
                           if with_inputs else [], outputs[k])
            for k, q in enumerate(queries)]


def _write_query_partitions(sinks: Mapping[int, Sink], parallel: bool,
                            batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Queries' output in one task (Arrow batches, each row a query's number and a shard's
    packed output), each query's in output order to a new output adapter of its ``sinks``
    entry, with the micro-batch's id (a replayed batch has the same id): with ``parallel``,
    the rows of the task's shard partition, written as that partition (the stateful stage's
    partition id: the same on a replay, as the shards' keys are hashed to the same
    partitions); else the whole micro-batch. Yields how many rows it wrote."""
    settle("output")
    blobs: dict[int, list[bytes]] = {k: [] for k in sinks}
    for b in batches:
        for query, blob in zip(b.column(0).to_pylist(), b.column(1).to_pylist(),
                               strict=True):
            blobs[query].append(blob)
    total = 0
    for query, packed in blobs.items():
        rows = unpack_output(packed)
        if len(rows):  # (handed over as Arrow: ``deliver`` orders it there)
            write_output(sinks[query], rows,
                         TaskContext.get().partitionId() if parallel else None)
            total += len(rows)
    yield pa.RecordBatch.from_pydict({"written": [total]})


_LAYOUT = "cti-shards.json"  # a checkpoint's shard count, next to Spark's own files
PARTS = "cti-parts"  # the shards' state parts, next to Spark's own files


def parts_directory(checkpoint: str) -> str | None:
    """Where the state parts of a query checkpointed at ``checkpoint`` go: its ``cti-parts``,
    where the checkpoint is a file system path (or a ``file:`` URI); None elsewhere (an object
    store: the parts would need its own client, so the state values hold everything)."""
    parsed = urlparse(checkpoint)
    if parsed.scheme == "file":
        path = parsed.path
    elif parsed.scheme and len(parsed.scheme) > 1:  # s3a://, hdfs://, dbfs:/ (not C:\)
        return None
    else:
        path = checkpoint
    return str(Path(path).absolute() / PARTS)


def recorded_shards(checkpoint: str) -> int | None:
    """The shard count a checkpoint was written with (``check_shard_layout``), if any."""
    import json
    path = Path(checkpoint, _LAYOUT)
    return int(json.loads(path.read_text())["shards"]) if path.exists() else None


def recorded_partitions(checkpoint: str) -> int | None:
    """How many tasks a checkpoint's stateful stage last ran on (Spark keeps the count in the
    metadata of each micro-batch's offsets), if it has run."""
    import json

    log = offset_log(checkpoint)
    if not log:
        return None
    _, lines = log[-1]
    return int(json.loads(lines[1])["conf"]["spark.sql.shuffle.partitions"])


def respread(spark: SparkSession, checkpoint: str, before: int, tasks: int) -> None:
    """Re-spread a stopped checkpoint's state from ``before`` tasks over ``tasks``: Spark's
    offline state repartitioning (a micro-batch of its own in the checkpoint, reading no
    input); the state of each shard moves whole."""
    try:
        spark._streamingCheckpointManager.repartition(checkpoint, tasks)
    except Exception as exc:
        raise BindingError(
            f"checkpoint {checkpoint} ran on {before} tasks and could not be re-spread over "
            f"{tasks} (SparkRuntime(parallelism={tasks})): {exc}; restart it once with "
            f"parallelism={before} (so that its last micro-batch completes), then change it"
        ) from exc


def check_shard_layout(checkpoint: str, shards: int) -> None:
    """Record ``shards`` in a new checkpoint; refuse an existing one written with another
    count, naming both."""
    import json
    path = Path(checkpoint, _LAYOUT)
    recorded = recorded_shards(checkpoint)
    if recorded is not None:
        if recorded != shards:
            raise BindingError(
                f"checkpoint {checkpoint} was written with {recorded} shards, and this "
                f"SparkRuntime has {shards}: a shard's state holds its keys, so the count "
                f"cannot change under a checkpoint; use SparkRuntime(shards={recorded}) or a "
                "new checkpoint location")
        return
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"shards": shards}))
