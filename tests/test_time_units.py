"""Time as time: durations carry their unit, naive times need a zone, times print as times.

Three mistakes that used to give a quietly wrong answer: ``tumbling_window(3)`` (3 ticks, i.e.
microseconds), a naive ``datetime`` read as UTC beside times with an offset, and results that
print ticks. Each is a test here, on both runtimes where a run is involved.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from cti import (
    MAX_TIME,
    MIN_TIME,
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    BadInputError,
    CepStream,
    Cti,
    EdgeEvent,
    EventOrderingPolicy,
    EventShape,
    IntervalEvent,
    InvalidEventError,
    InvalidSettingsError,
    PointEvent,
    agg,
    format_time,
    ticks,
    to_duration_ticks,
    to_ticks,
)
from cti.io.files import FileInputConfig, JsonLinesInputAdapterFactory
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig
from cti.results import Diagnostic

RUNTIMES = ["local", pytest.param("spark", marks=pytest.mark.spark)]
T0 = datetime(2014, 9, 10, 12, 0, tzinfo=UTC)


def runtime_of(name, request):
    if name == "spark":
        from cti.runtime.spark import SparkRuntime

        return SparkRuntime(request.getfixturevalue("spark"), batch_sizes=[2])
    return name


# The cases of this file that run to an answer: case id -> (directory -> the query). On Spark
# they all run as the queries of one streaming query (``spark_answers``: a query costs
# seconds); in-process each runs alone. A test asserts its own cases' answers.
RUN_CASES = {}


def run_case(case):
    def register(build):
        RUN_CASES[case] = build
        return build
    return register


@pytest.fixture(scope="module")
def spark_answers(spark, tmp_path_factory):
    """Every case of ``RUN_CASES`` as one query of one Spark run: case id -> its RunResult."""
    from cti.runtime.spark import SparkRuntime

    queries = [build(tmp_path_factory.mktemp("case")).named(f"case{k}")
               for k, build in enumerate(RUN_CASES.values())]
    results = SparkRuntime(spark, batch_sizes=[2]).run_queries(queries)
    return {case: (query.name, result)
            for case, query, result in zip(RUN_CASES, queries, results, strict=True)}


def answer(case, runtime, tmp_path, request):
    """The case's (output name, RunResult) on the runtime (Spark: from the shared run)."""
    if runtime == "spark":
        return request.getfixturevalue("spark_answers")[case]
    query = RUN_CASES[case](tmp_path)
    return query.name, query.run(runtime)


def collected(case, runtime, tmp_path, request):
    """The case's output items, as ``collect`` gives them."""
    name, result = answer(case, runtime, tmp_path, request)
    return result.items(name)


# ---- durations ------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("3min", timedelta(minutes=3)), ("15s", timedelta(seconds=15)),
    ("500ms", timedelta(milliseconds=500)), ("1h30m", timedelta(hours=1, minutes=30)),
    ("2d", timedelta(days=2)), ("10us", timedelta(microseconds=10)),
    ("10µs", timedelta(microseconds=10)), ("1h 30min", timedelta(hours=1, minutes=30)),
    ("1.5s", timedelta(seconds=1.5)), ("-2s", timedelta(seconds=-2)),
    ("+1d2h3m4s5ms6us", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=5,
                                  microseconds=6)),
    ("0s", timedelta(0)),
])
def test_duration_strings(text, expected):
    assert to_duration_ticks(text) == to_duration_ticks(expected)


@pytest.mark.parametrize("text", [
    "3", "", "s", "abc", "3 minutes", "5mins", "3M", "1m1h", "1h1h", "1.0000001s", "--1s",
    "1s x", "1e3s"])
def test_duration_strings_that_are_not_durations_name_the_value(text):
    with pytest.raises(InvalidSettingsError, match=re.escape(f"window size: {text!r}")):
        to_duration_ticks(text, "window size")


