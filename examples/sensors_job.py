"""A job as a new user writes it, run with ``cti run``: sensor readings from a CSV file with bad
rows, joined with reference data, averaged per room and minute, written as Delta tables, and
the bad rows kept as dead letters.

- ``readings`` (``examples/data/sensors_job/readings.csv``): the 219 readings of the Stream
  Analytics sample ``data/sensors/SampleSensorData.json`` as CSV (time, device, temp, hmdt),
  partly out of order, with three bad rows among them: a quote that is not closed, a time
  without a time zone, and a time that is no time. Bound with ``on_bad_input="dead_letter"``.
- ``devices`` (``examples/data/sensors_job/devices.csv``): which room each device is in, reference
  data without timestamps (edges from a load time) that imports the readings' CTIs.
- ``per_minute``: readings joined with their device's room, the average temperature per room
  and minute.

``cti run examples/sensors_job.py --until-idle --output /tmp/sensors`` writes
``/tmp/sensors/per_minute`` and the dead letters ``/tmp/sensors/_dead_letters/readings``.
Run as a script (``python examples/sensors_job.py --runtime local|spark``) it runs that command
into a temporary folder and checks the tables and the summary: the dead letters are the three
bad lines, the counts are the file's, and the averages are those of the stream run in process.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cti import (
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    CepStream,
    EventShape,
    agg,
)
from cti.io.files import CsvInputAdapterFactory, FileInputConfig
from cti.io.reference import ReferenceDataConfig, ReferenceDataInputAdapterFactory

DATA = Path(__file__).resolve().parent / "data" / "sensors_job"
LOADED = datetime(2014, 12, 11, tzinfo=UTC)  # the devices' list, valid from then on


def streams() -> dict[str, CepStream]:
    """The query file's streams: the per-room averages (``cti run`` adds the dead letters)."""
    app = Application("sensors")
    readings = CepStream.create(
        "readings", CsvInputAdapterFactory(),
        FileInputConfig(DATA / "readings.csv", start_column="time"), EventShape.POINT,
        AdvanceTimeSettings.unordered_start_time(timedelta(minutes=2)),
        application=app, on_bad_input="dead_letter")
    devices = CepStream.create(
        "devices", ReferenceDataInputAdapterFactory(),
        ReferenceDataConfig(DATA / "devices.csv", LOADED, format="csv"), EventShape.EDGE,
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("readings"),
                            policy=AdvanceTimePolicy.ADJUST), application=app)
    located = readings.join(devices, on="device")
    return {"per_minute": located.group_by("room").apply(
        lambda g: g.tumbling_window(timedelta(minutes=1)).aggregate(
            n=agg.count(), temp=agg.avg("temp")))}


# ---- run as a script: the command, then checks ----------------------------------------------


def bad_lines() -> dict[int, str]:
    """The file's lines the reader must refuse, by line number: found by reading the file
    with the standard library (a row whose time is not an ISO time with a zone, or whose
    quote is not closed)."""
    bad = {}
    for number, text in enumerate((DATA / "readings.csv").read_text().splitlines(), start=1):
        if number == 1:
            continue
        time_text = text.split(",", 1)[0]
        try:
            aware = datetime.fromisoformat(time_text.replace("Z", "+00:00")).tzinfo is not None
        except ValueError:
            aware = False
        if not aware or text.count('"') % 2:
            bad[number] = text
    return bad


def run_command(runtime: str, out: Path) -> subprocess.CompletedProcess:
    cti = Path(sys.executable).with_name("cti")
    command = [str(cti), "run", __file__, "--runtime", runtime, "--until-idle",
               "--output", str(out), "--progress", "log"]
    env = dict(os.environ, CTI_SPARK_MASTER=os.environ.get("CTI_SPARK_MASTER", "local[2]"))
    proc = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def check(runtime: str, out: Path) -> None:
    from cti.cli.dead_letters import read_dead_letters
    from cti.io.delta import read_delta_output

    proc = run_command(runtime, out)
    print(proc.stdout, end="")
    bad = bad_lines()
    letters = read_dead_letters(out / "_dead_letters" / "readings").to_pylist()
    assert [(d["line"], d["raw"]) for d in letters] == sorted(bad.items()), letters
    assert all(d["file"] == str(DATA / "readings.csv") for d in letters)
    rows = len((DATA / "readings.csv").read_text().splitlines()) - 1
    assert (f"input readings: {rows} rows, {len(bad)} invalid, {len(bad)} dead letters -> "
            f"{out / '_dead_letters' / 'readings'}") in proc.stdout, proc.stdout
    want = sorted((e.start, e.payload["room"], e.payload["n"], round(e.payload["temp"], 9))
                  for e in streams()["per_minute"].collect("local") if hasattr(e, "payload"))
    table = read_delta_output(out / "per_minute")
    got = sorted(zip(table["start"].astype("int64"), table["room"], table["n"],
                     table["temp"].round(9), strict=True))
    assert [(int(s), r, int(n), float(t)) for s, r, n, t in got] == want
    assert f"per_minute: {len(want)} rows -> {out / 'per_minute'}" in proc.stdout
    # The log: a line per micro-batch (each once), with that micro-batch's rows read.
    logged = re.findall(r"^\[[\d:]+\] per_minute micro-batch (\d+): .*?; readings: (\d+) in,",
                        proc.stderr, re.MULTILINE)
    assert len({b for b, _ in logged}) == len(logged) >= 1, proc.stderr
    assert sum(int(n) for _, n in logged) == rows, proc.stderr
    for d in letters:
        print(f"dead letter: line {d['line']}: {d['rule']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", choices=["local", "spark"], default="local")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        check(args.runtime, Path(tmp) / "sensors")
    print(f"runtime: {args.runtime}: checked")


if __name__ == "__main__":
    main()
