"""``cti run QUERY.py``: runs a query file's streams as a job.

``cti run QUERY.py [--runtime spark|local] [--master M] [--checkpoint DIR] [--output DIR]
[--until-idle]``: loads the streams the file names (``cti.cli.query_file``), writes each to a Delta
table ``DIR/<name>`` (``--output``; without it the rows are counted, not kept), and shows
progress per input and output while it runs. On Spark the outputs are one streaming query,
started once, with its checkpoint in ``<checkpoint>/_outputs`` (by default
``DIR/_checkpoints``; each input's dead letters a query of their own in
``<checkpoint>/_dead_letters/<input>``; on the local runtime each output has the in-process
engine's checkpoint ``<checkpoint>/<name>``, ``cti.cli.local_job``): running the same
command again resumes where the last run stopped, exactly once (the Delta commits record the
micro-batch ids). ``--until-idle`` stops once all available input is processed; otherwise the
job looks for new input every ``--interval`` seconds until interrupted (Ctrl-C stops after the
current micro-batch). See docs/cli.md.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import click

from cti.cli.dead_letters import (
    DEAD_LETTERS,
    DeadLetterConfig,
    DeadLetterOutputAdapterFactory,
    read_dead_letters,
)
from cti.cli.errors import streams_of, user_error
from cti.cli.progress import Display, RunProgress, frame_metrics
from cti.events import EventShape

BATCH_SIZE_ENV = "CTI_RUN_BATCH_SIZE"  # caps each source's micro-batches (tests, back-pressure)
OUTPUTS = "_outputs"  # the checkpoint of the Spark query that writes the job's outputs
_NAMES = "cti-outputs.json"  # the outputs that query writes, beside Spark's files


# ---- outputs ----------------------------------------------------------------------------------


class CountingOutputAdapter:
    """Counts a batch's events into ``directory/batch-NNNNNNNNNN.count`` (a replay replaces
    it): the output of a job run without ``--output``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def write(self, items: Any, batch_id: int) -> None:
        self._save(sum(1 for i in items if hasattr(i, "start")), batch_id)

    def write_frame(self, frame: Any, batch_id: int) -> None:
        self._save(int((frame["kind"] != "cti").sum()), batch_id)

    def _save(self, count: int, batch_id: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        final = self.directory / f"batch-{batch_id:010d}.count"
        tmp = self.directory / f".{final.name}.tmp"
        tmp.write_text(str(count))
        os.replace(tmp, final)

    def close(self) -> None:
        pass


class CountingOutputAdapterFactory:
    def create(self, config: Any, shape: EventShape) -> CountingOutputAdapter:
        return CountingOutputAdapter(Path(config))


@attrs.frozen
class Output:
    """One named stream of the job, where it goes, and where its checkpoint is."""

    name: str
    stream: Any
    factory: Any
    config: Any
    checkpoint: Path
    rows: Callable[[], int]
    dead_letters_of: str | None = None  # the input whose dead letters this writes

    def query(self) -> Any:
        if self.dead_letters_of is not None:
            return self.stream.diagnostics_to(self.factory, self.config)
        return self.stream.to(self.factory, self.config)

    def bound_query(self) -> Any:
        """The output as a query bound to its adapter (an input stream's as the query of its
        own output), to run with the job's other outputs in one streaming query."""
        from cti.query import CepStream

        stream = self.stream.as_query() if isinstance(self.stream, CepStream) else self.stream
        return stream.to(self.factory, self.config)


def _delta_rows(path: Path) -> int:
    from cti.io.delta import table_rows

    return table_rows(str(path))


def _counted_rows(path: Path) -> int:
    return sum(int(p.read_text()) for p in path.glob("batch-*.count"))


def _outputs(streams: dict[str, Any], output: Path | None, checkpoint: Path) -> list[Output]:
    """The job's outputs: each stream, then the dead letters of each input that keeps them
    (``on_bad_input="dead_letter"``)."""
    from cti.io.delta import DeltaOutputAdapterFactory, DeltaOutputConfig

    outs = []
    for name, stream in streams.items():
        if output is not None:
            path = output / name
            outs.append(Output(name, stream, DeltaOutputAdapterFactory(),
                               DeltaOutputConfig(path, app_id=f"cti:{name}"),
                               checkpoint / name, lambda p=path: _delta_rows(p)))
        else:
            path = checkpoint / "_counts" / name
            outs.append(Output(name, stream, CountingOutputAdapterFactory(), str(path),
                               checkpoint / name, lambda p=path: _counted_rows(p)))
    for stream in _dead_letter_inputs(streams.values()):
        name = f"{DEAD_LETTERS}/{stream.name}"
        counted = output is None
        path = (checkpoint / "_counts" if counted else output) / name
        rows = (lambda p=path: _counted_rows(p)) if counted else \
            (lambda p=path: read_dead_letters(p).num_rows)
        outs.append(Output(name, stream, DeadLetterOutputAdapterFactory(),
                           DeadLetterConfig(path, f"cti:{name}", counted), checkpoint / name,
                           rows, stream.name))
    return outs


def _inputs(streams: Any) -> list[Any]:
    """The input streams the job's streams read, once each."""
    from cti.query import CepStream

    found: dict[int, Any] = {}
    for s in streams:
        for i in [s] if isinstance(s, CepStream) else s.inputs():
            found.setdefault(id(i), i)
    return list(found.values())


def _dead_letter_inputs(streams: Any) -> list[Any]:
    """The input streams the job's streams read that dead-letter bad rows, once each."""
    return [i for i in _inputs(streams) if i.dead_letter]


def _check_input_names(streams: dict[str, Any]) -> None:
    """Each input of the job has a name of its own: it names the input's progress and metrics
    (on Spark in the one query of all the outputs) and its dead letters' table."""
    named: dict[str, Any] = {}
    for i in _inputs(streams.values()):
        if i.name in named:
            raise click.ClickException(
                f"two input streams are named {i.name!r} (bound twice, as in two "
                "applications): an input's name names its progress, its metrics and its dead "
                "letters in the job; give each input a name of its own")
        named[i.name] = i


def _check_fresh(outs: list[Output], output: Path | None, runtime: str,
                 checkpoint: Path) -> None:
    """A run that cannot resume an output's checkpoint must not write into an existing table
    (its batch ids would start again at 0 and be skipped as written); nor may one runtime
    resume the other's checkpoint (they keep different things); nor may a Spark run resume
    the query of other outputs, or a checkpoint of an earlier release's layout."""
    from cti.cli.local_job import CHECKPOINT

    for o in outs:
        spark = _has_commits(_spark_checkpoint(o, checkpoint))
        local = (o.checkpoint / CHECKPOINT).exists()
        if runtime == "spark" and o.dead_letters_of is None and _has_commits(o.checkpoint):
            raise click.ClickException(
                f"{o.checkpoint} is the checkpoint of a run by an earlier release of cti, "
                "which ran each output as a query of its own; this one runs all of a job's "
                f"outputs in one query ({checkpoint / OUTPUTS}): finish that job with the "
                "release that started it, or start afresh with another --output or "
                "--checkpoint")
        if (spark, local) == (runtime == "local", runtime == "spark"):
            other = "spark" if spark else "local"
            where = _spark_checkpoint(o, checkpoint) if spark else o.checkpoint
            raise click.ClickException(
                f"{where} is the checkpoint of a --runtime {other} run: resume it with "
                f"--runtime {other}, or start afresh with another --output or --checkpoint")
        if output is not None and (output / o.name).exists() and not (spark or local):
            raise click.ClickException(
                f"{output / o.name} exists and there is no checkpoint to resume from in "
                f"{_spark_checkpoint(o, checkpoint) if runtime == 'spark' else o.checkpoint}: "
                "remove it or use another --output, or pass the --checkpoint of the run that "
                "wrote it")
    if runtime == "spark":
        _check_outputs_named(outs, checkpoint / OUTPUTS)


def _spark_checkpoint(o: Output, checkpoint: Path) -> Path:
    """Where the Spark query that writes ``o`` keeps its checkpoint: the outputs' one query's,
    or an input's dead letters' own."""
    return o.checkpoint if o.dead_letters_of is not None else checkpoint / OUTPUTS


def _has_commits(checkpoint: Path) -> bool:
    return any((checkpoint / "commits").glob("[0-9]*"))


def _check_outputs_named(outs: list[Output], checkpoint: Path) -> None:
    """The outputs' query resumes only with the outputs it was started with (its state is
    theirs); their names are kept beside its checkpoint, written on its first run."""
    names = [o.name for o in outs if o.dead_letters_of is None]
    kept = checkpoint / _NAMES
    if kept.exists():
        before = json.loads(kept.read_text())
        if before != names:
            raise click.ClickException(
                f"the job's outputs are {names}, but its checkpoint {checkpoint} holds the "
                f"query of {before}: run the query file that wrote it, or start afresh with "
                "another --output or --checkpoint")
    elif names:
        checkpoint.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(names))