def test_ticks_and_zero_are_durations_and_a_bare_number_is_not():
    assert to_duration_ticks(ticks(3)) == 3 and to_duration_ticks(-ticks(3)) == -3
    assert to_duration_ticks(0) == 0 and to_duration_ticks(0.0) == 0
    with pytest.raises(InvalidSettingsError, match="ticks"):
        ticks(1.5)
    with pytest.raises(InvalidSettingsError, match=r"x=2\.5: a bare number is not a duration; "
                                                   r"write timedelta\(seconds=2\.5\), '2\.5s'$"):
        to_duration_ticks(2.5, "x")


def _stream(app=None):
    return CepStream.create("s", MemoryInputAdapterFactory(), [], EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(),
                            application=app or Application())


@pytest.mark.parametrize("where, make", [
    ("tumbling_window size", lambda s: s.tumbling_window(3)),
    ("hopping_window size", lambda s: s.hopping_window(3, "1s")),
    ("hopping_window hop", lambda s: s.hopping_window("5s", 3)),
    ("shift_event_time offset", lambda s: s.shift_event_time(3)),
    ("alter_event_duration duration", lambda s: s.alter_event_duration(3)),
    ("alter_event_lifetime duration", lambda s: s.alter_event_lifetime(lambda t: t, 3)),
    ("clip_event_duration max_duration", lambda s: s.clip_event_duration(3)),
    ("AdvanceTimeGenerationSettings duration",
     lambda s: AdvanceTimeGenerationSettings(duration=3)),
    ("AdvanceTimeGenerationSettings delay", lambda s: AdvanceTimeGenerationSettings(1, 3)),
    ("AdvanceTimeSettings.unordered_start_time: delay",
     lambda s: AdvanceTimeSettings.unordered_start_time(3)),
    ("EventOrderingPolicy late_arrival_tolerance",
     lambda s: EventOrderingPolicy(late_arrival_tolerance=3)),
    ("EventOrderingPolicy out_of_order_tolerance",
     lambda s: EventOrderingPolicy(out_of_order_tolerance=3)),
    ("EventOrderingPolicy early_arrival_window",
     lambda s: EventOrderingPolicy(early_arrival_window=3)),
    ("SparkRuntime.start_queries every", lambda s: _spark_runtime().start_queries([], every=3)),
    ("SparkRuntime.start_write every",
     lambda s: _spark_runtime().start_write(s.ingress_group(), [], every=3)),
])
def test_every_duration_refuses_a_bare_number_naming_the_parameter(where, make):
    message = (f"{where}=3: a bare number is not a duration; write timedelta(seconds=3), '3s' "
               "or ticks(3)")
    with pytest.raises(InvalidSettingsError, match=re.escape(message)):
        make(_stream())


def _spark_runtime():
    from cti.runtime.spark import SparkRuntime

    return SparkRuntime(None)  # (no session: the settings are checked before one is needed)


def test_a_started_querys_time_between_micro_batches_is_above_zero():
    with pytest.raises(InvalidSettingsError, match="start_queries every must be positive"):
        _spark_runtime().start_queries([], every="0s")


def _three_seconds(size):
    def build(_):
        times = [0, 1, 2, 3, 4, 7]  # seconds after T0
        items = [PointEvent(T0 + timedelta(seconds=t), {"n": t}) for t in times]
        stream = CepStream.create("s", MemoryInputAdapterFactory(), items, EventShape.POINT,
                                  AdvanceTimeSettings.increasing_start_time(),
                                  application=Application())
        return stream.tumbling_window(size).aggregate(n=agg.count())
    return build


