"""Arrival progress once: a query shard steps a stream that imports its CTIs (a slow reference
stream) with its own events and the other shards' arrival progress, not their rows.

What a stream that imports its CTIs (``cti.ingress.importing``) does with another shard's
event is: receive it (its merge key, the stream's arrival order: the running maximum of the
rows' own arrivals, an explicit arrival or the sync time), hold it until the streams up its
chain have passed it, and count it (an imported CTI waits until the stream has received a
row later than it; an output row's number counts every row before it). It neither judges nor
outputs another shard's edge, and another shard's point or interval is its owner's to report.
The CTIs it passes on are the imported ones (it generates none, its adapter gives none in
such a piece). Every key another stream's rows or CTIs have compares alike with every row
of a run of the stream's rows that share one merge arrival (a key of another stream never
falls between them), so a run of the other shards' rows is one unit: how many rows, their
merge arrival, the largest start among them (the stream's ``max_start``).

So for a piece of such a stream whose rows are all valid events of its kind (a stream that
raises for bad input, whose arrivals, where it has them, do not go back within the piece),
the source sends each shard (``progress_points``):

- the events it owns, with their payloads, and the end-of-input row;
- a ``run`` row per run of the piece: a row whose own arrival is above every earlier one of
  the piece starts one (``seq``, ``end`` the ``seq`` after it, ``arrival`` the largest own
  arrival so far, ``start`` the largest start of its rows);
- one ``span`` row: the piece's first ``seq``, the ``seq`` after it (``end``), its first
  explicit arrival (``arrival``; null: none) and its largest own arrival (``start``).

A shard makes of each run the unit of the rows it does not own (``units``: a row of kind
``others``, ``end`` how many rows it stands for), which the importing step counts, places and
holds as it does a row (``weights``); one row per run instead of one per row: with reference
data loaded at one time, one per piece. A piece that is not all valid events goes to every
shard whole, as without this (``cti.engine.batch.routed``), and the shard steps it as before.

An explicit arrival behind the stream's earlier rows is bad input; within a piece the source
checks it, across pieces only the shard can (the piece's first explicit arrival against the
stream's data arrival before it): an adapter sends such pieces only where it says its
arrivals never go back (``arrivals_in_order``), and one that breaks that is named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.errors import BadInputError
from cti.events import EventShape
from cti.forms.frame import framed
from cti.forms.rows import EOS
from cti.ingress.columns import STARTS, in_sequence, own_arrivals
from cti.ingress.rules import after_end, out_of_sequence
from cti.ingress.spec import StreamSpec
from cti.ingress.state import StreamState
from cti.time import MAX_TIME, MIN_TIME

NULL = MIN_TIME
SPAN, RUN, OTHERS = "span", "run", "others"
PROGRESS = (SPAN, RUN)  # (the kinds of the rows a source sends for a piece's progress)


def reference_streams(specs: Sequence[StreamSpec]) -> dict[int, str]:
    """{stream: event kind} of a group's streams whose shards can take the other shards'
    rows as their arrival progress (``progress_points``): a stream that imports its CTIs and
    makes none of its own (no generation), without an event-ordering policy or a wall clock,
    that raises for bad input, and whose CTIs no stream imports (a stream down a chain waits
    for the rows it holds, row by row)."""
    exporters = {s.import_from for s in specs}
    return {j: STARTS[s.shape] for j, s in enumerate(specs)
            if s.import_from is not None and s.ordering is None and not s.generates
            and s.arrival_clock == "data" and not s.dead_letter and j not in exporters}


def progress_points(rows: pa.Table, kind: str, in_order: Callable[[], bool],
                    owned: np.ndarray, schema: pa.Schema) -> pa.Table | None:
    """The ``run`` and ``span`` rows (``schema``) of a piece of one stream's rows (contiguous
    ``seq``, maybe ending with end of input) whose events are of kind ``kind``; ``owned``:
    which rows have an owner (their payload). None where the piece is not all valid events
    with owners, or an explicit arrival goes back within it, or it has one and the adapter
    does not say its arrivals never go back (``in_order()``, asked only then): then every
    shard gets it whole."""
    n = rows.num_rows
    kinds = rows.column("kind")
    is_ev = pc.equal(kinds, kind).to_numpy(zero_copy_only=False)
    events = n - int(n > 0 and not is_ev[-1] and kinds[-1].as_py() == EOS)
    seq = rows.column("seq").to_numpy()
    if not events or not is_ev[:events].all() or not owned[:events].all() \
            or rows.column("error").null_count != n or (np.diff(seq) != 1).any():
        return None
    start = rows.column("start").to_numpy()[:events]
    end = rows.column("end").to_numpy()[:events]
    arrival = rows.column("arrival").to_numpy()[:events]
    if not _valid(kind, start, end):
        return None
    explicit = arrival != NULL
    own = np.where(explicit, arrival, start)
    most = np.maximum.accumulate(own)
    if explicit.any() and (not in_order() or (explicit[1:] & (arrival[1:] < most[:-1])).any()):
        return None
    at = np.flatnonzero(own > np.concatenate([[NULL], most[:-1]]))  # (the first row: one)
    stops = np.append(at[1:], events)
    m = len(at) + 1
    first_explicit = arrival[np.argmax(explicit)] if explicit.any() else NULL
    stream = rows.column("stream")[0].as_py()
    return pa.table({
        "stream": np.full(m, stream, np.int32),
        "seq": np.append(seq[at], seq[0]).astype(np.int64),
        "arrival": np.append(most[at], first_explicit).astype(np.int64),
        "kind": [RUN] * (m - 1) + [SPAN],
        "start": np.append(np.maximum.reduceat(start, at), most[-1]).astype(np.int64),
        "end": np.append(seq[0] + stops, seq[0] + events).astype(np.int64),
        **{name: pa.nulls(m, schema.field(name).type)
           for name in ("payload", "error", "partition")},
        "own": np.full(m, -1, np.int32),
    }).select(schema.names).cast(schema)


def _valid(kind: str, start: np.ndarray, end: np.ndarray) -> bool:
    """Whether events of kind ``kind`` with these times break no rule of their times
    (``columns.suspects``: a missing or sentinel time, an interval without a lifetime)."""
    if ((start == NULL) | (start == MAX_TIME) | (end == MAX_TIME)).any():
        return False
    return kind != "interval" or not ((end == NULL) | (end <= start)).any()


def weights(kind: np.ndarray, end: np.ndarray) -> np.ndarray:
    """How many of the stream's rows each queued row stands for: a unit of the other shards'
    rows (``others``) its count, every other row 1."""
    return np.where(kind == OTHERS, end, 1)


def check_sequence(spec: StreamSpec, st: StreamState, pdf: pd.DataFrame) -> None:
    """Raise as the row machine does for a stream's rows out of sequence or after the end
    of input: as ``units`` checks them where they hold pieces' progress (without making the
    units), else ``columns.in_sequence``."""
    if _pieces(spec, st, pdf) is None:
        in_sequence(spec, st, pdf, STARTS[spec.shape])


def units(spec: StreamSpec, st: StreamState, pdf: pd.DataFrame, j: int
          ) -> tuple[pd.DataFrame, int] | None:
    """Stream ``j``'s new rows of the batch (``IN_COLUMNS``) where they hold pieces' progress
    (else None): its rows and, per run, the unit of the rows it does not own (kind
    ``others``: ``end`` how many, ``arrival`` the run's merge arrival within its piece,
    ``start`` the largest start of the run), in sequence (a unit before its run's own rows),
    and how many rows they are. Rows seen before are replays (skipped); rows out of
    sequence or after the end of input raise as ``columns.in_sequence`` has them, and a
    piece whose first explicit arrival goes back behind the stream's is named."""
    got = _pieces(spec, st, pdf)
    if got is None:
        return None
    seq, end, runs, real, inside, p_first, p_stop = got
    r_seq = seq[real]
    # The units: per run, the rows not among the shard's own (the real rows inside it).
    run_first, run_stop = seq[runs], end[runs]
    mine = np.bincount(np.searchsorted(run_first, r_seq[inside], side="right") - 1,
                       minlength=len(runs))
    others = run_stop - run_first - mine
    v = np.flatnonzero(others > 0)
    unit = {
        "stream": np.full(len(v), j, np.int32), "seq": run_first[v],
        "arrival": pdf["arrival"].to_numpy(np.int64)[runs][v],
        "kind": np.full(len(v), OTHERS, object),
        "start": pdf["start"].to_numpy(np.int64)[runs][v], "end": others[v],
        **{name: np.full(len(v), None, object) for name in ("payload", "error", "partition")}}
    # (column by column: pandas' concatenation looks at each value of a column of Nones)
    order = np.lexsort((np.arange(len(v) + len(real)), np.concatenate([run_first[v], r_seq])))
    out = framed({name: np.concatenate([values, pdf[name].to_numpy(values.dtype)[real]])[order]
                  for name, values in unit.items()})
    n = int(p_stop.sum() - p_first.sum()) + int((~inside).sum())
    return out, n


def _pieces(spec: StreamSpec, st: StreamState, pdf: pd.DataFrame) -> tuple | None:
    """Of stream rows that hold pieces' progress (else None), checked as ``units`` says:
    ``seq`` and ``end`` of every row, the new ``run`` rows and the other new rows (``real``)
    in ``seq`` order, which of ``real`` lie inside a piece, and the new pieces' first and
    stop ``seq``."""
    kind = pdf["kind"].to_numpy(object)
    span, run = kind == SPAN, kind == RUN
    if not span.any():
        return None
    seq = pdf["seq"].to_numpy(np.int64)
    end = pdf["end"].to_numpy(np.int64)
    nxt = st.next_in_seq
    pieces = _distinct(np.flatnonzero(span), seq, nxt, end)
    runs = _distinct(np.flatnonzero(run), seq, nxt, None)
    real = _distinct(np.flatnonzero(~span & ~run), seq, nxt, None)
    p_first, p_stop = seq[pieces], end[pieces]
    r_seq = seq[real]
    at = np.searchsorted(p_first, r_seq, side="right") - 1
    inside = (at >= 0) & (r_seq < p_stop[np.maximum(at, 0)])
    if (kind[real[inside]] != STARTS[spec.shape]).any():
        raise RuntimeError(f"stream {spec.name!r}: a row of a piece sent as its progress is "
                           "no event of the stream: a bug in cti")
    _in_sequence(spec, st, pdf.iloc[pieces], pdf.iloc[real[~inside]])
    return seq, end, runs, real, inside, p_first, p_stop


def _distinct(at: np.ndarray, seq: np.ndarray, nxt: int, end: np.ndarray | None
              ) -> np.ndarray:
    """The rows ``at`` in ``seq`` order, each number once, without those seen before (below
    ``nxt``; a piece: ending at or below it)."""
    at = at[np.argsort(seq[at], kind="stable")]
    s = seq[at]
    keep = np.concatenate([[True], s[1:] != s[:-1]]) if len(s) else np.zeros(0, bool)
    keep &= (end[at] > nxt) if end is not None else (s >= nxt)
    return at[keep]


def _in_sequence(spec: StreamSpec, st: StreamState, pieces: pd.DataFrame,
                 rows: pd.DataFrame) -> None:
    """Raise where the pieces and the rows outside them do not follow on from the stream's
    next row, one after another (``out_of_sequence``), where a row comes after the end of
    input (``after_end``), or where a piece's first explicit arrival goes back behind the
    stream's data arrival before it (the adapter said its arrivals do not)."""
    p_first = pieces["seq"].to_numpy(np.int64)
    r_seq = rows["seq"].to_numpy(np.int64)
    firsts = np.concatenate([p_first, r_seq])
    stops = np.concatenate([pieces["end"].to_numpy(np.int64), r_seq + 1])
    # (each tile's largest own arrival, and a piece's first explicit one: a row's is checked
    # where it is received, ``importing._receive``)
    r_kind = rows["kind"].to_numpy(object)
    first_arrival = np.concatenate([pieces["arrival"].to_numpy(np.int64),
                                    np.full(len(rows), NULL, np.int64)])
    most = np.concatenate([pieces["start"].to_numpy(np.int64),
                           _own_arrivals(spec, rows, r_kind)])
    is_eos = np.concatenate([np.zeros(len(p_first), bool), r_kind == EOS])
    order = np.argsort(firsts, kind="stable")
    firsts, stops, first_arrival, most, is_eos = (
        a[order] for a in (firsts, stops, first_arrival, most, is_eos))
    expected = np.concatenate([[st.next_in_seq], stops[:-1]])
    gap = np.flatnonzero(firsts != expected)
    after = 0 if st.eos else int(np.argmax(is_eos)) + 1 if is_eos.any() else len(firsts)
    if len(gap) and gap[0] <= after:
        raise out_of_sequence(spec, int(firsts[gap[0]]), int(expected[gap[0]]))
    if after < len(firsts):
        raise after_end(spec, int(firsts[after]))
    data = np.maximum.accumulate(np.concatenate([[st.data_arrival], most]))[:-1]
    back = np.flatnonzero((first_arrival != NULL) & (first_arrival < data))
    if len(back):
        k = int(back[0])
        raise BadInputError(
            f"stream {spec.name!r}, input #{int(firsts[k])}: its adapter says "
            f"arrivals_in_order, but this row arrives at {int(first_arrival[k])}, before an "
            f"earlier row ({int(data[k])}): set arrivals_in_order only on an adapter whose "
            "arrival times never go back")


def _own_arrivals(spec: StreamSpec, rows: pd.DataFrame, kind: np.ndarray) -> np.ndarray:
    """Each row's own arrival (``columns.own_arrivals``, as ``importing._receive`` has it)."""
    is_end = (kind == "edge_end") if spec.shape is EventShape.EDGE else np.zeros(len(kind), bool)
    return own_arrivals(rows["arrival"].to_numpy(np.int64), kind == EOS, is_end,
                        rows["start"].to_numpy(np.int64), rows["end"].to_numpy(np.int64))
