"""File inputs (JSON lines / JSON array, CSV): real toll-booth data, intervals and edges from CSV,
bad rows as errors or dead letters, and offset replay. In-process only (LocalRuntime)."""

from __future__ import annotations

import json
import os
import pickle
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti import (
    AdapterAdvanceTimeSettings,
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    BadInputError,
    CepStream,
    Cti,
    EdgeEvent,
    EventShape,
    IntervalEvent,
    InvalidInput,
    InvalidSettingsError,
    PointEvent,
    ticks,
    to_ticks,
)
from cti.io.files import CsvInputAdapterFactory, FileInputConfig, JsonLinesInputAdapterFactory
from cti.runtime.local import LocalRuntime
from cti.time import MAX_TIME

TOLL = Path(__file__).resolve().parents[1] / "data" / "tollapp"
ENTRY = TOLL / "Entry.json"
EXIT = TOLL / "Exit.json"


def utc(hour: int, minute: int, second: int = 0) -> int:
    """A time on 2014-09-10 (the toll data's day) in UTC, as ticks."""
    return to_ticks(datetime(2014, 9, 10, hour, minute, second, tzinfo=UTC))


def local(minute: int) -> int:
    """05:mm at -07:00 on the toll data's day, as UTC ticks (12:mm UTC)."""
    return utc(12, minute)


def events(items):
    return [i for i in items if not isinstance(i, Cti)]


def all_items(adapter):
    return list(adapter.read(0, adapter.latest_offset()))


def bind(factory, config, shape, settings=None, **kwargs):
    return CepStream.create("s", factory, config, shape, settings,
                            application=Application(), **kwargs)


# ---- the toll-booth sample data ------------------------------------------------------------


def test_entry_json_array_as_point_events():
    assert ENTRY.read_text(encoding="utf-8-sig").lstrip().startswith("[")  # one JSON array
    config = FileInputConfig(str(ENTRY), start_column="EntryTime")
    adapter = JsonLinesInputAdapterFactory().create(config, EventShape.POINT)
    assert adapter.latest_offset() == 23
    assert adapter.is_complete()

    out = bind(JsonLinesInputAdapterFactory(), config, EventShape.POINT,
               AdvanceTimeSettings.increasing_start_time()).collect(LocalRuntime())
    evs = events(out)
    assert len(evs) == 23
    assert all(isinstance(e, PointEvent) for e in evs)
    # 05:01-07:00 is 12:01 UTC; 05:22-07:00 is 12:22 UTC.
    assert evs[0].start == local(1) == 1_410_350_460_000_000
    assert evs[-1].start == local(22)
    assert evs[0].payload == {
        "CarModel": {"Make": "Honda", "Model": "CRV", "VehicleType": 1, "VehicleWeight": 0.0},
        "State": "NY", "TollAmount": 7.0, "Tag": 0, "TollId": 1, "LicensePlate": "JNB 7001",
    }
    assert "EntryTime" not in evs[0].payload
    assert evs[-1].payload["LicensePlate"] == "EDC 1019"
    assert out[-1] == Cti(MAX_TIME)  # flushed at shutdown


def test_entry_payload_columns_and_ticks_against_the_raw_file():
    raw = json.loads(ENTRY.read_text(encoding="utf-8-sig"))
    config = FileInputConfig(str(ENTRY), "EntryTime", payload_columns=["TollId", "LicensePlate"])
    got = all_items(JsonLinesInputAdapterFactory().create(config, EventShape.POINT))
    expected = [PointEvent(to_ticks(datetime.fromisoformat(r["EntryTime"])),
                           {"TollId": r["TollId"], "LicensePlate": r["LicensePlate"]})
                for r in raw]
    assert got == expected


EXIT_MINUTES = [3, 3, 4, 7, 8, 7, 9, 10, 10, 10, 11, 16, 10, 12, 14, 13, 15, 22, 18, 20, 22, 23,
                25]  # ExitTime, minutes past 05:00 -07:00, in file order (checked below)


def test_exit_file_is_what_the_hand_computation_assumes():
    raw = json.loads(EXIT.read_text(encoding="utf-8-sig"))
    assert [datetime.fromisoformat(r["ExitTime"]).minute for r in raw] == EXIT_MINUTES


@pytest.mark.parametrize(
    ("settings", "dropped"),
    [
        # A CTI at each exit: anything below the running maximum is dropped.
        (AdvanceTimeSettings.increasing_start_time(),
         ["CDE 1007", "YZX 1009", "BCD 1002", "CBD 1005", "NJB 1006", "PAC 1209", "EDC 3109",
          "DEC 1008"]),
        # CTI = max - 5 min: only 05:10 after 05:16 (CTI 05:11) is too late.
        (AdvanceTimeSettings.unordered_start_time(timedelta(minutes=5)), ["YZX 1009"]),
        # CTI = max - 6 min: 05:10 after 05:16 sits exactly on the CTI (05:10), which is legal.
        (AdvanceTimeSettings.unordered_start_time(timedelta(minutes=6)), []),
    ],
    ids=["increasing", "unordered-5min", "unordered-6min"],
)
def test_exit_out_of_order_drops(settings, dropped):
    config = FileInputConfig(str(EXIT), "ExitTime", time_format="iso")
    result = bind(JsonLinesInputAdapterFactory(), config, EventShape.POINT, settings).run(
        LocalRuntime())["s"]
    assert [d.payload["LicensePlate"] for d in result.dropped] == dropped
    assert all(d.reason for d in result.dropped)
    assert result.metrics["dropped"] == len(dropped)
    assert result.metrics["accepted"] == 23 - len(dropped)
    kept = events(result.items)
    assert len(kept) == 23 - len(dropped)
    assert {e.payload["LicensePlate"] for e in kept}.isdisjoint(dropped)
    # Every event that got through respects the CTI in force before it.
    cti = None
    for item in result.items:
        if isinstance(item, Cti):
            assert cti is None or item.time > cti
            cti = item.time
        else:
            assert cti is None or item.start >= cti


def test_declared_settings_come_from_the_factory():
    declared = AdapterAdvanceTimeSettings(AdvanceTimeGenerationSettings(1, 0, True))
    factory = JsonLinesInputAdapterFactory(declared)
    config = FileInputConfig(str(EXIT), "ExitTime")
    assert factory.declare_advance_time_properties(config, EventShape.POINT) is declared
    stream = bind(factory, config, EventShape.POINT)
    assert stream.settings_origin == "adapter"
    assert stream.run(LocalRuntime())["s"].metrics["dropped"] == 8  # as increasing_start_time
    with pytest.raises(InvalidSettingsError):
        JsonLinesInputAdapterFactory(AdvanceTimeSettings.increasing_start_time())


# ---- JSON lines ---------------------------------------------------------------------------


def write(path: Path, text: str, encoding: str = "utf-8") -> str:
    path.write_text(text, encoding=encoding)
    return str(path)