THREE_WAYS = {"3s": "3s", "timedelta": timedelta(seconds=3), "ticks": ticks(3_000_000)}
for _way, _size in THREE_WAYS.items():
    run_case(f"three seconds as {_way}")(_three_seconds(_size))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_a_three_second_window_written_three_ways(runtime, tmp_path, request):
    """``tumbling_window(3)`` was 3 microseconds: every event its own window. It is refused;
    ``"3s"``, ``timedelta(seconds=3)`` and ``ticks(3_000_000)`` are the same three seconds."""
    stream = CepStream.create("s", MemoryInputAdapterFactory(), [], EventShape.POINT,
                              AdvanceTimeSettings.increasing_start_time(),
                              application=Application())
    with pytest.raises(InvalidSettingsError, match=r"tumbling_window size=3: a bare number"):
        stream.tumbling_window(3)
    answers = []
    for way in THREE_WAYS:
        out = collected(f"three seconds as {way}", runtime, tmp_path, request)
        answers.append([(e.start, e.payload["n"]) for e in out if not isinstance(e, Cti)])
    window_ends = [T0 + timedelta(seconds=s) for s in (3, 6, 9)]
    assert answers[0] == [(to_ticks(t), n) for t, n in zip(window_ends, [3, 2, 1], strict=True)]
    assert answers[1] == answers[0] and answers[2] == answers[0]


def test_durations_are_stored_as_ticks():
    g = AdvanceTimeGenerationSettings("1min", "-1us")
    assert (g.duration, g.delay) == (60_000_000, -1)
    p = EventOrderingPolicy("10s", "2s", None)
    assert (p.late_arrival_tolerance, p.out_of_order_tolerance) == (10_000_000, 2_000_000)


# ---- naive times ----------------------------------------------------------------------------

def test_events_refuse_naive_datetimes_saying_where():
    naive = datetime(2014, 9, 10, 14, 1)
    with pytest.raises(InvalidEventError, match=r"PointEvent start: naive datetime "
                       r"2014-09-10T14:01:00 has no time zone; give it a tzinfo"):
        PointEvent(naive)
    with pytest.raises(InvalidEventError, match="Cti time: naive datetime"):
        Cti(naive)
    with pytest.raises(ValueError, match="Arriving arrival: naive datetime"):
        Arriving(PointEvent(T0), naive)
    paris = datetime(2014, 9, 10, 14, 1, tzinfo=ZoneInfo("Europe/Paris"))
    assert PointEvent(paris) == PointEvent(T0 + timedelta(minutes=1))


def test_application_time_zone_is_checked_at_construction():
    assert Application(time_zone="Europe/Paris").time_zone == ZoneInfo("Europe/Paris")
    assert Application(time_zone=UTC).time_zone is UTC
    assert Application().time_zone is None
    with pytest.raises(InvalidSettingsError, match="unknown time zone 'Europe/Pariss'"):
        Application(time_zone="Europe/Pariss")
    with pytest.raises(InvalidSettingsError, match="time zone"):
        Application(time_zone=2)


def test_window_alignment_may_be_naive_only_with_an_application_zone():
    naive = datetime(2014, 9, 10, 14, 0)
    with pytest.raises(InvalidSettingsError, match="window alignment: naive datetime"):
        _stream().tumbling_window("1h", alignment=naive)
    w = _stream(Application(time_zone="Europe/Paris")).tumbling_window("1h", alignment=naive)
    assert w.alignment == to_ticks(T0)


def _json_lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _toll_files(tmp_path):
    """Entries logged in Paris local time without an offset; exits in UTC with one. The car
    entered and left in the same minute: 14:01 in Paris is 12:01 UTC."""
    entries = _json_lines(tmp_path / "entries.json", [
        {"EntryTime": "2014-09-10T14:01:00", "plate": "JNB 7001"},
        {"EntryTime": "2014-09-10T14:05:00", "plate": "XYZ 1003"}])
    exits = _json_lines(tmp_path / "exits.json", [
        {"ExitTime": "2014-09-10T12:01:00+00:00", "plate": "JNB 7001"}])
    return entries, exits


