"""Inputs checked at binding (issue 17, item 4): a missing or unreadable file or directory, or a
file without the columns its config names, is a ``BindingError`` naming the stream and the path,
raised by ``CepStream.create`` before any runtime is involved. And CSV quoting: each physical
line that cannot be parsed is exactly one invalid row; the good rows around it are all read."""

from __future__ import annotations

import csv
import io
import os
import uuid
from pathlib import Path

import pandas as pd
import pytest
from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import past_the_simplest, spark_caps

from cti import Application, BindingError, CepStream, Cti, EventShape
from cti.io import checks
from cti.io.files import CsvInputAdapterFactory, FileInputConfig, JsonLinesInputAdapterFactory
from cti.io.parquet import ParquetInputAdapterFactory, ParquetInputConfig
from cti.runtime.local import LocalRuntime

CSV_TEXT = "EntryTime,TollId,LicensePlate\n2014-09-10T05:03:00Z,1,JNB 7001\n"


def make_inputs(tmp_path: Path) -> dict[str, Path]:
    paths = {"csv": tmp_path / "Entry.csv", "json": tmp_path / "Entry.json",
             "parquet": tmp_path / "Entry.parquet", "text": tmp_path / "notes.txt"}
    paths["csv"].write_text(CSV_TEXT)
    paths["json"].write_text('{"EntryTime": "2014-09-10T05:03:00Z", "TollId": 1}\n')
    pd.DataFrame({"EntryTime": [1, 2], "TollId": [1, 2]}).to_parquet(paths["parquet"])
    paths["text"].write_text("not parquet at all")
    return paths


def csv_input(path, time="EntryTime", **kwargs):
    return CsvInputAdapterFactory(), FileInputConfig(path, time, **kwargs)


def json_input(path, time="EntryTime", **kwargs):
    return JsonLinesInputAdapterFactory(), FileInputConfig(path, time, **kwargs)


def parquet_input(path, time="EntryTime", **kwargs):
    return ParquetInputAdapterFactory(), ParquetInputConfig(path, time, **kwargs)


# name -> (factory and config from the inputs, what the message says besides stream and path)
MISTAKES = {
    "csv-missing-file": (lambda p: csv_input(p["csv"].with_name("Entyr.csv")),
                         "does not exist"),
    "json-missing-file": (lambda p: json_input(p["json"].with_name("Entyr.json")),
                          "does not exist"),
    "parquet-missing-file": (lambda p: parquet_input(p["csv"].with_name("Entyr.parquet")),
                             "does not exist"),
    "missing-directory": (lambda p: csv_input(p["csv"].parent / "nodir" / "Entry.csv"),
                          "no directory"),
    "csv-time-column": (lambda p: csv_input(p["csv"], "EntryTme"),
                        "no column 'EntryTme' (start_column; did you mean 'EntryTime'?)"),
    "csv-payload-column": (lambda p: csv_input(p["csv"], payload_columns=["Plate"]),
                           "no column 'Plate' (payload_columns"),
    "csv-arrival-column": (lambda p: csv_input(p["csv"], arrival_column="Arrival"),
                           "no column 'Arrival' (arrival_column"),
    "parquet-column": (lambda p: parquet_input(p["parquet"], end_column="ExitTime"),
                       "no column 'ExitTime' (end_column"),
    "not-parquet": (lambda p: parquet_input(p["text"]), "is not a Parquet file"),
}


class NeverRun:
    """A runtime that records being asked to run (binding must fail before)."""

    def __init__(self, runtime):
        self.runtime, self.calls = runtime, 0

    def run(self, group):
        self.calls += 1
        return self.runtime.run(group)


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_mistake_is_a_binding_error_naming_stream_and_path(tmp_path, mistake):
    make, says = MISTAKES[mistake]
    factory, config = make(make_inputs(tmp_path))
    with pytest.raises(BindingError) as caught:
        CepStream.create("entries", factory, config, EventShape.POINT, application=Application())
    message = str(caught.value)
    assert message.startswith("stream 'entries': ")
    assert str(config.path) in message and says in message, message


