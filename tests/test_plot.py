"""Pictures of time (``cti.plot``) and the ``cti plot`` command: checked on the artists' data
against the conformance cases' expected outcomes, not on pixels."""

from __future__ import annotations

import re
import runpy
import textwrap
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conformance_cases import CONFORMANCE, asa_expected, bind_asa_case, bind_si_case, load
from matplotlib.dates import date2num
from matplotlib.quiver import Quiver

from cti import (
    Application,
    Arriving,
    CepStream,
    Cti,
    EventOrderingPolicy,
    EventShape,
    PointEvent,
    agg,
)
from cti.cli.plot import plot
from cti.cli.query_file import QueryFileError, load_streams
from cti.io.memory import MemoryInputAdapterFactory
from cti.plot import plot_time, stream_pictures
from cti.time import MAX_TIME


def lines(ax, label):
    return [line for line in ax.lines if line.get_label() == label]


def points(ax, label):
    """(x, y) of the markers with this legend label (none if the panel has no such events)."""
    found = lines(ax, label)
    if not found:
        return []
    (line,) = found
    return list(zip(line.get_xdata(), line.get_ydata(), strict=True))


def flat(arrow_list):
    return [v for (a, b) in arrow_list for v in (*a, *b)]


def dates(ticks):
    return date2num(np.array(ticks, dtype="datetime64[us]"))


def arrows(ax):
    """((x, from), (x, to)) of each adjustment arrow."""
    found = [q for q in ax.collections if isinstance(q, Quiver)]
    return [((x, y), (x + u, y + v)) for q in found
            for x, y, u, v in zip(q.X, q.Y, q.U, q.V, strict=True)]


def test_substreams_one_panel_per_key_with_every_event_and_its_fate():
    case = load(CONFORMANCE / "asa_watermark_substreams_over_device.json")
    stream = bind_asa_case(case, Application())
    figure = plot_time(stream)
    keys = sorted({e["key"] for e in case["events"]})
    assert len(figure.axes) == len(keys)
    drawn = 0
    for ax, key in zip(figure.axes, keys, strict=True):
        assert repr(key) in ax.get_title(loc="left")
        mine = [e for e in case["events"] if e["key"] == key]
        drawn += sum(len(points(ax, label)) for label in ("accepted", "adjusted", "dropped"))
        want = {"accepted": set(), "adjusted": set(), "dropped": set()}
        want_arrows = set()
        for e in mine:
            ts, status, _ = asa_expected(e)
            x = dates([e["arrival_time"].replace("Z", "")])[0]
            came = dates([e["app_time"].replace("Z", "")])[0]
            if status == "dropped":
                want["dropped"].add((x, came))
            else:
                want[status].add((x, dates([ts])[0]))
            if status == "adjusted":
                want_arrows.add(((x, came), (x, dates([ts])[0])))
        for label, expected in want.items():
            assert sorted(points(ax, label)) == sorted(expected), (key, label)
        assert flat(sorted(arrows(ax))) == pytest.approx(flat(sorted(want_arrows)), rel=1e-12)
        # Each key's watermark is drawn, and the stream's CTI beside it.
        assert lines(ax, "watermark") and lines(ax, "stream CTI")
    assert drawn == len(case["events"])