# ---- running ----------------------------------------------------------------------------------


class Stop:
    """Ctrl-C asks the job to stop after the current micro-batch; a second one stops it now."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self._previous: Any = None

    def __enter__(self) -> Stop:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested.is_set():
            raise KeyboardInterrupt
        self.requested.set()
        print("stopping after the current micro-batch (Ctrl-C again to stop now)",
              file=sys.stderr, flush=True)

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


class Job:
    """A query file's outputs, run on one runtime, with progress. On Spark: one streaming query
    for the outputs (``SparkRuntime.start_queries``: the input read and ingested once for all
    of them) and one per input's dead letters, each started once."""

    def __init__(self, outs: list[Output], runtime: str, master: str | None,
                 batch_size: int | None, display: Display, progress: RunProgress,
                 checkpoint: Path) -> None:
        self.outs, self.runtime = outs, runtime
        self.master, self.batch_size = master, batch_size
        self.display, self.progress = display, progress
        self.checkpoint = checkpoint
        self.running: list[Any] = []  # the Spark queries started (``RunningQuery``)
        self.query_outputs: dict[str, list[Output]] = {}  # a Spark query's id: what it writes
        self.terminated: set[str] = set()
        self.events = threading.Condition()
        self.stop = Stop()
        self._spark: Any = None

    def _local_jobs(self) -> list[tuple[Output, Any]]:
        return [(o, local_output_job(o, self.batch_size)) for o in self.outs]

    def _run_local(self, until_idle: bool, interval: float) -> None:
        """Each output's new input as micro-batches, pass after pass, until idle or stopped."""
        jobs = self._local_jobs()
        with self.stop, self.display:
            while True:
                for o, job in jobs:
                    report = functools.partial(self._on_local_batch, o, job)
                    while not self.stop.requested.is_set() and job.step(report):
                        pass
                if until_idle or all(job.finished for _, job in jobs) or \
                        self.stop.requested.wait(interval):
                    return

    def _on_local_batch(self, o: Output, job: Any, batch: int, seconds: float,
                        done: Any) -> None:
        metrics: dict[str, Any] = {}
        for g, frame in done.ingress.items():
            metrics |= frame_metrics(job.groups[g].names, frame)
        self.progress.add_batch(o.name, batch, seconds, metrics)
        self.progress.set_rows(o.name, o.rows())
        self.display.refresh()

    def _on_spark_batch(self, p: Any) -> None:
        """A micro-batch of one of the job's queries: a log line (or the table's refresh) for
        each output it wrote; once Ctrl-C asked for it, the query stops after it."""
        observed = p.observedMetrics.get("cti")
        metrics = observed.asDict() if observed is not None else {}
        for o in self._outputs_of(str(p.id)):
            self.progress.add_batch(o.name, p.batchId, (p.batchDuration or 0) / 1000, metrics)
            self.progress.set_rows(o.name, o.rows())
            self.display.refresh()
        if self.stop.requested.is_set():
            query = self._spark.streams.get(str(p.id))
            if query is not None:
                threading.Thread(target=query.stop, daemon=True).start()

    def _outputs_of(self, query_id: str, timeout: float = 30.0) -> list[Output]:
        """The outputs of a started query (its progress may come before ``start`` returned)."""
        with self.events:
            self.events.wait_for(lambda: query_id in self.query_outputs, timeout)
            return self.query_outputs.get(query_id, [])

    def _drain(self, timeout: float = 30.0) -> None:
        """Wait until Spark's listener has delivered every started query's last progress
        (its events come asynchronously, and a query's termination comes last)."""
        with self.events:
            self.events.wait_for(lambda: self.terminated >= self.query_outputs.keys(), timeout)

    def _start_spark(self, until_idle: bool, interval: float) -> None:
        """Start the outputs' query and each dead-letter query (``running``): until idle, to
        end once the input available now is processed; else looking for new input every
        ``interval``."""
        from cti.runtime.spark import SparkRuntime

        caps = [self.batch_size] if self.batch_size else None
        every = None if until_idle else timedelta(seconds=interval)

        def runtime(checkpoint: Path) -> SparkRuntime:
            return SparkRuntime(self._spark, checkpoint_location=str(checkpoint),
                                batch_sizes=caps)

        streams = [o for o in self.outs if o.dead_letters_of is None]
        if streams:
            self._started(streams, runtime(self.checkpoint / OUTPUTS).start_queries(
                [o.bound_query() for o in streams], every, not until_idle))
        for o in self.outs:
            if o.dead_letters_of is not None:
                group = o.stream.ingress_group()
                self._started([o], runtime(o.checkpoint).start_write(
                    group, [o.query().output_binding(group)], every, not until_idle))

    def _started(self, outs: list[Output], handle: Any) -> None:
        """A query started: kept (``running``), and its outputs known to the listener."""
        self.running.append(handle)
        with self.events:
            self.query_outputs[handle.id] = outs
            self.events.notify_all()

    def run(self, until_idle: bool, interval: float) -> None:
        if self.runtime == "local":
            self._run_local(until_idle, interval)
            return
        from cti.runtime.spark import get_spark

        # The session first: a new SparkContext installs its own SIGINT handler (cancel every
        # job, raise KeyboardInterrupt), which ``Stop`` then replaces for the run.
        self._spark = get_spark(master=self.master)
        print(f"Spark {self._spark.version} on {self._spark.sparkContext.master}",
              file=self.display.stream, flush=True)
        listener = _Listener(self)
        self._spark.streams.addListener(listener)
        try:
            with self.stop, self.display:
                self._start_spark(until_idle, interval)
                if until_idle:  # (Ctrl-C: the listener stops each after its micro-batch)
                    for handle in self.running:
                        handle.process_all_available()
                else:
                    self._until_stopped()
                for handle in self.running:
                    handle.stop()
        finally:
            for handle in self.running:  # (an error: those still running stop now)
                if handle.is_active:
                    handle.query.stop()
            self._drain()
            for o in self.outs:
                self.progress.set_rows(o.name, o.rows())
            self.display.refresh()
            self._spark.streams.removeListener(listener)

    def _until_stopped(self) -> None:
        """Wait for Ctrl-C, or for a query to end (its error raised as itself)."""
        while not self.stop.requested.wait(0.5):
            for handle in self.running:
                if not handle.is_active:
                    handle.await_termination()  # (a query's error raised as itself)
                    return


