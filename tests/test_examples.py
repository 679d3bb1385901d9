"""Every script in examples/ runs and checks itself (asserts), as a user would run it."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.processes

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("_"))
# Those that make a DataFrame even with ``--runtime local`` (they call ``get_spark()``): run in
# this process on the tests' shared session, not each in a process with a JVM of its own.
ON_SESSION = [p for p in EXAMPLES if "get_spark()" in p.read_text(encoding="utf-8")]
IN_PROCESS = [p for p in EXAMPLES if p not in ON_SESSION]


def run_example(path: Path, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, str(path), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{path.name} failed:\n{tail}"
    return proc.stdout


@pytest.mark.parametrize("path", IN_PROCESS, ids=[p.stem for p in IN_PROCESS])
def test_example_runs_in_process(path):
    assert run_example(path, "--runtime", "local").strip()


@pytest.mark.spark
@pytest.mark.parametrize("path", ON_SESSION, ids=[p.stem for p in ON_SESSION])
def test_dataframe_example_runs_in_process_on_the_shared_session(path, spark, monkeypatch,
                                                                 capsys):
    """``--runtime local`` of an example that reads a Spark DataFrame: run as ``__main__`` in
    this process, where ``get_spark()`` is the tests' session (its asserts run as they do in a
    process of its own)."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.setattr(sys, "argv", [path.name, "--runtime", "local"])
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()


@pytest.mark.spark
def test_quickstart_on_embedded_spark(spark, monkeypatch, capsys):
    """The quickstart's default run, on Spark: in this process, on the tests' embedded session
    (a process that makes its own is ``cti run``'s, in test_cli and test_failures)."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.setattr(sys, "argv", ["quickstart.py"])
    runpy.run_path(str(ROOT / "examples" / "quickstart.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "registrations imported all" in out and "runtime: spark" in out


@pytest.mark.spark
def test_custom_output_adapter_on_spark(spark, monkeypatch, capsys):
    """Its two outputs from one streaming query (``write_queries``), on the tests' session:
    the example checks both against the data."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.setattr(sys, "argv", ["custom_output_adapter.py"])
    runpy.run_path(str(ROOT / "examples" / "custom_output_adapter.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "took more than 20 in tolls; runtime: spark" in out


@pytest.mark.spark
def test_sensors_job_on_spark(spark, monkeypatch, capsys):
    """The sensors job's own checks on Spark (its dead letters, counts and averages against
    the file and the in-process run), its ``cti run`` in this process on the tests' session
    rather than a process with a JVM of its own (``cti run`` on Spark in a process of its
    own: test_cli's toll-booth job and test_failures)."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import sensors_job

    monkeypatch.setattr(sensors_job, "run_command", _cti_run_in_process)
    monkeypatch.setattr(sys, "argv", ["sensors_job.py", "--runtime", "spark"])
    sensors_job.main()
    out = capsys.readouterr().out
    assert "input readings: 222 rows, 3 invalid, 3 dead letters" in out
    assert "runtime: spark: checked" in out


@pytest.mark.spark
def test_reference_data_import_on_spark(spark, monkeypatch, capsys):
    """The reference-data example's own checks on Spark: the same result as in process, also
    with the registrations loaded two rows per micro-batch."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.setattr(sys, "argv", ["reference_data_import.py", "--runtime", "spark"])
    runpy.run_path(str(ROOT / "examples" / "reference_data_import.py"), run_name="__main__")
    assert "runtime: spark" in capsys.readouterr().out


def _cti_run_in_process(runtime: str, out: Path) -> subprocess.CompletedProcess:
    """``sensors_job.run_command`` by click's runner: the same command, in this process."""
    from click.testing import CliRunner

    from cti.cli import cli

    result = CliRunner().invoke(cli, ["run", str(ROOT / "examples" / "sensors_job.py"),
                                      "--runtime", runtime, "--until-idle", "--output",
                                      str(out), "--progress", "log"])
    assert result.exit_code == 0, f"{result.output[-3000:]}\n{result.exception!r}"
    return subprocess.CompletedProcess([], 0, result.stdout, result.stderr)