def test_si_stream_without_arrivals_is_drawn_by_input_position():
    case = load(CONFORMANCE / "si_adjust_intervals_delay_5.json")
    (stream,) = bind_si_case(case, Application())
    figure = plot_time(stream)
    (ax,) = figure.axes
    assert "input position" in ax.get_xlabel()
    events = case["streams"][0]["events"]
    expected = {e["payload"]["id"]: e for e in case["expected"]["in"] if e["kind"] != "cti"}
    dropped = set(case["dropped"]["in"])
    for pos, e in enumerate(events):
        name = e["payload"]["id"]
        if name in dropped:
            assert (pos, e["start"]) in points(ax, "dropped")
        elif expected[name]["start"] != e["start"]:
            assert (pos, expected[name]["start"]) in points(ax, "adjusted")
            assert ((pos, e["start"]), (pos, expected[name]["start"])) in arrows(ax)
        else:
            assert (pos, e["start"]) in points(ax, "accepted")
    # The CTI line steps through the stream's CTIs (the finite ones), in order.
    (cti_line,) = lines(ax, "CTI")
    ctis = [c["time"] for c in case["expected"]["in"] if c["kind"] == "cti"
            and c["time"] != "MAX_TIME"]
    steps = [y for k, y in enumerate(cti_line.get_ydata()) if k == 0 or
             y != cti_line.get_ydata()[k - 1]]
    assert steps == ctis


def test_imported_ctis_are_drawn_where_the_source_reached_them():
    case = load(CONFORMANCE / "si_import_ctis_from_fast_stream.json")
    fast, slow = bind_si_case(case, Application())
    pictures = {p.name: p for p in stream_pictures([fast, slow])}
    arrivals = [e["arrival"] for e in case["streams"][0]["events"]]
    assert [x for x, _ in pictures["fast"].ctis] == arrivals
    assert pictures["slow"].ctis == pictures["fast"].ctis
    figure = plot_time([fast, slow])
    assert [ax.get_title(loc="left").split("\n")[0] for ax in figure.axes] == ["fast", "slow"]


ITEMS = [Arriving(PointEvent(t, {"k": k}), a, p) for t, a, k, p in
         [(10, 10, "a", "p1"), (5, 12, "a", "p1"), (30, 14, "b", "p2"), (2, 40, "b", "p2"),
          (45, 41, "a", "p1")]]


def partitioned_stream(app, items=ITEMS):
    return CepStream.create("readings", MemoryInputAdapterFactory(), items, EventShape.POINT,
                            application=app, event_ordering_policy=EventOrderingPolicy(
                                late_arrival_tolerance=timedelta(microseconds=20),
                                out_of_order_tolerance=timedelta(0), early_arrival_window=None,
                                action="drop", partitioned=True))


def test_one_panel_per_partition_and_every_event_once():
    stream = partitioned_stream(Application())
    result = stream.run("local")["readings"]
    figure = plot_time(stream.where(lambda e: True))  # a query: its input is drawn
    titles = [ax.get_title(loc="left").split("\n")[0] for ax in figure.axes]
    assert titles == ["readings · partition p1", "readings · partition p2"]
    marks = {label: [xy for ax in figure.axes for xy in points(ax, label)]
             for label in ("accepted", "adjusted", "dropped")}
    assert sum(map(len, marks.values())) == 5
    assert len(result.dropped) == 2  # one out of order, one late
    assert sorted(marks["dropped"]) == sorted(
        (ITEMS[d.input_seq].arrival, d.original_start) for d in result.dropped)
    assert sorted(marks["accepted"]) == sorted(
        (a.arrival, a.item.start) for k, a in enumerate(ITEMS)
        if k not in {d.input_seq for d in result.dropped})
    finite = [i.time for i in result.items if isinstance(i, Cti) and i.time != MAX_TIME]
    drawn = {y for ax in figure.axes for y in lines(ax, "stream CTI")[0].get_ydata()}
    assert drawn == set(finite)


