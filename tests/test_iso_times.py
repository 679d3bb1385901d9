"""ISO-8601 times read column by column (``cti.io.iso_times``) against ``parse_time``."""

import re
from datetime import UTC, timedelta, timezone
from zoneinfo import ZoneInfo

import pyarrow as pa
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.io.files.cells import _RowError, parse_time
from cti.io.iso_times import iso_ticks

# The common form (``iso_times``' module doc), which every time ``parse_time`` gives must be
# read in.
_COMMON = re.compile(r"[ \t]*[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}"
                     r"(:[0-9]{2}([.,][0-9]+)?)?(Z|[+-][0-9]{2}:[0-9]{2})?[ \t]*")
_ZONES = [None, ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York"),
          timezone(timedelta(hours=5, minutes=30)), UTC]


def _two(n: int) -> str:
    return f"{n:02d}"


# Cells near the common form: each part in or a little out of range, other separators, other
# offsets, spaces around, and days and hours of daylight-saving changes.
_CELL = st.builds(
    lambda pad, y, mo, d, sep, h, mi, s, frac, zone, tail: (
        f"{pad}{y}-{_two(mo)}-{_two(d)}{sep}{_two(h)}:{_two(mi)}{s}{frac}{zone}{tail}"),
    st.sampled_from(["", "", " ", "\t", "\n"]),
    st.sampled_from(["0000", "0001", "1900", "1970", "2000", "2016", "2021", "9999", "12345"]),
    st.integers(0, 13), st.sampled_from([0, 1, 7, 28, 29, 30, 31, 32]),
    st.sampled_from(["T", "T", " ", "t", "_"]), st.sampled_from([0, 1, 2, 3, 12, 23, 24]),
    st.sampled_from([0, 30, 59, 60]),
    st.sampled_from(["", ":00", ":07", ":59", ":60", ":5"]),
    st.sampled_from(["", ".1", ".123", ",5", ".123456", ".1234567", ".123456789012", "."]),
    st.sampled_from(["", "", "Z", "z", "+00:00", "-07:00", "+05:30", "+23:59", "-24:00",
                     "+01:60", "+23:60", "-00:99", "+0100", "+01", " +01:00"]),
    st.sampled_from(["", "", " ", "\t", "\n"]),
) | st.sampled_from(["", "x", "12", "2014-09-10", "2014-09-10T05"]) | st.none()


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(_CELL, max_size=20), st.sampled_from(_ZONES), st.integers(1, 3))
def test_iso_cells_read_by_columns_are_the_times_parse_time_gives(cells, zone, chunks):
    """Each cell read column by column is the time ``parse_time`` gives it, and a cell left
    to the caller is one that ``parse_time`` refuses or that is outside the common form."""
    size = -(-len(cells) // chunks) or 1
    column = pa.chunked_array([pa.array(cells[i:i + size], pa.string())
                               for i in range(0, len(cells), size)] or [pa.array([], pa.string())])
    ticks, read = iso_ticks(column, zone)
    assert len(ticks) == len(read) == len(cells)
    for cell, t, ok in zip(cells, ticks.tolist(), read.tolist(), strict=True):
        try:
            want = parse_time(cell, "iso", "c", zone)
        except _RowError:
            want = None
        if ok:
            assert t == want, cell
        else:
            assert t == 0
            if want is None or not _COMMON.fullmatch(cell):
                continue
            # (else only a naive time far from now is left: ``_in_zone``)
            assert zone is not None and not re.search(r"(Z|[+-][0-9]{2}:[0-9]{2})[ \t]*$", cell)
            assert not 1800 <= int(cell.strip()[:4]) < 2200, cell


def test_naive_times_need_a_zone_and_one_it_pins_down():
    column = pa.array(["2021-03-28T02:30:00", "2021-10-31T02:30:00", "2021-10-31T03:30:00"])
    assert iso_ticks(column, None)[1].tolist() == [False, False, False]
    ticks, read = iso_ticks(column, ZoneInfo("Europe/Berlin"))
    assert read.tolist() == [False, False, True]  # skipped, repeated, pinned down
    assert ticks[2] == parse_time("2021-10-31T03:30:00+01:00", "iso", "c")