def _bind_tolls(app, entries, exits):
    settings = AdvanceTimeSettings.increasing_start_time()
    e = CepStream.create("entries", JsonLinesInputAdapterFactory(),
                         FileInputConfig(entries, start_column="EntryTime"), EventShape.POINT,
                         settings, application=app)
    x = CepStream.create("exits", JsonLinesInputAdapterFactory(),
                         FileInputConfig(exits, start_column="ExitTime"), EventShape.POINT,
                         settings, application=app)
    return e.join(x, on="plate")


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_naive_file_times_are_refused_without_a_zone(runtime, tmp_path, request):
    """Read as UTC, the entry at 14:01 (Paris) met no exit: 0 rows instead of 1, silently."""
    entries, exits = _toll_files(tmp_path)
    joined = _bind_tolls(Application(), entries, exits)
    with pytest.raises(BadInputError) as err:
        joined.collect(runtime_of(runtime, request))
    message = str(err.value)
    for part in ("'entries'", f"{entries}, line 1", "EntryTime: naive datetime "
                 "2014-09-10T14:01:00 has no time zone; write it with an offset",
                 "Application(time_zone=...)"):
        assert part in message


@run_case("naive file times in Paris")
def _paris_tolls(directory):
    return _bind_tolls(Application(time_zone="Europe/Paris"), *_toll_files(directory))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_naive_file_times_are_read_in_the_application_zone(runtime, tmp_path, request):
    out = [e for e in collected("naive file times in Paris", runtime, tmp_path, request)
           if not isinstance(e, Cti)]
    assert [(e.start, e.payload["plate"]) for e in out] == [
        (to_ticks(T0 + timedelta(minutes=1)), "JNB 7001")]


def test_a_config_zone_wins_and_dst_gaps_are_bad_rows(tmp_path):
    path = _json_lines(tmp_path / "t.json", [
        {"t": "2014-09-10T08:01:00"},          # New York, -04:00
        {"t": "2014-03-09T02:30:00"},          # skipped: clocks went from 2:00 to 3:00
        {"t": "2014-11-02T01:30:00"}])         # happened twice
    config = FileInputConfig(path, start_column="t", time_zone="America/New_York")
    stream = CepStream.create("s", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                              application=Application(time_zone="Europe/Paris"),
                              on_bad_input="dead_letter")
    res = stream.run("local")["s"]
    assert [e.start for e in res.items] == [to_ticks(T0 + timedelta(minutes=1))]
    assert [d.reason.split(": ", 1)[1] for d in res.diagnostics] == [
        f"t: {day} is ambiguous or does not exist in America/New_York (a daylight-saving "
        "change); give the time with an offset (rule: times with a time zone)"
        for day in ("2014-03-09T02:30:00", "2014-11-02T01:30:00")]
    with pytest.raises(InvalidSettingsError, match="FileInputConfig time_zone: unknown"):
        FileInputConfig(path, start_column="t", time_zone="Mars/Olympus")


def _naive_parquet(directory):
    path = directory / "r.parquet"
    pd.DataFrame({"t": pd.to_datetime(["2014-09-10T14:01:00", "2014-09-10T14:02:00"]),
                  "v": [1, 2]}).to_parquet(path)
    return ParquetInputConfig(path, start_column="t")


@run_case("naive parquet in Paris")
def _paris_parquet(directory):
    return CepStream.create("r", ParquetInputAdapterFactory(), _naive_parquet(directory),
                            EventShape.POINT, application=Application(time_zone="Europe/Paris")
                            ).as_query()


@run_case("aware parquet")
def _aware_parquet(directory):
    aware = directory / "aware.parquet"
    pd.DataFrame({"t": pd.to_datetime(["2014-09-10T14:01:00+02:00"]), "v": [1]}).to_parquet(aware)
    return CepStream.create("a", ParquetInputAdapterFactory(),
                            ParquetInputConfig(aware, start_column="t"), EventShape.POINT,
                            application=Application()).as_query()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_parquet_naive_timestamp_columns(runtime, tmp_path, request):
    config = _naive_parquet(tmp_path)
    with pytest.raises(BadInputError, match=r"'r'.*t is a timestamp without a time zone"):
        CepStream.create("r", ParquetInputAdapterFactory(), config, EventShape.POINT,
                         application=Application()).collect(runtime_of(runtime, request))
    items = answer("naive parquet in Paris", runtime, tmp_path, request)[1]["r"].items
    assert [e.start for e in items] == [to_ticks(T0 + timedelta(minutes=m)) for m in (1, 2)]
    items = answer("aware parquet", runtime, tmp_path, request)[1]["a"].items
    assert [e.start for e in items] == [to_ticks(T0 + timedelta(minutes=1))]