def test_png_and_svg_by_suffix(tmp_path):
    stream = partitioned_stream(Application())
    plot_time(stream, tmp_path / "time.png")
    plot_time(stream, tmp_path / "time.svg")
    assert (tmp_path / "time.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "time.svg").read_text()
    assert "<svg" in svg and "</svg>" in svg
    with pytest.raises(ValueError, match=r"time.pdf.*\.png or \.svg"):
        plot_time(stream, tmp_path / "time.pdf")
    assert not (tmp_path / "time.pdf").exists()


def test_a_run_result_is_refused_with_the_reason():
    stream = partitioned_stream(Application())
    with pytest.raises(TypeError, match="RunResult keeps no arrival times"):
        plot_time(stream.run("local"))
    with pytest.raises(ValueError, match=r"no input stream named \['raedings'\]"):
        plot_time(stream, streams=["raedings"])


# ---- query files and the command ------------------------------------------------------------

QUERY = '''
from datetime import timedelta

from cti import Application, Arriving, CepStream, EventOrderingPolicy, EventShape, PointEvent
from cti.io.memory import MemoryInputAdapterFactory

app = Application()
items = [Arriving(PointEvent(t, {{"k": k}}), a) for t, a, k in
         [(10, 10, "a"), (5, 30, "b"), (30, 31, "a"), (12, 40, "b")]]
readings = CepStream.create("readings", MemoryInputAdapterFactory(), items, EventShape.POINT,
                            application=app, event_ordering_policy=EventOrderingPolicy(
                                late_arrival_tolerance=timedelta(microseconds=15),
                                out_of_order_tolerance=timedelta(0), early_arrival_window=None))
other = CepStream.create("other", MemoryInputAdapterFactory(), [PointEvent(1), PointEvent(2)],
                         EventShape.POINT, application=app)
{expose}
'''


def query_file(tmp_path, expose):
    path = tmp_path / "query.py"
    path.write_text(textwrap.dedent(QUERY.format(expose=expose)))
    return path


@pytest.mark.parametrize("expose", [
    'STREAMS = {"kept": readings.where(lambda p: p["k"] == "a"), "other": other}',
    'def streams():\n    return {"kept": readings.where(lambda e: True), "other": other}',
])
def test_plot_command_draws_every_input(tmp_path, expose):
    path, out = query_file(tmp_path, expose), tmp_path / "time.svg"
    result = CliRunner().invoke(plot, [str(path), "--out", str(out), "--no-results"])
    assert result.exit_code == 0, result.output
    assert result.output == f"wrote {out}: readings, other (2 panels)\n"
    assert "<svg" in out.read_text()
    result = CliRunner().invoke(plot, [str(path), "--out", str(out)])  # and the query's results
    assert result.output == f"wrote {out}: readings, other, kept (3 panels)\n"


def test_plot_command_one_input_and_the_errors(tmp_path):
    path, out = query_file(tmp_path, 'STREAMS = {"r": readings}'), tmp_path / "r.png"
    result = CliRunner().invoke(plot, [str(path), "--input", "readings", "--out", str(out)])
    assert result.exit_code == 0 and out.read_bytes()[:4] == b"\x89PNG"
    result = CliRunner().invoke(plot, [str(path), "--input", "raedings", "--out", str(out)])
    assert result.exit_code == 1
    assert "no input stream named ['raedings']; the inputs are ['readings']" in result.output
    result = CliRunner().invoke(plot, [str(tmp_path / "gone.py")])
    assert result.exit_code == 1 and "gone.py does not exist" in result.output
    bare = query_file(tmp_path, "")
    result = CliRunner().invoke(plot, [str(bare)])
    assert result.exit_code == 1 and "defines neither streams() nor STREAMS" in result.output


@pytest.mark.parametrize("expose, message", [
    ("", "defines neither streams() nor STREAMS"),
    ('STREAMS = {"r": readings}\ndef streams():\n    return STREAMS', "defines both"),
    ("STREAMS = [readings]", "STREAMS is a list, not a mapping"),
    ("STREAMS = {}", "STREAMS is empty"),
    ('STREAMS = {"r": items}', "STREAMS['r'] is list, not a stream"),
    ("streams = 3", "streams is not a function"),
])
def test_load_streams_errors_name_the_file(tmp_path, expose, message):
    path = query_file(tmp_path, expose)
    with pytest.raises(QueryFileError, match="query file .*query.py") as caught:
        load_streams(path)
    assert message in str(caught.value)


def test_load_streams_imports_modules_beside_the_file(tmp_path):
    (tmp_path / "helpers.py").write_text("NAME = 'kept'\n")
    path = query_file(tmp_path, "from helpers import NAME\nSTREAMS = {NAME: readings}")
    streams = load_streams(path)
    assert list(streams) == ["kept"] and streams["kept"].name == "readings"


def test_docs_show_a_picture_of_every_conformance_case(tmp_path):
    """docs/make_plots.py draws every case (as CI runs it); docs/plots.md shows each one, and
    the committed pictures are the same set."""
    root = Path(__file__).resolve().parents[1]
    written = runpy.run_path(str(root / "docs" / "make_plots.py"))["main"](tmp_path)
    names = sorted(p.name for p in written)
    cases = sorted(p.stem + ".png" for p in CONFORMANCE.glob("*.json"))
    assert names == cases
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in written)
    assert sorted(p.name for p in (root / "docs" / "images").glob("*.png")) == cases
    page = (root / "docs" / "plots.md").read_text()
    assert sorted(re.findall(r"\(images/([\w.]+\.png)\)", page)) == cases