def test_json_lines_with_bom_blank_lines_arrival_and_partition(tmp_path):
    path = write(tmp_path / "in.jsonl",
                 '{"t": "2014-09-10T05:01:00-07:00", "arr": 10, "p": 0, "v": {"x": [1, 2]}}\n'
                 "\n   \n"
                 '{"t": 1000, "arr": "2014-09-10T12:05:00Z", "p": "1", "v": null}\r\n',
                 encoding="utf-8-sig")
    config = FileInputConfig(path, "t", arrival_column="arr", partition_column="p")
    adapter = JsonLinesInputAdapterFactory().create(config, EventShape.POINT)
    assert adapter.latest_offset() == 2  # blank lines are not rows
    assert all_items(adapter) == [
        Arriving(PointEvent(local(1), {"v": {"x": [1, 2]}}), 10, "0"),
        Arriving(PointEvent(1000, {"v": None}), utc(12, 5), "1"),
    ]
    assert all_items(adapter)[0].item.payload == {"v": {"x": [1, 2]}}  # nested kept as is


def test_cti_column(tmp_path):
    path = write(tmp_path / "in.jsonl", "\n".join(json.dumps(r) for r in [
        {"t": 5, "n": 1}, {"t": 10, "cti": True}, {"t": 7, "n": 2}, {"t": 12, "n": 3,
                                                                      "cti": False}]))
    config = FileInputConfig(path, "t", cti_column="cti")
    assert all_items(JsonLinesInputAdapterFactory().create(config, EventShape.POINT)) == [
        PointEvent(5, {"n": 1}), Cti(10), PointEvent(7, {"n": 2}), PointEvent(12, {"n": 3})]
    # No policy on the stream: an event below the adapter's own CTI is a violation.
    from cti import CtiViolationError
    with pytest.raises(CtiViolationError):
        bind(JsonLinesInputAdapterFactory(), config, EventShape.POINT).run(LocalRuntime())


# ---- CSV ----------------------------------------------------------------------------------


def test_csv_intervals(tmp_path):
    path = write(tmp_path / "iv.csv",
                 "start,end,room,temp\n"
                 "2014-09-10T05:00:00-07:00,2014-09-10T05:10:00-07:00,a,21.5\n"
                 "\n"
                 '2014-09-10T12:05:00Z,2014-09-10T12:20:00Z,"b, west",19\n',
                 encoding="utf-8-sig")
    config = FileInputConfig(path, "start", "end")
    adapter = CsvInputAdapterFactory().create(config, EventShape.INTERVAL)
    assert adapter.latest_offset() == 2  # header and blank line excluded
    out = bind(CsvInputAdapterFactory(), config, EventShape.INTERVAL,
               AdvanceTimeSettings.increasing_start_time()).collect(LocalRuntime())
    # CSV values stay strings; the BOM does not leak into the first column's name.
    assert events(out) == [IntervalEvent(local(0), local(10), {"room": "a", "temp": "21.5"}),
                           IntervalEvent(local(5), local(20), {"room": "b, west", "temp": "19"})]


def test_csv_edges_with_ticks(tmp_path):
    path = write(tmp_path / "edges.csv",
                 "kind,s,e,plate,expired\n"
                 "start,100,,ABC 1,1\n"
                 "START,150,,XYZ 2,0\n"
                 "end,100,400,ABC 1,1\n"
                 " End ,150,300,XYZ 2,0\n")
    config = FileInputConfig(path, "s", "e", edge_type_column="kind", time_format="ticks")
    items = all_items(CsvInputAdapterFactory().create(config, EventShape.EDGE))
    assert items == [
        EdgeEvent.start_edge(100, {"plate": "ABC 1", "expired": "1"}),
        EdgeEvent.start_edge(150, {"plate": "XYZ 2", "expired": "0"}),
        EdgeEvent.end_edge(100, 400, {"plate": "ABC 1", "expired": "1"}),
        EdgeEvent.end_edge(150, 300, {"plate": "XYZ 2", "expired": "0"}),
    ]
    result = bind(CsvInputAdapterFactory(), config, EventShape.EDGE,
                  AdvanceTimeSettings.unordered_start_time(ticks(1000))).run(LocalRuntime())["s"]
    assert result.metrics["accepted"] == 4  # each end found its start (same payload)
    assert result.metrics["invalid"] == 0


def test_shape_needs_its_columns():
    with pytest.raises(InvalidSettingsError, match="end_column"):
        CsvInputAdapterFactory().create(FileInputConfig("x.csv", "s"), EventShape.INTERVAL)
    with pytest.raises(InvalidSettingsError, match="edge_type_column"):
        CsvInputAdapterFactory().create(FileInputConfig("x.csv", "s", "e"), EventShape.EDGE)
    with pytest.raises(InvalidSettingsError, match="time_format"):
        FileInputConfig("x.csv", "s", time_format="epoch")
    with pytest.raises(InvalidSettingsError, match="arrival_column"):
        FileInputConfig("x.csv", "s", partition_column="p")
    with pytest.raises(InvalidSettingsError, match="two roles"):
        FileInputConfig("x.csv", "s", end_column="s")


# ---- bad rows -----------------------------------------------------------------------------

BAD_JSONL = "\n".join([
    '{"t": 10, "e": 15, "n": 0}',           # line 1: fine
    '{"t": 20, "n": 1',                     # line 2: bad JSON
    '{"n": 2}',                             # line 3: no time
    '{"t": null, "n": 3}',                  # line 4: null time
    '{"t": "yesterday", "n": 4}',           # line 5: unparseable
    '{"t": 30, "e": 30, "n": 5}',           # line 6: end <= start
    '[1, 2]',                               # line 7: not an object
    '{"t": 40, "e": 50, "n": 7}',           # line 8: fine
    '{"t": 2.5, "e": 50, "n": 8}',          # line 9: a float is not ticks
])
BAD_RULES = [  # (line, something the reason must say)
    (2, "not valid JSON"), (3, "no null timestamps"), (4, "no null timestamps"),
    (5, "timestamps must parse"), (6, "end > start"), (7, "JSON object"),
    (9, "timestamps must parse"),
]


def bad_config(tmp_path):
    return FileInputConfig(write(tmp_path / "bad.jsonl", BAD_JSONL), "t", "e")


def test_bad_rows_are_invalid_input_not_exceptions(tmp_path):
    config = bad_config(tmp_path)
    items = all_items(JsonLinesInputAdapterFactory().create(config, EventShape.INTERVAL))
    assert len(items) == 9
    invalid = [(k, i) for k, i in enumerate(items) if isinstance(i, InvalidInput)]
    assert [k for k, _ in invalid] == [1, 2, 3, 4, 5, 6, 8]
    for (_, item), (line, rule) in zip(invalid, BAD_RULES, strict=True):
        assert item.reason.startswith(f"{config.path}, line {line}: "), item.reason
        assert rule in item.reason
        assert item.raw == BAD_JSONL.splitlines()[line - 1]
    assert items[0] == IntervalEvent(10, 15, {"n": 0})
    assert items[7] == IntervalEvent(40, 50, {"n": 7})


def test_bad_rows_raise_bad_input_error_by_default(tmp_path):
    config = FileInputConfig(write(tmp_path / "bad.jsonl", BAD_JSONL), "t")
    stream = bind(JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                  AdvanceTimeSettings.unordered_start_time(ticks(100)))
    with pytest.raises(BadInputError) as err:
        stream.run(LocalRuntime())
    message = str(err.value)
    assert "'s'" in message and "bad.jsonl, line 2" in message and "not valid JSON" in message