@pytest.mark.parametrize("runtime", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_binding_fails_before_either_runtime_runs(tmp_path, runtime, request):
    if runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        inner = SparkRuntime(request.getfixturevalue("spark"))
    else:
        inner = LocalRuntime()
    spy = NeverRun(inner)
    paths = make_inputs(tmp_path)
    for make, _ in MISTAKES.values():
        factory, config = make(paths)
        with pytest.raises(BindingError, match="stream 'entries'"):
            CepStream.create("entries", factory, config, EventShape.POINT,
                             application=Application()).run(spy)
    assert spy.calls == 0
    # The same input, named right, binds and runs on this runtime.
    result = CepStream.create("entries", *csv_input(paths["csv"]), EventShape.POINT,
                              application=Application()).run(spy)
    assert result["entries"].metrics["accepted"] == 1 and spy.calls == 1


def test_shape_without_its_columns_fails_at_binding(tmp_path):
    path = make_inputs(tmp_path)["csv"]
    with pytest.raises(BindingError, match="stream 'trips'.*interval input needs end_column"):
        CepStream.create("trips", *csv_input(path), EventShape.INTERVAL,
                         application=Application())


def test_header_naming_a_column_twice_fails_at_binding(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("t,k,k\n1,a,b\n")
    with pytest.raises(BindingError, match=r"stream 's'.*dup.csv.*\['k'\] more than once"):
        CepStream.create("s", *csv_input(path, "t"), EventShape.POINT, application=Application())


def test_live_csv_without_a_header_yet_binds(tmp_path):
    path = tmp_path / "live.csv"
    path.write_text("")
    stream = CepStream.create("s", *csv_input(path, "t", live=True), EventShape.POINT,
                              application=Application())
    assert stream.run("local")["s"].items == []


def test_unreadable_file_names_stream_and_path(tmp_path, monkeypatch):
    path = make_inputs(tmp_path)["csv"]

    def refuse(file, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(file))

    monkeypatch.setattr(checks, "open", refuse, raising=False)
    with pytest.raises(BindingError, match=f"stream 's': cannot read input file {path}: "
                                           "Permission denied"):
        CepStream.create("s", *csv_input(path), EventShape.POINT, application=Application())


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_by_its_mode(tmp_path):
    path = make_inputs(tmp_path)["csv"]
    path.chmod(0)
    with pytest.raises(BindingError, match="cannot read input file"):
        CepStream.create("s", *csv_input(path), EventShape.POINT, application=Application())


def test_unreadable_directory(tmp_path, monkeypatch):
    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(checks.os, "listdir", refuse)
    with pytest.raises(PermissionError, match=f"cannot read input directory {tmp_path}"):
        checks.check_readable_directory(str(tmp_path))
    with pytest.raises(NotADirectoryError, match="is a file"):
        checks.check_readable_directory(str(make_inputs(tmp_path)["csv"]))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checks.check_readable_directory(str(tmp_path / "gone"))


# ---- CSV quoting: exact accounting ---------------------------------------------------------

TEXT = st.text(st.sampled_from("ab ,\"'x"), max_size=6)


@st.composite
def csv_files(draw) -> tuple[str, list[dict], list[int]]:
    """A CSV file's text, its good rows (as payloads, in order) and its bad lines' numbers.

    Good rows are written by ``csv.writer`` (quoted fields with commas and doubled quotes);
    a bad line has a quote left open, or text after a closing quote. Blank lines come between.
    """
    out = io.StringIO()
    out.write("t,id,text\n")
    line, good, bad = 1, [], []
    for n in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["good", "good", "open", "after", "blank"]))
        line += 1
        text = draw(TEXT)
        if kind == "good":
            csv.writer(out, lineterminator="\n").writerow([n, n, text])
            good.append({"id": str(n), "text": text})
        elif kind == "open":
            out.write(f'{n},{n},"{text.replace(chr(34), "")}\n')
            bad.append(line)
        elif kind == "after":
            out.write(f'{n},{n},"{text.replace(chr(34), "")}"x\n')
            bad.append(line)
        else:
            out.write("\n")
    return out.getvalue(), good, bad


def bind_csv(path: Path, name: str = "s") -> CepStream:
    return CepStream.create(name, *csv_input(path, "t"), EventShape.POINT,
                            application=Application(), on_bad_input="dead_letter")


def check_accounting(result, path: Path, good: list[dict], bad: list[int]) -> None:
    events = [i.payload for i in result.items if not isinstance(i, Cti)]
    assert events == good
    assert result.metrics["invalid"] == len(bad) == len(result.diagnostics)
    assert [d.reason.split(": ", 1)[0] for d in result.diagnostics] == [
        f"{path}, line {n}" for n in bad]
    assert all("quot" in d.reason for d in result.diagnostics)


@settings(max_examples=examples(60), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=csv_files())
def test_each_bad_csv_line_is_one_invalid_row(tmp_path, case):
    text, good, bad = case
    path = tmp_path / f"rows-{uuid.uuid4().hex}.csv"  # a new file: no cached scan of the last
    path.write_text(text)
    check_accounting(bind_csv(path).run("local")["s"], path, good, bad)


def test_unclosed_quote_keeps_the_next_good_row(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text('t,id,text\n1,1,"open\n2,2,fine\n3,3,"closed, with a comma"\n')
    result = bind_csv(path).run("local")["s"]
    assert [e.payload["id"] for e in result.items] == ["2", "3"]
    assert result.metrics["invalid"] == 1
    assert result.diagnostics[0].reason == (
        f"{path}, line 2: a quoted field is not closed on its line (rule: a CSV row is one "
        "line; quotes close on the line they open)")
    assert result.diagnostics[0].payload == '1,1,"open'


@pytest.mark.spark
@settings(max_examples=examples(2), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cases=st.lists(csv_files(), min_size=4, max_size=6), sizes=past_the_simplest(spark_caps))
def test_each_bad_csv_line_is_one_invalid_row_on_spark(spark, tmp_path_factory, cases, sizes):
    """Several random files, each its own stream, in one Spark query with random batches."""
    from cti.runtime.spark import SparkRuntime

    folder = tmp_path_factory.mktemp("csv")
    paths = [folder / f"rows{k}.csv" for k in range(len(cases))]
    for path, (text, _, _) in zip(paths, cases, strict=True):
        path.write_text(text)
    streams = [bind_csv(p, f"s{k}") for k, p in enumerate(paths)]
    results = SparkRuntime(spark, batch_sizes=sizes).run_groups(
        [s.ingress_group() for s in streams])
    for stream, path, (_, good, bad), got in zip(streams, paths, cases, results, strict=True):
        check_accounting(got[stream.name], path, good, bad)
