"""File inputs: JSON lines (or one JSON array) and CSV, one event (or CTI) per data row.

``CepStream.create("entries", JsonLinesInputAdapterFactory(), FileInputConfig(
"Entry.json", start_column="EntryTime"), EventShape.POINT, settings)``.

Offsets are data-row indices: 0 is the first data row (a CSV header is not a row, blank lines
are skipped and never count). ``latest_offset()`` is the number of data rows in the file now,
``read(start, end)`` gives rows [start, end), so a replay reads the same rows again; files are
bounded (``is_complete()`` is True). Line numbers in messages are physical lines, from 1.
A CSV row is one physical line, parsed on its own: a quote that is not closed on its line makes
that line one bad row and never swallows the lines after it (so quoted fields cannot span lines).

Binding (``check_config``) checks that the file exists and can be read, and that a CSV header
names every column the config names.

A directory (``path`` names one) is its files in the order of their modification time (then
name), as one input: offsets run over the first file's data rows, then the second's, and so
on. Each file's rows arrive at its modification time (``Arriving``) unless ``arrival_column``
names a column or ``file_arrival=False``. With ``live=True`` new files are picked up as they
appear; each file is scanned once per process (its row count is kept by its identity), and a
read touches only the files of its offset range. Files are immutable once in the directory
(write elsewhere, or under a name starting with ``.`` or ``_``, which are ignored, and rename):
a file that appears with a modification time before one already listed would shift offsets
that were read already, so it is refused.

A row that cannot become an event (bad JSON, a missing, null or unparseable time, end <= start,
an unknown edge type, a missing payload column) is not an exception: ``read`` yields
``InvalidInput`` whose reason names the file, the line and the rule, and ingress then raises
``BadInputError`` naming the stream, or dead-letters the row (``on_bad_input="dead_letter"``).

Times: ISO-8601 strings (an offset such as ``-07:00`` or ``Z`` is converted to UTC) or int ticks
(microseconds since the Unix epoch, UTC). A time without an offset is read in the config's
``time_zone`` (by default the application's, ``Application(time_zone=...)``); with no zone it is
a bad row, since nothing says where it was read.

Where it lives: ``config`` (``FileInputConfig``), ``factories`` (the factories and what binding
reads), ``adapter`` (``FileInputAdapter``), ``listing`` (a directory's files and row counts),
``records``, ``json_scanner`` and ``csv_scanner`` (reading rows one by one), ``scan`` and
``cache`` (each file scanned once per process), ``arrow_tables`` (Arrow's readers, where exact),
``frame_columns`` (``read_frame``'s columns), ``cells`` (times and CTI markers, one cell at a
time).
"""

from cti.io.files.config import FileInputConfig
from cti.io.files.factories import CsvInputAdapterFactory, JsonLinesInputAdapterFactory

__all__ = ["CsvInputAdapterFactory", "FileInputConfig", "JsonLinesInputAdapterFactory"]