def test_bad_rows_dead_lettered(tmp_path):
    config = FileInputConfig(write(tmp_path / "bad.jsonl", BAD_JSONL), "t")
    result = bind(JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                  AdvanceTimeSettings.unordered_start_time(ticks(100)),
                  on_bad_input="dead_letter").run(LocalRuntime())["s"]
    invalid = [d for d in result.diagnostics if d.status == "invalid"]
    # On a point stream "e" is payload, so line 6 is fine; the other bad lines are dead letters.
    expected = [(line, rule) for line, rule in BAD_RULES if line != 6]
    assert len(invalid) == result.metrics["invalid"] == len(expected)
    for d, (line, rule) in zip(invalid, expected, strict=True):
        assert f"bad.jsonl, line {line}: " in d.reason and rule in d.reason
        assert d.input_seq == line - 1
    assert [e.payload["n"] for e in events(result.items)] == [0, 5, 7]


def test_csv_bad_rows(tmp_path):
    path = write(tmp_path / "bad.csv",
                 "kind,s,e,k\n"
                 "start,1,,a\n"          # line 2 fine
                 "middle,2,,b\n"         # line 3 unknown edge type
                 "end,5,5,a\n"           # line 4 end <= start
                 "end,5\n"               # line 5 too few fields
                 "start,3,9,c\n"         # line 6 a start with an end
                 "end,1,8,a\n")          # line 7 fine
    config = FileInputConfig(path, "s", "e", edge_type_column="kind")
    items = all_items(CsvInputAdapterFactory().create(config, EventShape.EDGE))
    reasons = [i.reason for i in items if isinstance(i, InvalidInput)]
    assert [r.split(": ", 1)[0] for r in reasons] == [
        f"{path}, line {n}" for n in (3, 4, 5, 6)]
    assert "edge type" in reasons[0] and "end > start" in reasons[1]
    assert "header has 4" in reasons[2] and "no end" in reasons[3]
    assert items[0] == EdgeEvent.start_edge(1, {"k": "a"})
    assert items[-1] == EdgeEvent.end_edge(1, 8, {"k": "a"})


def test_broken_json_array_keeps_the_elements_before_the_error(tmp_path):
    path = write(tmp_path / "arr.json", '[\n {"t": 1},\n {"t": 2}\n {"t": 3}\n]')
    items = all_items(JsonLinesInputAdapterFactory().create(FileInputConfig(path, "t"),
                                                            EventShape.POINT))
    assert items[:2] == [PointEvent(1), PointEvent(2)]
    assert len(items) == 3 and isinstance(items[2], InvalidInput)
    assert items[2].reason.startswith(f"{path}, line 4: not valid JSON")


def test_invalid_utf8_line_is_bad_input(tmp_path):
    path = tmp_path / "enc.jsonl"
    path.write_bytes(b'{"t": 1}\n{"t": 2, "s": "\xff"}\n{"t": 3}\n')
    items = all_items(JsonLinesInputAdapterFactory().create(FileInputConfig(str(path), "t"),
                                                            EventShape.POINT))
    assert items[0] == PointEvent(1) and items[2] == PointEvent(3)
    assert isinstance(items[1], InvalidInput) and "line 2" in items[1].reason
    assert "UTF-8" in items[1].reason


# ---- offsets and replay -------------------------------------------------------------------


@pytest.mark.parametrize("path", [ENTRY, EXIT], ids=["entry", "exit"])
def test_slices_match_a_full_read(path):
    time = "EntryTime" if path == ENTRY else "ExitTime"
    adapter = JsonLinesInputAdapterFactory().create(FileInputConfig(str(path), time),
                                                    EventShape.POINT)
    full = all_items(adapter)
    for size in (1, 4, 7):
        sliced = [i for s in range(0, len(full), size) for i in adapter.read(s, s + size)]
        assert sliced == full
    assert list(adapter.read(5, 9)) == full[5:9]
    # A fresh adapter (as a Spark executor would create) reads the same rows.
    again = JsonLinesInputAdapterFactory().create(FileInputConfig(str(path), time),
                                                  EventShape.POINT)
    assert list(again.read(10, 15)) == full[10:15]


def test_batched_run_matches_whole_run():
    def run(runtime):
        config = FileInputConfig(str(EXIT), "ExitTime")
        return bind(JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                    AdvanceTimeSettings.unordered_start_time(timedelta(minutes=2))
                    ).run(runtime)["s"]

    whole, split = run(LocalRuntime()), run(LocalRuntime(batch_sizes=[3, 5]))
    assert whole.items == split.items
    assert whole.metrics == split.metrics
    assert whole.metrics["dropped"] > 0  # the case is not trivial


def test_appending_rows_keeps_earlier_offsets(tmp_path):
    path = tmp_path / "grow.csv"
    path.write_text("t,n\n1,a\n2,b\n")
    config = FileInputConfig(str(path), "t")
    first = CsvInputAdapterFactory().create(config, EventShape.POINT)
    assert first.latest_offset() == 2
    before = list(first.read(0, 2))
    with path.open("a") as f:
        f.write("\n3,c\n4,d\n")
    assert first.latest_offset() == 4
    assert list(first.read(0, 2)) == before
    assert list(first.read(2, 4)) == [PointEvent(3, {"n": "c"}), PointEvent(4, {"n": "d"})]


def test_factory_and_config_pickle():
    config = FileInputConfig(ENTRY, "EntryTime", payload_columns=["TollId"])
    assert config.path == str(ENTRY)
    factory = JsonLinesInputAdapterFactory(
        AdapterAdvanceTimeSettings(AdvanceTimeGenerationSettings(1)))
    config2, factory2 = pickle.loads(pickle.dumps((config, factory)))
    assert config2 == config and hash(config2) == hash(config)
    assert factory2.advance_time_settings == factory.advance_time_settings
    assert all_items(factory2.create(config2, EventShape.POINT))[0].payload == {"TollId": 1}


# ---- a directory of files ------------------------------------------------------------------


def _put(directory: Path, name: str, rows: list[dict], mtime_s: int) -> None:
    path = directory / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.utime(path, ns=(mtime_s * 10**9, mtime_s * 10**9))


def test_directory_reads_files_by_modification_time_arriving_then(tmp_path):
    _put(tmp_path, "b.json", [{"t": 5, "id": 1}, {"t": 7, "id": 2}], 2000)
    _put(tmp_path, "a.json", [{"t": 3, "id": 0}], 1000)
    _put(tmp_path, "_partial.json", [{"t": 1, "id": 9}], 500)  # ignored: being written
    _put(tmp_path, "c.csv", [{"t": 1, "id": 8}], 3000)  # not matching the pattern
    config = FileInputConfig(tmp_path, start_column="t", time_format="ticks", pattern="*.json")
    adapter = JsonLinesInputAdapterFactory().create(config, EventShape.POINT)
    assert adapter.latest_offset() == 3 and adapter.is_complete()
    assert list(adapter.read(0, 3)) == [
        Arriving(PointEvent(3, {"id": 0}), to_ticks(datetime.fromtimestamp(1000, UTC))),
        Arriving(PointEvent(5, {"id": 1}), to_ticks(datetime.fromtimestamp(2000, UTC))),
        Arriving(PointEvent(7, {"id": 2}), to_ticks(datetime.fromtimestamp(2000, UTC)))]
    assert list(adapter.read(1, 2)) == list(adapter.read(0, 3))[1:2]  # replayable by offset
    plain = attrs.evolve(config, file_arrival=False)
    items = list(JsonLinesInputAdapterFactory().create(plain, EventShape.POINT).read(0, 3))
    assert items == [PointEvent(3, {"id": 0}), PointEvent(5, {"id": 1}), PointEvent(7, {"id": 2})]
    bad = JsonLinesInputAdapterFactory().create(attrs.evolve(config, path=tmp_path / "x"),
                                                EventShape.POINT)
    with pytest.raises(FileNotFoundError):
        bad.latest_offset()


