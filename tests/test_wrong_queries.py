"""Wrong queries fail loudly (issue 17, items 1-3): a field a query names that its stream does
not have fails when the query is built (or, where the stream's fields are unknown, at the first
event without it), null keys match nothing, and an exception of the user's code reaches the
caller as itself, naming the operator, the stream and the payload, on both runtimes."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import Any

import pandas as pd
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti import (
    AdvanceTimeSettings,
    Application,
    CepStream,
    Cti,
    EnqueuingInputAdapter,
    EventOrderingPolicy,
    EventShape,
    IntervalEvent,
    NullKeyError,
    PointEvent,
    UnknownFieldError,
    agg,
)
from cti.io.files import CsvInputAdapterFactory, FileInputConfig, JsonLinesInputAdapterFactory
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig
from cti.runtime.local import LocalRuntime

TEN = timedelta(microseconds=10)
TOLLS = [{"TollId": 1, "LicensePlate": "JNB7001", "Toll": 4.0},
         {"TollId": 2, "LicensePlate": "YXZ1001", "Toll": 6.0},
         {"TollId": 1, "LicensePlate": "ABC1004", "Toll": 5.5}]


@pytest.fixture(params=["local", "spark"])
def runtime(request: pytest.FixtureRequest) -> Any:
    if request.param == "local":
        return LocalRuntime(batch_sizes=[2])
    from cti.runtime.spark import SparkRuntime

    return SparkRuntime(request.getfixturevalue("spark"), batch_sizes=[2], shards=2)


def on_both(names: list[str], local_only: set[str]) -> list[tuple[str, str]]:
    """(case, runtime) pairs: every case in-process, those not in ``local_only`` on Spark too.
    An error case costs a Spark query of its own (a failing query cannot share one), so Spark
    runs one or two cases of each error, the ones whose path differs there (keys routed to
    shards, the binary operators); the others' rule is the same engine code in-process."""
    return [(n, r) for n in names for r in ("local", "spark")
            if r == "local" or n not in local_only]


# The cases of this file that run to an answer: case id -> (directory -> the query). On Spark
# they all run as the queries of one streaming query (``spark_answers``: a query costs
# seconds); in-process each runs alone. A test asserts its own cases' answers.
RUN_CASES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def spark_answers(spark: Any, tmp_path_factory: Any) -> dict[str, list[Any]]:
    """Every case of ``RUN_CASES`` as one query of one Spark run: case id -> its output."""
    from cti.runtime.spark import SparkRuntime

    queries = [build(tmp_path_factory.mktemp("case")).named(f"case{k}")
               for k, build in enumerate(RUN_CASES.values())]
    results = SparkRuntime(spark, batch_sizes=[2], shards=2).run_queries(queries,
                                                                          with_inputs=False)
    return {case: result.items(query.name)
            for case, query, result in zip(RUN_CASES, queries, results, strict=True)}


def collected(case: str, runtime: Any, tmp_path: Any, request: pytest.FixtureRequest
              ) -> list[Any]:
    """The case's output (``collect``) on the runtime (Spark: from the shared run)."""
    if isinstance(runtime, LocalRuntime):
        return RUN_CASES[case](tmp_path).collect(runtime)
    return request.getfixturevalue("spark_answers")[case]


def memory(name: str, payloads: list[dict[str, Any]], app: Application, **kw: Any) -> CepStream:
    events = [PointEvent(10 * (i + 1), p) for i, p in enumerate(payloads)]
    return CepStream.create(name, MemoryInputAdapterFactory(), events, EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(), application=app, **kw)


class _Untyped(EnqueuingInputAdapter):
    def __init__(self, payloads: list[dict[str, Any]]) -> None:
        super().__init__()
        self.payloads = payloads

    def produce(self) -> None:
        for i, p in enumerate(self.payloads):
            self.enqueue(PointEvent(10 * (i + 1), p))


class UntypedFactory:
    """A user's adapter that does not say which fields its payloads have."""

    def create(self, config: list[dict[str, Any]], shape: EventShape) -> _Untyped:
        return _Untyped(config)