def _Listener(job: Job) -> Any:  # noqa: N802 - a class made on demand (pyspark is imported late)
    from pyspark.sql.streaming import StreamingQueryListener

    class Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            job._on_spark_batch(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            with job.events:
                job.terminated.add(str(event.id))
                job.events.notify_all()

    return Listener()


def local_output_job(o: Output, batch_size: int | None) -> Any:
    """An output on the in-process engine (``cti.cli.local_job``): a query's events, a plain
    stream's own output, or an input's dead letters (from its ingress rows)."""
    from cti.cli.local_job import LocalOutputJob
    from cti.forms.layout import out_rows_from_pandas
    from cti.operators.output import deliver, step_table
    from cti.query import CepStream

    adapter = o.factory.create(o.config, o.stream.shape)
    if o.dead_letters_of is not None:
        group = o.stream.ingress_group()
        binding = o.query().output_binding(group)

        def write(done: Any, batch: int) -> None:
            adapter.write(binding.select(out_rows_from_pandas(done.ingress[0])), batch)
    else:
        def write(done: Any, batch: int) -> None:
            deliver(adapter, step_table(done.events, done.ctis), batch)
    query = o.stream.as_query() if isinstance(o.stream, CepStream) else o.stream
    return LocalOutputJob(query, write, o.checkpoint, batch_size)


# ---- the command ------------------------------------------------------------------------------


@click.command("run")
@click.argument("query_file", type=click.Path(path_type=Path))
@click.option("--runtime", type=click.Choice(["spark", "local"]), default="spark",
              show_default=True, help="Spark (embedded local[*] unless --master or an active "
              "session) or the in-process runtime (the same engine in this process).")
@click.option("--master", help="Spark master URL (default: $CTI_SPARK_MASTER or local[*]).")
@click.option("--checkpoint", type=click.Path(path_type=Path),
              help="Checkpoint folder (default: OUTPUT/_checkpoints, or a temporary one).")
@click.option("--output", type=click.Path(path_type=Path),
              help="Write each stream as a Delta table OUTPUT/<name>.")
@click.option("--until-idle", is_flag=True,
              help="Stop once all available input is processed.")
@click.option("--interval", type=click.FloatRange(min=0, min_open=True), default=5.0,
              show_default=True,
              help="Seconds between looks for new input (without --until-idle).")
@click.option("--progress", "progress_mode", type=click.Choice(["auto", "live", "log"]),
              default="auto", show_default=True,
              help="A table refreshed in place (live), a line per micro-batch (log), or live "
              "on a terminal and log otherwise (auto).")
@click.option("--strict", is_flag=True,
              help="Exit with status 1 if any input row was dead-lettered.")
@click.option("--debug", is_flag=True, help="Show the whole traceback of an error.")
@click.option("--batch-size", type=click.IntRange(min=1), envvar=BATCH_SIZE_ENV, hidden=True)
def run(query_file: Path, runtime: str, master: str | None, checkpoint: Path | None,
        output: Path | None, until_idle: bool, interval: float, progress_mode: str,
        strict: bool, debug: bool, batch_size: int | None) -> None:
    """Run the streams QUERY_FILE names (a function streams() or a mapping STREAMS of name ->
    stream) and write each one, and each input's dead letters."""
    if runtime == "local" and master:
        raise click.UsageError("--master is for --runtime spark")
    streams = streams_of(query_file, debug)
    temporary = checkpoint is None and output is None
    if checkpoint is None:
        checkpoint = (output / "_checkpoints" if output is not None
                      else Path(tempfile.mkdtemp(prefix="cti-run-")))
    _check_input_names(streams)
    outs = _outputs(streams, output, checkpoint)
    _check_fresh(outs, output, runtime, checkpoint)
    progress = RunProgress()
    display = Display(progress, live={"auto": None, "live": True, "log": False}[progress_mode])
    job = Job(outs, runtime, master, batch_size, display, progress, checkpoint)
    try:
        job.run(until_idle, interval)
        dead = _summary(job, outs, output)
    except Exception as exc:
        raise user_error(exc, query_file, debug) from None
    finally:
        if temporary:
            shutil.rmtree(checkpoint, ignore_errors=True)
    if strict and dead:
        raise click.ClickException(f"--strict: {dead} input rows were dead-lettered")


def _summary(job: Job, outs: list[Output], output: Path | None) -> int:
    """Print each output's rows and each input's counts; warn of an input whose rows were all
    invalid. The dead letters in all."""
    stopped = " (stopped)" if job.stop.requested.is_set() else ""
    for o in outs:
        if o.dead_letters_of is None:
            where = f" -> {output / o.name}" if output is not None else ""
            click.echo(f"{o.name}: {o.rows()} rows{where}{stopped}")
    letters = {o.dead_letters_of: o for o in outs if o.dead_letters_of is not None}
    dead = 0
    for name, p in job.progress.per_input().items():
        line = f"input {name}: {p.events} rows, {p.invalid} invalid"
        if name in letters:
            rows = letters[name].rows()
            dead += rows
            kept = f" -> {output / letters[name].name}" if output is not None and rows else ""
            line += f", {rows} dead letters{kept}"
        click.echo(line)
        if p.events and p.invalid == p.events:
            click.echo(f"Warning: every row of input {name!r} was invalid ({p.events} rows): "
                       "the outputs got nothing from it; see its dead letters for why",
                       err=True)
    return dead