def test_live_directory_scans_each_file_once_and_refuses_a_file_from_the_past(tmp_path,
                                                                              monkeypatch):
    from cti.io.files import arrow_tables, scan

    scanned, tabled = [], []  # the files' contents parsed row by row, the files Arrow read
    real, real_table = scan._scan_json_lines, arrow_tables._json_table
    monkeypatch.setattr(scan, "_scan_json_lines", lambda data: scanned.append(data) or
                        real(data))
    monkeypatch.setattr(arrow_tables, "_json_table", lambda path: tabled.append(os.path.basename(
        path)) or real_table(path))
    config = FileInputConfig(tmp_path, start_column="t", time_format="ticks", live=True)
    _put(tmp_path, "1.json", [{"t": 1}, {"t": 2}], 1000)
    factory = JsonLinesInputAdapterFactory()
    assert factory.create(config, EventShape.POINT).latest_offset() == 2
    assert not factory.create(config, EventShape.POINT).is_complete()
    _put(tmp_path, "2.json", [{"t": 3}], 2000)
    adapter = factory.create(config, EventShape.POINT)
    assert adapter.latest_offset() == 3
    assert [i.item.start for i in adapter.read(2, 3)] == [3]
    assert tabled == ["1.json", "2.json"]  # each file counted once, by Arrow
    assert scanned == [b'{"t": 3}\n']  # and the one ``read`` read row by row, once
    _put(tmp_path, "0.json", [{"t": 0}], 500)  # offsets 0-2 were read: it cannot go before
    with pytest.raises(InvalidSettingsError, match="0.json.*modification time before"):
        factory.create(config, EventShape.POINT).latest_offset()


def test_directory_stream_runs_with_arrival_from_files(tmp_path):
    _put(tmp_path, "a.json", [{"t": 10}, {"t": 30}], 1000)
    _put(tmp_path, "b.json", [{"t": 15}, {"t": 40}], 2000)
    config = FileInputConfig(tmp_path, start_column="t", time_format="ticks")
    stream = CepStream.create("d", JsonLinesInputAdapterFactory(), config, EventShape.POINT,
                              AdvanceTimeSettings.unordered_start_time(timedelta(microseconds=10)),
                              application=Application())
    result = stream.run(LocalRuntime())["d"]
    assert [e.start for e in result.items if isinstance(e, PointEvent)] == [10, 30, 40]
    assert result.metrics["dropped"] == 1  # 15 arrived (in b.json) after the CTI at 20


# Text a CSV field may hold: mostly plain, sometimes quotes, whitespace (ASCII and not), NUL,
# a lone carriage return, text beyond ASCII, a byte order mark.
_FIELD = st.text(st.sampled_from(list("ab1 ") * 40 + [
    '"', "\t", "\r", "\u00a0", "\x1c", "\x00", "\u00e9", "\ufeff", ",", ";"]), max_size=4)
# A line: its fields (two, as the header has, or another count) or a blank or whitespace line.
_PAIR = st.lists(_FIELD, min_size=2, max_size=2)
_LINE = _PAIR | _PAIR | _PAIR | st.lists(_FIELD, max_size=3) | st.sampled_from([[], [" "],
                                                                                 ["\t", ""]])


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_LINE, st.sampled_from(["\n"] * 3 + ["\r\n"] * 3 + ["\r"])),
                max_size=8),
       st.sampled_from([",", ";", "\t"]), st.sampled_from(["h1{d}h2 "] * 6 + [" h{d}h", "h1", ""]),
       st.sampled_from([False] * 5 + [True]))
def test_arrows_csv_reader_gives_the_scanners_rows_or_declines(tmp_path_factory, lines,
                                                               delimiter, header, bad):
    """``csv_table`` (Arrow's reader, taken where it is certain to agree) gives exactly the
    fields of the row-by-row scanner's records, all good, or None."""
    from cti.io.files.arrow_tables import csv_table
    from cti.io.files.csv_scanner import _scan_csv

    text = header.format(d=delimiter) + "".join(nl + delimiter.join(f) for f, nl in lines)
    data = text.encode() + b"\xff" * bad
    path = tmp_path_factory.mktemp("csv") / "f.csv"
    path.write_bytes(data)
    table = csv_table(str(path), delimiter)
    if table is None:
        return
    records = _scan_csv(data, delimiter)
    assert all(r.error is None for r in records)
    assert table.to_pylist() == [r.fields for r in records]


def _passes_whole_file_checks(data: bytes, delimiter: str) -> bool:
    """``csv_table``'s checks before its parse, on the file's bytes at once (as it made them
    before it read the file a chunk at a time)."""
    from cti.io.files.csv_scanner import _header_error
    from cti.io.files.records import _BOM, _without_bom

    data = _without_bom(data)
    if delimiter.isspace() or b'"' in data or data.count(b"\r") != data.count(b"\r\n"):
        return False
    first, _, body = data.partition(b"\n")
    if _BOM in body:
        return False
    try:
        header = [h.strip() for h in first.decode("utf-8").rstrip("\r").split(delimiter)]
    except UnicodeDecodeError:
        return False
    return len(header) >= 2 and all(header) and not _header_error(header)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_LINE, st.sampled_from(["\n"] * 3 + ["\r\n"] * 3 + ["\r"])),
                max_size=8),
       st.sampled_from([",", ";", "\t"]), st.sampled_from(["h1{d}h2 "] * 6 + [" h{d}h", "h1", ""]),
       st.sampled_from([False] * 5 + [True]), st.sampled_from([False, True]),
       st.sampled_from([1, 2, 3, 1 << 24]))
def test_a_csv_files_rows_are_counted_as_its_table_has_them(tmp_path_factory, lines, delimiter,
                                                            header, bad, bom, chunk):
    """``csv_rows`` (the file checked a chunk at a time, its rows counted batch by batch, no
    table kept) is ``csv_table``'s row count, and None where that is None; the checks a chunk
    at a time take the files the checks on the whole file took (a pair CR-LF or a byte order
    mark straddling two chunks: chunks of 1-3 bytes)."""
    from unittest import mock

    from cti.io.files import arrow_tables
    from cti.io.files.csv_scanner import _scan_csv

    text = header.format(d=delimiter) + "".join(nl + delimiter.join(f) for f, nl in lines)
    data = b"\xef\xbb\xbf" * bom + text.encode() + b"\xff" * bad
    path = tmp_path_factory.mktemp("csv") / "f.csv"
    path.write_bytes(data)
    with mock.patch.object(arrow_tables, "_CHUNK", chunk):
        assert (arrow_tables._csv_layout(str(path), delimiter) is not None) == \
            _passes_whole_file_checks(data, delimiter)
        rows, table = arrow_tables.csv_rows(str(path), delimiter), \
            arrow_tables.csv_table(str(path), delimiter)
    assert (rows is None) == (table is None)
    if table is not None:
        assert rows == table.num_rows == len(_scan_csv(data, delimiter))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(_LINE, st.sampled_from(["\n"] * 3 + ["\r\n"] * 3 + ["\n\n", "\r\n\r\n"])),
                max_size=10),
       st.sampled_from([",", ";"]), st.sampled_from([False] * 5 + [True]),
       st.sampled_from([False, True]), st.sampled_from([1, 2, 3, 1 << 20]),
       st.sampled_from([1, 2, 3, 1 << 12]), st.data())
