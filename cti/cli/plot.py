"""``cti plot QUERY.py``: the picture of time of a query file's input streams (``cti.plot``)."""

from __future__ import annotations

from pathlib import Path

import click

from cti.cli.errors import streams_of, user_error
from cti.errors import CtiError


@click.command("plot")
@click.argument("query", type=click.Path(path_type=Path))
@click.option("--input", "inputs", metavar="NAME", multiple=True,
              help="An input stream to draw (repeat for several); default: every input the "
                   "file's streams read.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The picture: FILE.png or FILE.svg (default: QUERY's name with .png).")
@click.option("--results/--no-results", default=True, show_default=True,
              help="Draw the results of the file's queries below the inputs.")
@click.option("--debug", is_flag=True, help="Show the whole traceback of an error.")
def plot(query: Path, inputs: tuple[str, ...], out: Path | None, results: bool,
         debug: bool) -> None:
    """Draw the input streams of QUERY.py: each event's application time against its arrival
    time, the CTI and watermark lines, adjusted events as arrows, dropped events as crosses,
    one panel per partition or substream. QUERY.py exposes its streams as a function
    streams() returning {name: stream}, or a dict STREAMS; the inputs run in-process."""
    from cti.plot import input_streams, plot_time
    from cti.query import CepStream

    out = out if out is not None else Path(query.stem + ".png")
    named = streams_of(query, debug)
    streams = list(named.values())
    drawn = list(inputs) or [s.name for s in input_streams(streams)]
    try:
        outputs = {name: s.collect("local") for name, s in named.items()
                   if results and not isinstance(s, CepStream)}
        figure = plot_time(streams, out, streams=drawn, title=query.name, results=outputs)
    except (CtiError, ValueError) as exc:  # an unknown input, a wrong suffix, bad input rows
        raise click.ClickException(str(exc)) from None
    except Exception as exc:  # the user's functions
        raise user_error(exc, query, debug) from None
    click.echo(f"wrote {out}: {', '.join([*drawn, *outputs])} ({len(figure.axes)} panels)")
