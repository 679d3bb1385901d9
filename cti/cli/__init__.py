"""The ``cti`` command: ``cti run QUERY.py`` runs a query file's streams as a job
(``cti.cli.run``), ``cti plot QUERY.py`` draws them (``cti.cli.plot``); query files are loaded
by ``cti.cli.query_file`` and progress is shown by ``cti.cli.progress``. See docs/cli.md.
"""

from __future__ import annotations

import os
import sys

import click

from cti.cli.plot import plot
from cti.cli.run import run

__all__ = ["cli", "main"]


@click.group()
def cli() -> None:
    """cti: Microsoft StreamInsight's temporal model on Apache Spark."""


cli.add_command(run)
cli.add_command(plot)


def main() -> None:
    """The console script: ``cli``, then an exit that skips interpreter teardown, where the
    Rust and Arrow thread pools of ``deltalake`` can abort a finished run (delta-rs #2184)."""
    try:
        cli()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # spark-submit .../cti/cli/__init__.py run QUERY.py ...
    main()