def test_a_range_of_a_csv_files_rows_is_its_tables_slice(tmp_path_factory, lines, delimiter,
                                                         bad, bom, chunk, every, data):
    """``csv_range`` (the range's bytes found from the line breaks, a chunk at a time, from
    the nearest entry of a row index, and parsed alone) is ``csv_table``'s slice, and None
    where that is None: blank lines, CR-LF, a last line without a line break, any chunk and
    index spacing."""
    from unittest import mock

    from cti.io.files import arrow_tables

    text = f"h1{delimiter}h2" + "".join(nl + delimiter.join(f) for f, nl in lines)
    raw = b"\xef\xbb\xbf" * bom + text.encode() + b"\xff" * bad
    path = tmp_path_factory.mktemp("csv") / "f.csv"
    path.write_bytes(raw)
    with mock.patch.object(arrow_tables, "_CHUNK", chunk), \
            mock.patch.object(arrow_tables, "_INDEX_EVERY", every):
        table = arrow_tables.csv_table(str(path), delimiter)
        n = 0 if table is None else table.num_rows
        start = data.draw(st.integers(0, n))
        end = data.draw(st.integers(start, n))
        got = arrow_tables.csv_range(str(path), start, end, delimiter)
    if table is None:
        assert got is None
    else:
        assert got is not None and got.equals(table.slice(start, end - start))


@pytest.mark.parametrize("long", [10, 1 << 17])
def test_a_csv_row_longer_than_a_counting_block_is_counted(tmp_path, long):
    """``csv_rows`` parses small blocks, which Arrow refuses where a row is longer than one:
    such a file is counted as ``csv_table`` reads it, not refused."""
    from cti.io.files import arrow_tables

    path = tmp_path / "f.csv"
    path.write_text("key,owner\nk0," + "o" * long + "\n" + "".join(
        f"k{i},o{i}\n" for i in range(1, 5)))
    table = arrow_tables.csv_table(str(path))
    assert table is not None and arrow_tables.csv_rows(str(path)) == table.num_rows == 5


@pytest.mark.parametrize("text, delimiter", [
    ("key,owner\nk1,Owner 1\nk2,\n\nk3,caf\u00e9\n", ","),
    ("\ufeffa;b\r\n1;2\r\n3;4", ";"),
])
def test_a_plain_csv_file_is_read_by_arrow(tmp_path, text, delimiter):
    from cti.io.files.arrow_tables import csv_table
    from cti.io.files.csv_scanner import _scan_csv

    path = tmp_path / "f.csv"
    path.write_text(text, encoding="utf-8")
    table = csv_table(str(path), delimiter)
    assert table is not None
    assert table.to_pylist() == [r.fields for r in _scan_csv(path.read_bytes(), delimiter)]


@pytest.mark.parametrize("data, delimiter", [
    (b"h1,h2\ra\nb,c\n", ","),        # a header ended by a lone carriage return
    (b'h1,h2\n"a,b",c\n', ","),       # quoting
    (b"h1\th2\n \t \na\tb\n", "\t"),  # a line of whitespace, which the scanner skips as blank
    (b"h1,h2\n\xef\xbb\xbfa,b\n", ","),  # a byte order mark that is a field's text
    (b"h1,h2\na,b\nc\n", ","),        # a row with too few fields (a bad row)
])
def test_arrows_csv_reader_is_not_taken_where_it_could_differ(tmp_path, data, delimiter):
    from cti.io.files.arrow_tables import csv_table

    path = tmp_path / "f.csv"
    path.write_bytes(data)
    assert csv_table(str(path), delimiter) is None


_TIME = st.sampled_from(["0", "7", "12", "+5", "-3", " 8 ", "\t9", "30", "31",
                         "99999999999999999999", "9223372036854775807", "-9223372036854775808",
                         "1970-01-01T00:00:01+00:00", "", "abc", "\u0661\u0662", "1.5",
                         "1970-01-01T00:00:00.000020Z", " 1970-01-01 00:00:00.000007-00:00",
                         "1970-01-01T00:00:00.00003", "1970-01-01T00:00:00.000031Z",
                         "1970-02-30T00:00:00Z", "1970-01-01T00:00:00.0000301Z",
                         "1970-01-01 00:00:00.000009"]) \
    | st.integers(0, 40).map(str)
_PARTITION = st.sampled_from(["p1", "", " ", "\t", "p 2", " p3 ", "caf\u00e9", "\u3000"])
_EDGE_TYPE = st.sampled_from(["start", "end", "START", " End\t", "x", "", "\u017ftart"])
_MARKER = st.sampled_from(["", "0", "1", "true", "TRUE", " yes ", "Y", "cti", "no", "N",
                           "maybe", "ye\u017f", "\u3000"])
def _written(table):
    """``read_frame``'s table with each payload left out for its typed columns written from
    them (``filled_payloads``): the text the engine writes, to compare with ``read``'s."""
    from cti.forms.json_text import filled_payloads

    return None if table is None else filled_payloads(table)


# Times ``read_frame`` reads by columns: plain int ticks, ISO-8601 in the common form.
_PLAIN_TICKS = r"[ \t]*[+-]?[0-9]{1,18}[ \t]*"
_COMMON_ISO = r"[ \t]*[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}" \
    r"(:[0-9]{2}([.,][0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2})?[ \t]*"


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(_TIME, _TIME, st.sampled_from(["a", "b", "", "caf\u00e9", "x y"]),
                          _TIME, _PARTITION, _MARKER, _EDGE_TYPE), max_size=12),
       st.sampled_from([EventShape.POINT, EventShape.INTERVAL, EventShape.EDGE]),
       st.sampled_from([None, "ticks", "iso"]), st.sampled_from([None, ("k",)]),
       st.integers(0, 12), st.integers(0, 12),
       st.lists(st.sampled_from(["\n", "\n", "\r\n", "\n\n", "\r\n\n"]), min_size=13,
                max_size=13), st.booleans(), st.sampled_from([None, "Europe/Berlin"]),
       st.sampled_from(["", "a", "ap", "c", "apc"]))
