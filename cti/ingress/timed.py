"""Time once, events once: a query shard judges its own events against CTIs it computes from
the source's generation points, without receiving the other shards' events.

A stream that generates a CTI every N events (``AdvanceTimeGenerationSettings(N, delay)``)
has, at each N-th event, the CTI ``max start so far - delay``; every decision of ingress (an
event accepted, adjusted or dropped) compares the event with the CTI in force before it. When
every row of the stream is an event (an adapter that yields no CTIs and no arrival times, and
bad input that stops the query instead of being dead-lettered), the N-th events are the rows
whose sequence number ``seq`` has ``(seq + 1) % N == 0``, which the source knows. So the source
sends each shard, per piece of input it reads (``generation_points``):

- the events that shard owns (with their payloads), and the end-of-input row;
- a ``gen`` row per N-th event of the piece: its ``seq`` and the largest start of the piece up
  to it (``start``);
- one ``piece`` row: the piece's first ``seq``, its largest start (``start``) and the ``seq``
  after it (``end``).

A shard puts the pieces in order, carries the largest start of the earlier pieces (and of the
earlier micro-batches, in its state) into each, and so has every CTI of the stream exactly,
and each of its own events' CTI in force (``timed_step``). That is ``N`` times fewer rows than
the events for every shard but the owner; a piece that is not all valid events goes to every
shard whole, as without this (the ordinary route, ``cti.engine.batch.routed``).

A stream that generates a CTI by time span (``AdvanceTimeGenerationSettings(span, delay)``)
has its CTIs at the events that start at least a span past the last one that generated: such
an event starts above every earlier one (``columns.span_points``). Which of those generate
depends on every earlier piece, so the source sends a ``gen`` row for each of the piece's
records (an event above every earlier start of the piece), and each shard, with the earlier
pieces' largest start and the last generator's start carried in, picks the generators:
fewer rows the more the stream's times are out of order (in order, every event is a record),
and a shard looks at the records only, judging none but its own events.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.errors import BadInputError
from cti.forms.frame import Chunk, filled, stack
from cti.ingress.columns import judged, output_frame, saturating_sub, span_points
from cti.ingress.group import GroupRun
from cti.ingress.spec import StreamSpec, rooted_at
from cti.ingress.vectorized import eligible, kept_chunk, status_rows
from cti.time import MAX_TIME, MIN_TIME

NULL = MIN_TIME
GEN, PIECE = "gen", "piece"


def timed_streams(specs: Sequence[StreamSpec]) -> dict[int, tuple[int | None, str]]:
    """{stream: (event count, None for a time span; event kind)} of a group's stream whose
    shards can take its time from the source's generation points (``cti.ingress.timed``): a
    stream that generates a CTI every N events or every time span, vectorised, stops at bad
    input (a dead-lettered row would shift the count), and is the group's only stream or the
    one every other stream imports its CTIs from, directly or down a chain (a fast stream and
    its slow reference streams)."""
    for i, spec in enumerate(specs):
        if eligible([spec]) and spec.generates and not spec.dead_letter and \
                spec.arrival_clock == "data" and rooted_at(specs, i):
            return {i: (spec.event_count, spec.shape.value)}
    return {}



def generation_points(rows: pa.Table, count: int | None, kind: str, schema: pa.Schema
                      ) -> pa.Table | None:
    """The ``gen`` and ``piece`` rows (``schema``) of a piece of one stream's rows (contiguous
    ``seq``, maybe ending with end of input), for a stream that generates a CTI every ``count``
    events of kind ``kind``, or (``count`` None) by time span: then a ``gen`` row per event
    that starts above every earlier one of the piece (only such an event can generate: see
    ``columns.span_points``). None where the piece is not all valid events without arrival
    times (then every shard gets it whole)."""
    n = rows.num_rows
    if n == 0:
        return None
    seq = rows.column("seq").to_numpy()
    kinds = rows.column("kind")
    is_ev = pc.equal(kinds, kind).to_numpy(zero_copy_only=False)
    eos = not is_ev[-1] and kinds[-1].as_py() == "eos"
    events = n - int(eos)
    if not is_ev[:events].all() or rows.column("error").null_count != n \
            or (n > 1 and not (np.diff(seq) == 1).all()):
        return None
    start = rows.column("start").to_numpy()[:events]
    arrival = rows.column("arrival").to_numpy()[:events]
    if (arrival != NULL).any() or ((start == NULL) | (start == MAX_TIME)).any():
        return None
    if kind == "interval":
        end = rows.column("end").to_numpy()[:events]
        if ((end == NULL) | (end <= start) | (end == MAX_TIME)).any():
            return None
    most = np.maximum.accumulate(start) if events else start
    if count is None:  # the piece's records: an event above every earlier start of the piece
        at = np.flatnonzero(start > np.concatenate([[MIN_TIME], most[:-1]])) if events else \
            np.zeros(0, np.int64)
    else:
        at = np.flatnonzero((seq[:events] + 1) % count == 0)
    m = len(at) + 1
    stream = rows.column("stream")[0].as_py()
    return pa.table({
        "stream": np.full(m, stream, np.int32),
        "seq": np.concatenate([seq[at], [seq[0]]]).astype(np.int64),
        "arrival": np.full(m, NULL, np.int64),
        "kind": [GEN] * (m - 1) + [PIECE],
        "start": np.concatenate([most[at], [most[-1] if events else NULL]]).astype(np.int64),
        "end": np.concatenate([np.full(m - 1, NULL), [seq[-1] + 1]]).astype(np.int64),
        **{name: pa.nulls(m, schema.field(name).type)
           for name in ("payload", "error", "partition")},
        "own": np.full(m, -1, np.int32),
    }).select(schema.names).cast(schema)


def segments(pdf: pd.DataFrame) -> list[tuple[bool, pd.DataFrame]]:
    """A group's rows (one stream) cut into runs in ``seq`` order: (True, the rows of pieces
    sent as generation points) and (False, rows sent whole), so each run goes to its step."""
    kind = pdf["kind"].to_numpy(object)
    seq = pdf["seq"].to_numpy(np.int64)
    piece = kind == PIECE
    if not piece.any():
        return [(False, pdf)]
    first = seq[piece]
    stop = pdf["end"].to_numpy(np.int64)[piece]
    order = np.argsort(first, kind="stable")
    first, stop = first[order], stop[order]
    at = np.searchsorted(first, seq, side="right") - 1
    inside = (at >= 0) & (seq < stop[np.maximum(at, 0)])
    inside |= piece | (kind == GEN)
    # A key per row: the compact rows by piece, the whole rows by the gap they fall in; keys
    # in a row of the same kind (pieces with no whole rows between them) make one run.
    key = np.where(inside, 2 * np.maximum(at, 0) + 1, 2 * (at + 1))
    keys = np.unique(key)
    compact = keys % 2 == 1
    if compact.all():
        return [(True, pdf)]
    runs = np.cumsum(np.concatenate([[0], compact[1:] != compact[:-1]]))
    run = runs[np.searchsorted(keys, key)]
    order = np.argsort(run, kind="stable")
    bounds = np.searchsorted(run[order], np.arange(runs[-1] + 2))
    rows = pdf.iloc[order]  # (one copy, then a slice per run)
    return [(bool(compact[np.searchsorted(runs, r)]), rows.iloc[bounds[r]:bounds[r + 1]])
            for r in range(runs[-1] + 1)]


def timed_step(machine: GroupRun, pdf: pd.DataFrame, owner: int, index: int = 0
               ) -> tuple[pd.DataFrame, Chunk, list[tuple[tuple, int]]]:
    """Shard ``owner``'s step of stream ``index`` of a group over pieces sent as generation
    points (``generation_points``): its output rows (the stream's CTIs where ``owner`` is 0,
    whose output CTIs count; one summary row per status of its own events, weighted), the
    chunk its operators take (its accepted and adjusted events, every CTI), as
    ``vectorized.shard_chunk`` gives them from every row, and each CTI with its place in
    arrival order (for the streams that import them, ``GroupRun.import_ctis``); the
    ingress state as the row machine leaves it, but for the counts of events, which are this
    shard's own."""
    spec = machine.specs[index]
    st = machine.state.streams[index]
    n_gen = spec.event_count  # (None: CTIs by time span)
    name = spec.name
    kind = pdf["kind"].to_numpy(object)
    seq = pdf["seq"].to_numpy(np.int64)
    start = pdf["start"].to_numpy(np.int64)
    end = pdf["end"].to_numpy(np.int64)
    piece, gen = kind == PIECE, kind == GEN
    is_eos = kind == "eos"
    order = np.argsort(seq[piece], kind="stable")
    p_first, p_stop, p_max = (a[piece][order] for a in (seq, end, start))
    keep = p_stop > st.next_in_seq  # pieces seen before are replays
    p_first, p_stop, p_max = p_first[keep], p_stop[keep], p_max[keep]
    if len(p_first) == 0:
        return output_frame({}, index).assign(weight=np.zeros(0, np.int64)), Chunk.empty(), []
    if p_first[0] != st.next_in_seq or (p_first[1:] != p_stop[:-1]).any():
        raise RuntimeError(f"stream {name!r}: input pieces from sequence number "
                           f"{int(p_first[0])} do not follow on from {st['next_in_seq']}")
    if st.eos or (n_gen is not None and st.count != st.next_in_seq % n_gen) \
            or st.pending \
            or st.imported or st.open_edges:
        raise BadInputError(
            f"stream {name!r}, input #{int(p_first[0])}: its adapter says events_only, but an "
            "earlier row was no event (a CTI, an arrival time or a dead letter): set events_only "
            "only on an adapter that yields events and InvalidInput alone")
    first, last = int(p_first[0]), int(p_stop[-1])
    mine = (seq >= first) & (seq < last)
    eos = bool((is_eos & mine).any())
    n_events = last - first - int(eos)

    # Every CTI: each generation point's largest start so far, less the delay; end of input.
    prev_max = MIN_TIME if st.max_start is None else st.max_start
    before_piece = np.maximum(prev_max, np.maximum.accumulate(
        np.concatenate([[MIN_TIME], p_max[:-1]])))
    g = np.flatnonzero(gen & mine)
    g = g[np.argsort(seq[g], kind="stable")]
    g_seq = seq[g]
    if n_gen is None:  # which of the pieces' records generate (the earlier ones carried in)
        generates, gen_ref = span_points(start[g], prev_max, st.gen_ref, spec.duration)
        g, g_seq = g[generates], g_seq[generates]
    in_piece = np.searchsorted(p_first, g_seq, side="right") - 1
    most = np.maximum(before_piece[in_piece], start[g])  # the largest start up to each point
    candidate = saturating_sub(most, spec.delay)
    # Each point's place in arrival order: an event's arrival is its start (no arrival times).
    arrival = np.maximum(st.last_arrival, most)
    if eos and spec.advance_to_infinity_on_shutdown:
        g_seq = np.append(g_seq, last - 1)
        candidate = np.append(candidate, MAX_TIME)
        arrival = np.append(arrival, MAX_TIME)
    after = np.maximum.accumulate(np.concatenate([[st.cti], candidate]))
    emits = candidate > after[:-1]
    ctis = candidate[emits]
    keys = [((int(a), index, int(q)), int(c)) for a, q, c in zip(
        arrival[emits], g_seq[emits], ctis, strict=True)]

    # The shard's own events, in order, against the CTI in force before each.
    ev = np.flatnonzero(mine & (kind == spec.shape.value))
    ev = ev[np.argsort(seq[ev], kind="stable")]
    e_seq, e_start, e_end = seq[ev], start[ev], end[ev]
    before = after[np.searchsorted(g_seq, e_seq, side="left")]
    _, adjust, dropped, accepted = judged(spec, True, e_start, e_end, before)
    kept = np.flatnonzero(~dropped)
    chunk = kept_chunk(spec.shape.value, e_start[kept], e_end[kept], before[kept],
                       adjust[kept], pdf, ev[kept], ctis.tolist())

    # Output rows: the CTIs (shard 0's count), the own events' counts.
    events_upto = np.minimum(g_seq[emits] - first + 1, n_events)
    cti_seq = st.out_seq + events_upto + np.arange(1, len(ctis) + 1) - 1
    n = len(ctis) if owner == 0 else 0
    null = np.full(n, NULL, np.int64)
    rows = output_frame({
        "seq": cti_seq[:n], "in_seq": np.full(n, -1, np.int64), "kind": filled(n, "cti"),
        "start": ctis[:n], "end": null, "payload": filled(n, None), "status": filled(n, "cti"),
        "orig_start": null, "orig_end": null,
        "cti": np.where(ctis[:n] == MIN_TIME, NULL, ctis[:n]), "reason": filled(n, None),
    }, index).assign(weight=np.ones(n, np.int64))
    counted = status_rows({"accepted": accepted, "adjusted": adjust, "dropped": dropped})
    out = stack([rows, output_frame(counted, index).assign(weight=counted["weight"])])

    metrics = st.metrics
    metrics["accepted"] += int(accepted.sum())
    metrics["adjusted"] += int(adjust.sum())
    metrics["dropped"] += int(dropped.sum())
    metrics["ctis"] += len(ctis)
    st.cti = int(after[-1])
    if n_gen is None:
        st.gen_ref = gen_ref
    else:
        st.count = int((st.count + n_events) % n_gen)
    if n_events:
        st.max_start = int(max(prev_max, p_max.max()))
    st.out_seq += n_events + len(ctis)
    st.next_in_seq = last
    last_arrival = MAX_TIME if eos else max(st.last_arrival, int(p_max.max()))
    st.last_arrival = st.data_arrival = last_arrival
    st.last_key = (last_arrival, index, last - 1)
    st.eos = eos
    return out, chunk, keys


def merged(chunks: list[Chunk]) -> Chunk:
    """Consecutive chunks of one stream as one (a run of pieces sent as generation points is
    one chunk, ``segments``), with their typed payload columns where each chunk of events has
    the same ones."""
    chunks = [c for c in chunks if len(c.raw_events) or c.ctis]
    if len(chunks) <= 1:
        return chunks[0] if chunks else Chunk.empty()
    return Chunk.stacked(chunks, [t for c in chunks for t in c.ctis])