def untyped(name: str, payloads: list[dict[str, Any]], app: Application, tmp_path: Any
            ) -> CepStream:
    """A stream whose fields are not known at binding: a file that is one JSON array (the
    Spark source's process cannot import a factory of this module)."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps([{"t": 10 * (i + 1), **p} for i, p in enumerate(payloads)]))
    return CepStream.create(name, JsonLinesInputAdapterFactory(), FileInputConfig(
        path, start_column="t"), EventShape.POINT, AdvanceTimeSettings.increasing_start_time(),
        application=app)


def csv_file(tmp_path: Any) -> CepStream:
    path = tmp_path / "tolls.csv"
    path.write_text("EntryTime,TollId,LicensePlate,Toll\n"
                    + "".join(f"{10 * (i + 1)},{p['TollId']},{p['LicensePlate']},{p['Toll']}\n"
                              for i, p in enumerate(TOLLS)))
    return CepStream.create("TollEntry", CsvInputAdapterFactory(),
                            FileInputConfig(path, start_column="EntryTime"), EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(), application=Application())


def json_file(tmp_path: Any) -> CepStream:
    path = tmp_path / "tolls.json"
    path.write_text("".join(json.dumps({"EntryTime": 10 * (i + 1), **p}) + "\n"
                            for i, p in enumerate(TOLLS)))
    return CepStream.create("TollEntry", JsonLinesInputAdapterFactory(),
                            FileInputConfig(path, start_column="EntryTime"), EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(), application=Application())


def parquet_file(tmp_path: Any) -> CepStream:
    path = tmp_path / "tolls.parquet"
    pd.DataFrame([{"EntryTime": 10 * (i + 1), **p} for i, p in enumerate(TOLLS)]).to_parquet(path)
    return CepStream.create("TollEntry", ParquetInputAdapterFactory(),
                            ParquetInputConfig(path, start_column="EntryTime"), EventShape.POINT,
                            AdvanceTimeSettings.increasing_start_time(), application=Application())


SOURCES = {"memory": lambda _: memory("TollEntry", TOLLS, Application()),
           "csv": csv_file, "json lines": json_file, "parquet": parquet_file}


# ---- 1. fields checked when the query is built ---------------------------------------------


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_adapter_knows_its_payload_fields(source, tmp_path):
    assert SOURCES[source](tmp_path).fields == ("LicensePlate", "Toll", "TollId")


MISTAKES = {
    "group_by": (lambda s: s.group_by("TolId"), "group_by('TolId')", "TolId", "TollId"),
    "join on": (lambda s: s.join(s, on="LicencePlate"), "join(on='LicencePlate')",
                "LicencePlate", "LicensePlate"),
    "anti-semi-join on": (lambda s: s.left_anti_semi_join(s, on=("TollId", "tollid")),
                          "left_anti_semi_join(on=('TollId', 'tollid'))", "tollid", "TollId"),
    "aggregate": (lambda s: s.tumbling_window(TEN).aggregate(total=agg.sum("TolAmount")),
                  "aggregate(total=agg.sum('TolAmount'))", "TolAmount", None),
    "after where": (lambda s: s.where(lambda p: True).group_by("Tollid"), "group_by('Tollid')",
                    "Tollid", "TollId"),
}


@pytest.mark.parametrize("source", sorted(SOURCES))
@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_a_misspelt_field_fails_when_the_query_is_built(source, mistake, tmp_path):
    stream = SOURCES[source](tmp_path)
    build, operator, field, closest = MISTAKES[mistake]
    with pytest.raises(UnknownFieldError) as caught:
        build(stream)
    message = str(caught.value)
    assert message.startswith(f"{operator}: stream 'TollEntry'")
    assert f"has no field {field!r}" in message
    assert "Its fields: ['LicensePlate', 'Toll', 'TollId']" in message
    assert (f"did you mean {closest!r}?" in message) == (closest is not None)


def test_fields_of_derived_streams_are_known():
    s = memory("TollEntry", TOLLS, Application())
    counts = s.group_by("TollId").apply(lambda g: g.tumbling_window(TEN).aggregate(
        n=agg.count(), total=agg.sum("Toll")))
    assert counts.fields == ("TollId", "n", "total")
    with pytest.raises(UnknownFieldError, match=r"has no field 'totl'; did you mean 'total'\?"):
        counts.tumbling_window(TEN).aggregate(top=agg.max("totl"))
    assert s.join(s, on="TollId").fields == s.fields
    assert s.select(lambda p: p).fields is None  # a function's output: checked per event


def test_declared_fields_replace_the_factorys(tmp_path):
    app = Application()
    s = CepStream.create("u", UntypedFactory(), TOLLS, EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=app)
    assert s.fields is None and untyped("j", TOLLS, app, tmp_path).fields is None
    declared = CepStream.create("d", UntypedFactory(), TOLLS, EventShape.POINT,
                                AdvanceTimeSettings.increasing_start_time(), application=app,
                                fields=["TollId", "Toll"])
    with pytest.raises(UnknownFieldError, match="stream 'd' has no field 'LicensePlate'"):
        declared.join(s, on="LicensePlate")


def test_event_ordering_over_a_misspelt_field_fails_at_binding():
    with pytest.raises(UnknownFieldError, match=r"over=.*'TolId'.*did you mean 'TollId'"):
        CepStream.create("s", MemoryInputAdapterFactory(), [PointEvent(1, TOLLS[0])],
                         EventShape.POINT, application=Application(),
                         event_ordering_policy=EventOrderingPolicy(over="TolId"))


def test_a_misspelt_time_column_fails_at_binding(tmp_path):
    (tmp_path / "t.csv").write_text("EntryTime,TollId\n1,2\n")
    with pytest.raises(UnknownFieldError, match=r"'EntryTme'.*start_column.*'EntryTime'"):
        CepStream.create("s", CsvInputAdapterFactory(),
                         FileInputConfig(tmp_path / "t.csv", start_column="EntryTme"),
                         EventShape.POINT, application=Application())
    pd.DataFrame({"EntryTime": [1], "TollId": [2]}).to_parquet(tmp_path / "t.parquet")
    with pytest.raises(UnknownFieldError, match=r"'EntryTme'.*start_column.*'EntryTime'"):
        CepStream.create("s", ParquetInputAdapterFactory(),
                         ParquetInputConfig(tmp_path / "t.parquet", start_column="EntryTme"),
                         EventShape.POINT, application=Application())


# ---- 1. where fields are unknown: the first event without the field --------------------------

AT_RUN = {
    "group_by": lambda s: s.group_by("TolId").apply(
        lambda g: g.tumbling_window(TEN).aggregate(n=agg.count())),
    "join on": lambda s: s.join(s.where(lambda p: True), on="LicencePlate"),
    "aggregate": lambda s: s.tumbling_window(TEN).aggregate(total=agg.sum("TolAmount")),
    "after select": lambda s: s.select(lambda p: {"Id": p["TollId"]}).group_by("TollId").apply(
        lambda g: g.tumbling_window(TEN).aggregate(n=agg.count())),
}


@pytest.mark.parametrize("mistake, runtime", on_both(sorted(AT_RUN), {"group_by", "aggregate"}),
                         indirect=["runtime"])
def test_a_missing_field_of_an_untyped_stream_fails_at_its_first_event(mistake, runtime,
                                                                       tmp_path):
    query = AT_RUN[mistake](untyped("tolls", TOLLS, Application(), tmp_path))
    with pytest.raises(UnknownFieldError, match=r"stream 'tolls'.* has no field .*"
                                                r"\(an event without it: \{"):
        query.collect(runtime)


def test_a_field_that_is_present_but_null_is_a_null_not_a_missing_field(tmp_path):
    payloads = [{"k": None, "v": 1}, {"k": "a", "v": 2}]
    query = untyped("u", payloads, Application(), tmp_path).group_by("k", nulls="drop").apply(
        lambda g: g.tumbling_window(timedelta(microseconds=100)).aggregate(n=agg.count()))
    assert [i.payload for i in query.collect("local") if not isinstance(i, Cti)] == [
        {"k": "a", "n": 1}]


# ---- 2. nulls --------------------------------------------------------------------------------

LEFT = [{"k": "a", "l": 1}, {"k": None, "l": 2}, {"l": 3}, {"k": "b", "l": 4}]
RIGHT = [{"k": None, "r": 1}, {"k": "a", "r": 2}, {"r": 3}, {"k": "b", "r": 4}]


def _intervals(name: str, payloads: list[dict[str, Any]], app: Application,
               step: int = 1, **kw: Any) -> CepStream:
    events = [IntervalEvent(i * step, 100, p) for i, p in enumerate(payloads)]
    return CepStream.create(name, MemoryInputAdapterFactory(), events, EventShape.INTERVAL,
                            AdvanceTimeSettings.increasing_start_time(), application=app, **kw)


def _payloads(items: list[Any]) -> list[dict[str, Any]]:
    return sorted((i.payload for i in items if not isinstance(i, Cti)),
                  key=lambda p: json.dumps(p, sort_keys=True))


def _left_right() -> tuple[CepStream, CepStream]:
    app = Application()
    return _intervals("left", LEFT, app), _intervals("right", RIGHT, app, step=0)


RUN_CASES["null join key"] = lambda _: (lambda lr: lr[0].join(lr[1], on="k"))(_left_right())
RUN_CASES["null anti-semi-join key"] = lambda _: (
    lambda lr: lr[0].left_anti_semi_join(lr[1], on="k"))(_left_right())


def test_a_null_join_key_matches_nothing(runtime, tmp_path, request):
    joined = _payloads(collected("null join key", runtime, tmp_path, request))
    # SQL's rule: only equal values that are not null meet.
    assert joined == _payloads([PointEvent(1, {**lp, **rp}) for lp in LEFT for rp in RIGHT
                                if lp.get("k") is not None and lp.get("k") == rp.get("k")])
    assert [p["l"] for p in joined] == [1, 4]
    unmatched = collected("null anti-semi-join key", runtime, tmp_path, request)  # right covers all
    assert sorted({i.payload["l"] for i in unmatched if not isinstance(i, Cti)}) == [2, 3]


KEY_VALUES = st.sampled_from(["a", "b", None, "missing", 1, 1.0])


def _keyed(keys: list[Any], name: str) -> list[dict[str, Any]]:
    return [{name: i} if k == "missing" else {"k": k, name: i} for i, k in enumerate(keys)]


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(KEY_VALUES, max_size=8), st.lists(KEY_VALUES, max_size=8),
       st.integers(1, 4))
def test_joins_and_groups_pair_equal_keys_that_are_not_null(left, right, batch):
    """In-process, whatever the micro-batches: a join pairs exactly the events whose keys are
    equal JSON values and not null; a group_by with nulls='group' counts the nulls (and the
    missing) as one group, with nulls='drop' leaves them out."""
    app = Application()
    lp, rp = _keyed(left, "l"), _keyed(right, "r")
    ls = _intervals("left", lp, app, fields=["k", "l"])  # (a list may have no "k")
    rs = _intervals("right", rp, app, step=0, fields=["k", "r"])
    runtime = LocalRuntime(batch_sizes=[batch])
    got = sorted((p["l"], p["r"]) for p in _payloads(ls.join(rs, on="k").collect(runtime)))
    text = json.dumps  # 1 and 1.0 are different keys (JSON-equal values meet)
    assert got == sorted((a["l"], b["r"]) for a in lp for b in rp if a.get("k") is not None
                         and text(a.get("k")) == text(b.get("k")))
    for nulls in ("group", "drop"):
        counts = ls.group_by("k", nulls=nulls).apply(lambda g: g.tumbling_window(
            timedelta(microseconds=1000)).aggregate(n=agg.count())).collect(runtime)
        expected: dict[str, int] = {}
        for p in lp:
            if p.get("k") is not None or nulls == "group":
                expected[text(p.get("k"))] = expected.get(text(p.get("k")), 0) + 1
        assert {text(p["k"]): p["n"] for p in _payloads(counts)} == expected


GROUPED = [{"k": "a"}, {"k": None}, {"k": "a"}, {}, {"k": "b"}]


def _grouped(source: str, tmp_path: Any) -> CepStream:
    if source == "memory":
        return memory("s", GROUPED, Application())
    path = tmp_path / "grouped.parquet"  # the Spark shards get the keys' texts from the file
    pd.DataFrame({"t": [10 * (i + 1) for i in range(len(GROUPED))],
                  "k": [p.get("k") for p in GROUPED]}).to_parquet(path)
    return CepStream.create("s", ParquetInputAdapterFactory(), ParquetInputConfig(
        path, start_column="t"), EventShape.POINT, AdvanceTimeSettings.increasing_start_time(),
        application=Application())


def _count_query(nulls: str, source: str, tmp_path: Any) -> Any:
    return _grouped(source, tmp_path).group_by("k", nulls=nulls).apply(
        lambda g: g.tumbling_window(timedelta(microseconds=100)).aggregate(n=agg.count()))


for _source in ("memory", "parquet"):
    for _nulls in ("group", "drop"):
        RUN_CASES[f"nulls={_nulls} over {_source}"] = (
            lambda directory, n=_nulls, s=_source: _count_query(n, s, directory))


@pytest.mark.parametrize("source, runtime", on_both(["memory", "parquet"], {"memory"}),
                         indirect=["runtime"])
def test_a_null_group_key_fails_unless_asked(source, runtime, tmp_path):
    with pytest.raises(NullKeyError, match=r"group_by\('k'\) on stream 's': an event whose "
                                           r"'k' is null: \{.*nulls='group'"):
        _count_query("raise", source, tmp_path).collect(runtime)


@pytest.mark.parametrize("source", ["memory", "parquet"])
def test_null_group_keys_are_a_group_only_when_asked(source, runtime, tmp_path, request):
    assert _payloads(collected(f"nulls=group over {source}", runtime, tmp_path, request)) == [
        {"k": "a", "n": 2}, {"k": "b", "n": 1}, {"k": None, "n": 2}]
    assert _payloads(collected(f"nulls=drop over {source}", runtime, tmp_path, request)) == [
        {"k": "a", "n": 2}, {"k": "b", "n": 1}]


# ---- 3. the user's exceptions, one message -------------------------------------------------


def _missing_key(p: dict[str, Any]) -> Any:
    return p["Tol"]  # the user's own frame: the line the note shows


USER_CODE = {
    "where": (lambda s: s.where(lambda p: _missing_key(p) > 1), "where on stream 'tolls'"),
    "select": (lambda s: s.select(lambda p: {"x": _missing_key(p)}), "select on stream 'tolls'"),
    "join predicate": (lambda s: s.join(s.where(lambda p: True), on="TollId",
                                        predicate=lambda a, b: _missing_key(a) > 0),
                       "join predicate or select on stream 'tolls'.join("),
    "aggregate": (lambda s: s.tumbling_window(TEN).aggregate(top=agg.udf(
        lambda ps: max(_missing_key(p) for p in ps))), "aggregate 'top' on stream 'tolls'"),
}


@pytest.mark.parametrize("where, runtime", on_both(sorted(USER_CODE), {"where", "select"}),
                         indirect=["runtime"])
def test_an_exception_of_the_users_code_is_raised_as_itself(where, runtime, capfd):
    build, context = USER_CODE[where]
    query = build(memory("tolls", TOLLS, Application()))
    capfd.readouterr()
    with pytest.raises(KeyError) as caught:
        query.collect(runtime)
    assert type(caught.value) is KeyError and caught.value.args == ("Tol",)
    note = "\n".join(caught.value.__notes__)
    assert f"cti: {context}" in note
    # the payload that failed: on Spark the first shard to fail may hold another one
    assert "raised KeyError on the " in note
    assert any(f'"LicensePlate":"{t["LicensePlate"]}"' in note for t in TOLLS), note
    assert f'File "{__file__}"' in note and 'return p["Tol"]' in note
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in task" not in err, err[:3000]


def test_the_users_exception_class_is_kept(runtime):
    class Mine(ValueError):
        pass

    def check(p: dict[str, Any]) -> bool:
        raise Mine(f"bad {p['TollId']}")

    with pytest.raises(ValueError, match="bad 1") as caught:
        memory("tolls", TOLLS, Application()).where(check).collect(runtime)
    assert type(caught.value).__name__ == "Mine"
    assert any("where on stream 'tolls'" in n for n in caught.value.__notes__)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