def test_a_csv_file_read_by_columns_gives_reads_rows(tmp_path_factory, rows, shape, fmt,
                                                     payload_columns, a, b, breaks, bom, zone,
                                                     roles):
    """``read_frame`` (Arrow's table, times, edge types, arrival times, partitions, CTI
    markers and payloads by column; a row with a cell in another form built from its line)
    gives exactly the rows ``read`` gives: events, CTIs, bad rows with their rule, line number
    and raw text (blank lines, CRLF and a byte order mark among the lines), for any slice.
    ``roles``: the columns ``a`` (arrival), ``p`` (partition) and ``c`` (CTI marker) that
    have their role; the others are payload (and ``y``, an edge's type, for other shapes)."""
    import numpy as np

    from cti.forms.rows import adapter_item_to_row

    path = tmp_path_factory.mktemp("csv") / "f.csv"
    path.write_bytes(b"\xef\xbb\xbf" * bom + ("t,e,k,n,a,p,c,y" + breaks[-1] + "".join(
        f"{t},{e},{k},{i},{arr},{part},{flag},{y}{nl}"
        for i, ((t, e, k, arr, part, flag, y), nl)
        in enumerate(zip(rows, breaks[:len(rows)], strict=True)))).encode())
    config = FileInputConfig(str(path), start_column="t", time_format=fmt, time_zone=zone,
                             end_column="e" if shape is not EventShape.POINT else None,
                             edge_type_column="y" if shape is EventShape.EDGE else None,
                             payload_columns=payload_columns,
                             arrival_column="a" if "a" in roles else None,
                             partition_column="p" if "p" in roles else None,
                             cti_column="c" if "c" in roles else None)
    adapter = CsvInputAdapterFactory().create(config, shape)
    a, b = sorted((min(a, len(rows)), min(b, len(rows))))
    frame = _written(adapter.read_frame(a, b))
    assert adapter.latest_offset() == len(rows)
    if not rows:  # (Arrow reads no table from a header alone: ``read`` gives the none)
        return
    forms = {None: [_PLAIN_TICKS, _COMMON_ISO], "ticks": [_PLAIN_TICKS], "iso": [_COMMON_ISO]}
    plain = sum(any(re.fullmatch(f, t) for f in forms[fmt]) and _parses(t, fmt, config)
                for t, *_ in rows[a:b])
    if plain * 2 < b - a:  # mostly another form of time: row by row
        assert frame is None
        return
    assert frame is not None
    want = [adapter_item_to_row(0, 0, item) for item in adapter.read(a, b)]
    got = frame.to_pylist()
    null = np.iinfo(np.int64).min
    assert [(r["kind"], r["start"], r["end"], r["arrival"], r["partition"], r["payload"],
             r["error"]) for r in got] \
        == [(w.kind, *(null if t is None else t for t in (w.start, w.end, w.arrival)),
             w.partition, w.payload, w.error) for w in want]  # (times in the row form)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(st.lists(st.tuples(_TIME, st.sampled_from(["a", "b", "caf\u00e9"]),
                                   st.integers(0, 40)), max_size=6), min_size=1, max_size=4),
       st.sampled_from(["files", "column", "none"]), st.booleans(), st.integers(0, 24),
       st.integers(0, 24))
def test_a_csv_directory_read_by_columns_gives_reads_rows(tmp_path_factory, files, arrival,
                                                         quoted, a, b):
    """A directory of CSV files read by columns (each file by its ``read_frame``, its rows
    arriving at its modification time, or at their arrival column's, or with none) gives the
    rows ``read`` gives for any range over the files; a file Arrow does not read (quotes)
    makes the range one ``read`` gives."""
    from cti.forms.rows import adapter_item_to_row

    null = -(2**63)
    folder = tmp_path_factory.mktemp("dir")
    for f, rows in enumerate(files):
        path = folder / f"{f}.csv"
        text = "".join(f"{t},{k},{at}\n" for t, k, at in rows)
        if quoted and f == len(files) - 1:
            text = text.replace("caf\u00e9", '"caf\u00e9"')
        path.write_text("t,k,at\n" + text, encoding="utf-8")
        os.utime(path, ns=(10**18 + f * 10**9,) * 2)
    config = FileInputConfig(folder, start_column="t", file_arrival=arrival == "files",
                             arrival_column="at" if arrival == "column" else None)
    adapter = CsvInputAdapterFactory().create(config, EventShape.POINT)
    n = adapter.latest_offset()
    assert n == sum(map(len, files))
    a, b = sorted((min(a, n), min(b, n)))
    frame = _written(adapter.read_frame(a, b))
    want = [adapter_item_to_row(0, 0, item) for item in adapter.read(a, b)]
    first, by_rows = 0, False  # whether a file of the range is read row by row
    for f, rows in enumerate(files):
        part = rows[max(0, a - first):max(0, b - first)]
        quotes = quoted and f == len(files) - 1 and any(k == "caf\u00e9" for _, k, _ in rows)
        plain = sum(any(re.fullmatch(f, t) for f in (_PLAIN_TICKS, _COMMON_ISO))
                    and _parses(t, None, config)
                    for t, _, _ in part)
        by_rows |= bool(part) and (quotes or plain * 2 < len(part))
        first += len(rows)
    if a == b:  # (nothing to read: no table, or an empty one)
        assert frame is None or frame.num_rows == 0
        return
    assert (frame is None) == by_rows
    if frame is None:
        return
    assert [(r["kind"], r["start"], r["arrival"], r["payload"], r["error"])
            for r in frame.to_pylist()] == [
        (w.kind, *(null if t is None else t for t in (w.start, w.arrival)), w.payload, w.error)
        for w in want]


_JSON_VALUE = st.sampled_from([0, 7, 12, -3, 2**62, 2**70, 1.5, 1.0, True, False, None, "a",
                               "caf\u00e9", "7", " 8 ", "1970-01-01T00:00:00.000009Z", "yes",
                               "", [1], {"x": 1}]) | st.integers(0, 40)
_JSON_ROW = st.dictionaries(st.sampled_from(["t", "e", "k", "a", "p", "c", "y"]), _JSON_VALUE,
                            max_size=7)
# A line: a row as JSON (maybe spaced out, maybe with a key twice), or a blank line, bad JSON,
# two rows on one line, a value that is not an object, bytes that are not UTF-8.
_JSON_LINE = (_JSON_ROW.map(json.dumps) | _JSON_ROW.map(lambda r: json.dumps(r, indent=None,
                                                                           separators=(" , ",
                                                                                       " : ")))
              | _JSON_ROW.map(lambda r: json.dumps(r)[:-1] + ', "k": 1}' if r else "{}")
              | st.sampled_from(["", "  ", "\t", '{"t": 1', "[1]", "5", '{"t": 1} {"t": 2}',
                                 "{\"k\": \"\xff\"}", '{"t": 1, "k": "\\ud800"}']))


def _clean_rows(times: str, n: int) -> st.SearchStrategy:
    """``n`` rows whose fields keep one type each (as Arrow's reader needs), times as ``times``
    says: int ticks, digit strings or ISO-8601 strings."""
    def time(t: int) -> object:  # (whole seconds: text Arrow's reader would take for a time)
        return t if times == "int" else str(t) if times == "digits" else \
            f"1970-01-01T00:00:00.{t:06d}Z" if times == "iso" else \
            f"1970-01-01T00:{t // 60:02d}:{t % 60:02d}Z"

    row = st.builds(lambda t, d, k, at, p, c, y: {
        "t": time(t), "e": time(t + d), "k": k, "v": t * 3, "f": t + 0.25, "a": time(at),
        "p": p, "c": c, "y": y},
        st.integers(0, 40), st.integers(-2, 5), st.sampled_from(["a", "b", "caf\u00e9", ""]),
        st.integers(0, 60), st.sampled_from(["p1", "p2", " "]), st.sampled_from([True, False]),
        st.sampled_from(["start", "end", "End"]))
    return st.lists(row, min_size=n, max_size=n)