def test_results_are_drawn_as_lifetimes_beside_the_inputs(tmp_path):
    """A window query's panel: a bar per result from its start to its end, a row per group,
    an output CTI tick per finite CTI; a reference input loaded at one time spans two
    minutes around it, not years."""
    from cti import (
        AdvanceTimeImportSettings,
        AdvanceTimePolicy,
        AdvanceTimeSettings,
        WindowOutputPolicy,
    )
    from cti.io.reference import reference_data

    t0 = 1_700_000_000_000_000
    app = Application()
    s = CepStream.create("s", MemoryInputAdapterFactory(),
                         [PointEvent(t0 + k * 7_000_000, {"g": "ab"[k % 2], "v": k})
                          for k in range(20)], EventShape.POINT,
                         AdvanceTimeSettings.increasing_start_time(), application=app)
    ref = CepStream.create("ref", MemoryInputAdapterFactory(),
                           reference_data([{"g": "a"}, {"g": "b"}], t0), EventShape.EDGE,
                           AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("s"),
                                               policy=AdvanceTimePolicy.ADJUST),
                           application=app)
    joined = s.join(ref, on="g")
    q = joined.group_by("g").apply(lambda w: w.tumbling_window(
        "30s", output_policy=WindowOutputPolicy.CLIP_TO_WINDOW_END).aggregate(n=agg.count()))
    results = {"joined": joined.collect("local"), "q": q.collect("local")}
    figure = plot_time([q], results=results)
    ref_ax = figure.axes[1]
    for ax, (name, items) in zip(figure.axes[2:], results.items(), strict=True):
        events = [e for e in items if hasattr(e, "start")]
        long = [e for e in events if e.end is not None and e.end < MAX_TIME
                and e.end > e.start + 1]
        bars = [line for line in ax.get_lines() if len(line.get_xdata()) == 2]
        dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
        assert (len(bars), len(dots)) == (len(long), len(events) - len(long))
        assert ax.get_title(loc="left").startswith(f"{name}: {len(events)} results")
        assert [t.get_text() for t in ax.get_yticklabels()] == ["g=a", "g=b"]
        for line, e in zip(bars, long, strict=True):
            assert list(line.get_xdata()) == pytest.approx(
                [date2num(np.datetime64(t, "us")) for t in (e.start, e.end)])
        ticks = [line for line in ax.get_lines() if line.get_marker() == "|"]
        finite = [i for i in items if isinstance(i, Cti) and i.time < MAX_TIME]
        assert len(ticks[0].get_xdata()) == len(finite) > 0
    assert any(len([line for line in ax.get_lines() if len(line.get_xdata()) == 2])
               for ax in figure.axes[2:])  # (the windows' results are intervals)
    low, high = ref_ax.get_ylim()
    assert high - low == pytest.approx(date2num(np.datetime64(t0 + 60_000_000, "us"))
                                       - date2num(np.datetime64(t0 - 60_000_000, "us")))