# ---- printing -------------------------------------------------------------------------------

def test_events_and_ctis_print_iso_times_and_keep_ticks():
    t = to_ticks(T0 + timedelta(minutes=1))
    p = PointEvent(t, {"plate": "JNB 7001"})
    assert repr(p) == str(p) == \
        "PointEvent(start=2014-09-10T12:01:00+00:00, payload={'plate': 'JNB 7001'})"
    assert p.start == t and p == PointEvent(t, {"plate": "JNB 7001"})
    assert hash(p) == hash(PointEvent(t, {"plate": "other"}))  # payload is not hashed
    assert repr(IntervalEvent(t, t + 1_500_000)) == (
        "IntervalEvent(start=2014-09-10T12:01:00+00:00, end=2014-09-10T12:01:01.500000+00:00, "
        "payload={})")
    assert repr(EdgeEvent.start_edge(t)) == (
        "EdgeEvent(edge_type=EdgeType.START, start=2014-09-10T12:01:00+00:00, end=+infinity, "
        "payload={})")
    assert repr(Cti(MAX_TIME)) == "Cti(time=+infinity)"
    assert repr(Cti(t)) == "Cti(time=2014-09-10T12:01:00+00:00)"
    assert format_time(MIN_TIME) == "-infinity" and format_time(None) == "null"
    shown = datetime.fromisoformat(format_time(t + 7))
    assert shown.utcoffset() == timedelta(0) and to_ticks(shown) == t + 7  # ISO round-trips
    plus2 = datetime(2014, 9, 10, 14, 1, tzinfo=timezone(timedelta(hours=2)))
    assert repr(PointEvent(plus2)) == repr(PointEvent(t))  # printed in UTC


def test_diagnostics_print_iso_times():
    t = to_ticks(T0)
    d = Diagnostic("s", "dropped", "cti_violation", "point", t, t + 1, None, None, t + 60_000_000,
                   {"id": 1}, 3)
    assert str(d) == ("s: dropped point #3 [2014-09-10T12:00:00+00:00, "
                      "2014-09-10T12:00:00.000001+00:00) -> [null, null) at CTI "
                      "2014-09-10T12:01:00+00:00: cti_violation")
    assert "original_start=2014-09-10T12:00:00+00:00" in repr(d) and "cti=2014-09-10T12:01:00" \
        in repr(d) and d.original_start == t


@run_case("printed results")
def _printed(_):
    items = [PointEvent(T0 + timedelta(seconds=s), {"id": s}) for s in (10, 30, 15)]
    return CepStream.create("s", MemoryInputAdapterFactory(), items, EventShape.POINT,
                            AdvanceTimeSettings.unordered_start_time("10s"),
                            application=Application()).as_query()


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_results_print_as_times_on_both_runtimes(runtime, tmp_path, request):
    res = answer("printed results", runtime, tmp_path, request)[1]["s"]
    assert [repr(i) for i in res.items] == [
        "PointEvent(start=2014-09-10T12:00:10+00:00, payload={'id': 10})",
        "Cti(time=2014-09-10T12:00:00+00:00)",
        "PointEvent(start=2014-09-10T12:00:30+00:00, payload={'id': 30})",
        "Cti(time=2014-09-10T12:00:20+00:00)",
        "Cti(time=+infinity)"]
    assert [str(d) for d in res.diagnostics] == [
        "s: dropped point #2 [2014-09-10T12:00:15+00:00, null) -> [null, null) at CTI "
        "2014-09-10T12:00:20+00:00: cti_violation"]
