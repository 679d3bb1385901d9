"""``cti plot QUERY.py``: the picture of time of a query file's input streams (``cti.plot``)."""

from __future__ import annotations

from pathlib import Path

import click

from cti.cli.errors import user_error
from cti.cli.query_file import QueryFileError, load_streams
from cti.errors import CtiError


@click.command("plot")
@click.argument("query", type=click.Path(path_type=Path))
@click.option("--input", "inputs", metavar="NAME", multiple=True,
              help="An input stream to draw (repeat for several); default: every input the "
                   "file's streams read.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The picture: FILE.png or FILE.svg (default: QUERY's name with .png).")
@click.option("--debug", is_flag=True, help="Show the whole traceback of an error.")
def plot(query: Path, inputs: tuple[str, ...], out: Path | None, debug: bool) -> None:
    """Draw the input streams of QUERY.py: each event's application time against its arrival
    time, the CTI and watermark lines, adjusted events as arrows, dropped events as crosses,
    one panel per partition or substream. QUERY.py exposes its streams as a function
    streams() returning {name: stream}, or a dict STREAMS; the inputs run in-process."""
    from cti.plot import input_streams, plot_time

    out = out if out is not None else Path(query.stem + ".png")
    try:
        streams = list(load_streams(query).values())
    except QueryFileError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # the query file's own code
        raise user_error(exc, query, debug) from None
    drawn = list(inputs) or [s.name for s in input_streams(streams)]
    try:
        figure = plot_time(streams, out, streams=drawn, title=query.name)
    except (CtiError, ValueError) as exc:  # an unknown input, a wrong suffix, bad input rows
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # the user's functions
        raise user_error(exc, query, debug) from None
    click.echo(f"wrote {out}: {', '.join(drawn)} ({len(figure.axes)} panels)")