@settings(max_examples=examples(200), deadline=None)
@given(st.sampled_from(["int", "digits", "iso", "iso seconds"]).flatmap(
           lambda times: st.integers(0, 10).flatmap(lambda n: _clean_rows(times, n))),
       st.lists(st.tuples(st.integers(0, 10), _JSON_LINE | st.sampled_from(
           ["drop k", "null k", "float v", "whole float v", "drop t", "int f",
            "whole float f"])), max_size=3),
       st.sampled_from([EventShape.POINT, EventShape.INTERVAL, EventShape.EDGE]),
       st.sampled_from([None, "ticks", "iso"]), st.sampled_from(["", "a", "ap", "c", "apc"]),
       st.sampled_from(["\n", "\r\n", "\n", "\r"]), st.booleans(), st.integers(0, 14),
       st.integers(0, 14))
def test_a_json_lines_file_read_by_columns_gives_reads_rows(tmp_path_factory, clean, noise,
                                                            shape, fmt, roles, newline, bom, a,
                                                            b):
    """``read_frame`` of a JSON-lines file (Arrow's JSON reader where it reads the file
    exactly, ``json_table``; times, roles and payloads by column; a row with a cell in another
    form built from its record) gives exactly the rows ``read`` gives, for any slice: files of
    clean rows, with noisy lines (nulls, missing fields, floats, nested values, keys twice,
    bad JSON, blank lines, bytes that are not UTF-8) among them or not; without noise, the
    frame is Arrow's wherever most times are read by columns."""
    from cti.forms.rows import adapter_item_to_row

    null = -(2**63)
    path = tmp_path_factory.mktemp("json") / "f.json"
    lines = [json.dumps(r) for r in clean]
    for at, line in noise:  # a noisy line, or a clean row changed: a field dropped, ...
        if line in ("drop k", "null k", "float v", "whole float v", "drop t", "int f",
                    "whole float f"):
            row = dict(clean[at % len(clean)]) if clean else {}
            how, field = line.rsplit(" ", 1)
            row.pop(field, None) if how == "drop" else row.update({field: {
                "null": None, "float": 2.5, "whole float": 3.0, "int": 3}[how]})
            line = json.dumps(row)
        lines.insert(min(at, len(lines)), line)
    text = newline.join(lines) + newline
    path.write_bytes(b"\xef\xbb\xbf" * bom + text.encode("utf-8", "surrogateescape"))
    config = FileInputConfig(str(path), start_column="t", time_format=fmt,
                             end_column="e" if shape is not EventShape.POINT else None,
                             edge_type_column="y" if shape is EventShape.EDGE else None,
                             arrival_column="a" if "a" in roles else None,
                             partition_column="p" if "p" in roles else None,
                             cti_column="c" if "c" in roles else None)
    adapter = JsonLinesInputAdapterFactory().create(config, shape)
    n = adapter.latest_offset()
    a, b = sorted((min(a, n), min(b, n)))
    frame = _written(adapter.read_frame(a, b))
    want = [adapter_item_to_row(0, 0, item) for item in adapter.read(a, b)]
    assert n == len(list(adapter.read(0, n)))
    forms = {None: [_PLAIN_TICKS, _COMMON_ISO], "ticks": [_PLAIN_TICKS], "iso": [_COMMON_ISO]}
    plain = sum(isinstance(r["t"], int) and fmt != "iso" or isinstance(r["t"], str) and any(
        re.fullmatch(f, r["t"]) for f in forms[fmt]) for r in clean[a:b])
    if not noise and newline != "\r" and b > a and plain * 2 >= b - a:
        assert frame is not None
    if frame is None:
        return
    assert [(r["kind"], r["start"], r["end"], r["arrival"], r["partition"], r["payload"],
             r["error"]) for r in frame.to_pylist()] == [
        (w.kind, *(null if t is None else t for t in (w.start, w.end, w.arrival)), w.partition,
         w.payload, w.error) for w in want]


def test_a_clean_json_lines_file_is_read_by_columns(tmp_path):
    """Rows of integers, booleans and strings, none null or missing: Arrow reads them (a row
    with a bad time among them is built from its line); a null anywhere: row by row."""
    from cti.forms.rows import adapter_item_to_row

    rows = [{"t": f"2026-11-26T10:00:{t:02d}Z", "k": f"k{t % 3}", "n": t * 2, "ok": t % 2 == 0,
             "at": t + 5} for t in range(20)]
    rows[4]["t"] = "not a time"  # (a string too: a column of one type)
    path = tmp_path / "f.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = FileInputConfig(str(path), start_column="t", arrival_column="at")
    adapter = JsonLinesInputAdapterFactory().create(config, EventShape.POINT)
    frame = _written(adapter.read_frame(0, 20))
    assert frame is not None
    want = [adapter_item_to_row(0, 0, item) for item in adapter.read(0, 20)]
    assert [(r["kind"], r["payload"], r["arrival"], r["error"]) for r in frame.to_pylist()] == \
        [(w.kind, w.payload, -(2**63) if w.arrival is None else w.arrival, w.error)
         for w in want]
    assert want[4].kind == "invalid" and want[5].payload == '{"k":"k2","n":10,"ok":false}'
    path.write_text("".join(json.dumps(r) + "\n" for r in [*rows, {"t": 30, "k": None}]))
    assert JsonLinesInputAdapterFactory().create(config, EventShape.POINT).read_frame(0, 21) \
        is None
    # Floats, each written as one: read by Arrow, every digit kept; an integer among them
    # (which Arrow reads as a float, ``json.loads`` as an integer): row by row.
    floats = [{"t": t, "f": t / 3 + 0.1} for t in range(10)]
    path.write_text("".join(json.dumps(r) + "\n" for r in floats))
    config = FileInputConfig(str(path), start_column="t")
    adapter = JsonLinesInputAdapterFactory().create(config, EventShape.POINT)
    assert [r["payload"] for r in _written(adapter.read_frame(0, 10)).to_pylist()] == \
        [json.dumps({"f": r["f"]}, separators=(",", ":")) for r in floats]
    path.write_text("".join(json.dumps(r) + "\n" for r in [*floats, {"t": 10, "f": 3}]))
    assert JsonLinesInputAdapterFactory().create(config, EventShape.POINT).read_frame(0, 11) \
        is None
    # Two objects on a line: one bad row to ``read``, two rows to Arrow's reader.
    config = FileInputConfig(str(path), start_column="t", arrival_column="at")
    path.write_text("".join(json.dumps(r) + (" " if i == 2 else "\n")
                            for i, r in enumerate(rows)))
    adapter = JsonLinesInputAdapterFactory().create(config, EventShape.POINT)
    assert adapter.latest_offset() == 19 and adapter.read_frame(0, 19) is None
    assert "not valid JSON" in list(adapter.read(2, 3))[0].reason


def test_every_partition_and_marker_form_reads_by_columns_as_row_by_row(tmp_path):
    """Each partition and CTI-marker form of the property test above, on every row of a file
    read by columns (its times plain), gives the rows ``read`` gives."""
    from cti.forms.rows import adapter_item_to_row

    null = -(2**63)
    parts, marks = _PARTITION.elements, _MARKER.elements
    path = tmp_path / "f.csv"
    path.write_text("t,a,p,c,k\n" + "".join(
        f"{i},{i + 1},{parts[i % len(parts)]},{marks[i % len(marks)]},v{i}\n"
        for i in range(len(parts) * len(marks))), encoding="utf-8")
    config = FileInputConfig(str(path), start_column="t", arrival_column="a",
                             partition_column="p", cti_column="c")
    adapter = CsvInputAdapterFactory().create(config, EventShape.POINT)
    n = adapter.latest_offset()
    got = [(r["kind"], r["start"], r["arrival"], r["partition"], r["payload"], r["error"])
           for r in _written(adapter.read_frame(0, n)).to_pylist()]
    want = [adapter_item_to_row(0, 0, item) for item in adapter.read(0, n)]
    assert got == [(w.kind, *(null if t is None else t for t in (w.start, w.arrival)),
                    w.partition, w.payload, w.error) for w in want]
    assert {w.kind for w in want} == {"point", "cti", "invalid"}


@pytest.mark.spark
def test_files_with_arrival_partition_and_markers_on_spark_equal_in_process(spark, tmp_path):
    """Two CSV files and a JSON-lines file read by columns, each a stream of one Spark query in
    micro-batches: ISO times with arrival times and partitions under an event-ordering policy,
    int ticks with CTI markers, and JSON's integers and strings; bad rows among them. Items,
    dead letters and metrics equal the in-process run's, where each file is read row by
    row."""
    from cti import EventOrderingPolicy
    from cti.runtime.spark import SparkRuntime

    ordered, marked = tmp_path / "ordered.csv", tmp_path / "marked.csv"
    ordered.write_text("time,arrival,partition,k\n" + "".join(
        f"2026-11-26T10:00:{(7 * i) % 50:02d}.{i:03d}+01:00,{i * 1_000_000},p{i % 3},k{i % 4}\n"
        if i % 11 else f"not a time,{i * 1_000_000},p{i % 3},k{i % 4}\n" for i in range(60)))
    marked.write_text("t,cti,k\n" + "".join(
        f"{t},{'yes' if t % 9 == 0 else 'maybe' if t % 23 == 0 else ''},k{t % 4}\n"
        for t in range(60)))
    lines = tmp_path / "lines.json"
    lines.write_text("".join(json.dumps({
        "t": str(t * 1000) if t % 13 else "bad", "at": t * 1000 + 7 * (t % 5), "k": f"k{t % 4}",
        "n": t, "part": f"p{t % 2}"}) + "\n" for t in range(60)))
    policy = EventOrderingPolicy(late_arrival_tolerance="5s", out_of_order_tolerance="2s")

    def row_by_row(base):
        class RowByRow(base):
            def create(self, config, shape):
                adapter = super().create(config, shape)
                adapter.read_frame = lambda start, end: None
                return adapter
        return RowByRow()

    configs = [FileInputConfig(str(ordered), start_column="time", arrival_column="arrival",
                               partition_column="partition"),
               FileInputConfig(str(marked), start_column="t", cti_column="cti"),
               FileInputConfig(str(lines), start_column="t", arrival_column="at",
                               partition_column="part")]
    assert all(factory().create(c, EventShape.POINT).read_frame(0, 60) is not None for c, factory
               in zip(configs, [CsvInputAdapterFactory] * 2 + [JsonLinesInputAdapterFactory],
                      strict=True))

    def streams(csv, lines):
        app = Application()
        return [
            CepStream.create("ordered", csv, configs[0], EventShape.POINT,
                             event_ordering_policy=policy, application=app,
                             on_bad_input="dead_letter"),
            CepStream.create("marked", csv, configs[1], EventShape.POINT, application=app,
                             on_bad_input="dead_letter"),
            CepStream.create("lines", lines, configs[2], EventShape.POINT,
                             event_ordering_policy=policy, application=app,
                             on_bad_input="dead_letter")]

    on_spark = SparkRuntime(spark, batch_sizes=[17, 29]).run_groups(
        [s.ingress_group() for s in streams(CsvInputAdapterFactory(),
                                            JsonLinesInputAdapterFactory())])
    in_process = [s.run(LocalRuntime(batch_sizes=[5]))[s.name] for s in streams(
        row_by_row(CsvInputAdapterFactory), row_by_row(JsonLinesInputAdapterFactory))]
    for got, want in zip(on_spark, in_process, strict=True):
        got = got[want.name]
        assert (got.items, got.diagnostics, got.metrics) == \
            (want.items, want.diagnostics, want.metrics)
        assert want.metrics["invalid"] > 0 and len(want.items) > 30


def test_every_edge_form_reads_by_columns_as_row_by_row(tmp_path):
    """Edge starts (no end), edge ends (after their start, or not), other type words, CTIs
    among them: read by columns, the rows ``read`` gives."""
    from cti.forms.rows import adapter_item_to_row

    null = -(2**63)
    rows = [(t, end, kind, mark) for t in range(1, 4)
            for end in ("", " ", "9", str(t), "2026-11-26T10:00:00Z", "x")
            for kind in _EDGE_TYPE.elements for mark in ("", "1")]
    path = tmp_path / "f.csv"
    path.write_text("t,e,y,c,k\n" + "".join(f"{t},{e},{y},{c},v{t}\n" for t, e, y, c in rows),
                    encoding="utf-8")
    config = FileInputConfig(str(path), start_column="t", end_column="e", edge_type_column="y",
                             cti_column="c")
    adapter = CsvInputAdapterFactory().create(config, EventShape.EDGE)
    got = [(r["kind"], r["start"], r["end"], r["payload"], r["error"])
           for r in _written(adapter.read_frame(0, len(rows))).to_pylist()]
    want = [adapter_item_to_row(0, 0, item) for item in adapter.read(0, len(rows))]
    assert got == [(w.kind, *(null if t is None else t for t in (w.start, w.end)), w.payload,
                    w.error) for w in want]
    assert {w.kind for w in want} == {"edge_start", "edge_end", "cti", "invalid"}


def _parses(cell: str, fmt: str | None, config: FileInputConfig) -> bool:
    from cti.io.files.cells import _RowError, parse_time

    try:
        parse_time(cell, fmt, "t", config.time_zone)
    except _RowError:
        return False
    return True


def test_a_csv_file_read_by_columns_runs_as_read_row_by_row(tmp_path):
    """The same run (events, CTIs, dead letters) whether the file is read by columns or
    row by row."""
    path = tmp_path / "f.csv"
    path.write_text("t,k\n" + "".join(f"{t},k{t % 3}\n" if t % 7 else f"x{t},k\n"
                                      for t in range(60)))

    class RowByRow(CsvInputAdapterFactory):
        def create(self, config, shape):
            adapter = super().create(config, shape)
            adapter.read_frame = lambda start, end: None
            return adapter

    def run(factory):
        stream = CepStream.create("s", factory, FileInputConfig(str(path), start_column="t"),
                                  EventShape.POINT,
                                  AdvanceTimeSettings(AdvanceTimeGenerationSettings(4)),
                                  application=Application(), on_bad_input="dead_letter")
        return stream.run(LocalRuntime(batch_sizes=[13]))["s"]

    by_columns, by_rows = run(CsvInputAdapterFactory()), run(RowByRow())
    assert by_columns.metrics["invalid"] == 9 and by_columns.metrics["accepted"] == 51
    assert (by_columns.items, by_columns.diagnostics, by_columns.metrics) == \
        (by_rows.items, by_rows.diagnostics, by_rows.metrics)
