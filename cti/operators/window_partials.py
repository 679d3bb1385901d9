"""A window operator's partial aggregates per (group key, window k), kept as sorted runs.

A step adds the partials of its own events; a window is taken out whole once the CTI passes
its end. Merging every step's partials into one table cost each step the whole table (a
month of hourly windows over a million keys rewritten for every micro-batch of a thousand
events). So the partials are a short list of runs, each sorted by (k, key hash) with one row
per (k, key): a step's partials become a new run. A complete window is a prefix of every
run (the runs are sorted by k first), so a take cuts each run's head: it moves the run's
start (no copy) and copies what is left only once that is half the run or less, so each
row is copied about once in all.

A run dies by itself once its windows are taken, so runs are merged only where more than
``FEW`` are held (a take costs a binary search and a slice per run; a merge, every row of the
runs it merges): the newest two merge while the older was made of no more than twice as many
rows as the newer (its ``weight``, not lessened by takes, so a run drained by takes is not
merged again), so a row is merged O(log n) times in all and a step costs its own rows
(amortised). A query whose windows last a few micro-batches (an hour's windows every five
minutes, a micro-batch a hop: 13 runs) merges nothing: a micro-batch costs its own rows and
the windows it takes. On Spark a run is the same arrays from one micro-batch to the next, a
take included, so the shard state's parts (``cti.runtime.spark.state``) are not written
again.

The key hash (``pd.util.hash_array``, 64 bits) orders and matches keys without a dictionary
of every key the operator has seen; two keys with one hash are told apart by their text (a
merge that meets such a pair groups by the texts themselves). A run holds each row's key as
a code into the texts of its step's distinct keys (``Texts``: two plain arrays, state parts
on Spark), hashed once per distinct key; a take stacks codes, compares texts in Arrow only
where a (k, hash) repeats, and hands the keys on as an Arrow text column: a released
window makes no Python string per key (with the keys as Python strings, taking, stacking and
comparing them was half of a take, and the group values an Arrow array made from them).
"""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from cti.forms import frame, texts
from cti.forms.texts import Texts
from cti.operators import exact_sum

# How each measure's partials combine, by the prefix of its column.
COMBINE = {"sum": "sum", "ints": "sum", "floats": "sum", "min": "min", "max": "max",
           "minf": "min", "maxf": "max"}
HASH = "#"  # the key hash's column


def grouped(codes: np.ndarray, ks: np.ndarray, n: np.ndarray,
            measures: dict[str, np.ndarray], pairs: np.ndarray) -> pd.DataFrame:
    """The partial aggregates of each (key, k), the key as its code (column ``code``): ``n``
    events, and each measure (``COMBINE``: its prefix, ``:``, the aggregate's name) of its
    rows' values, rows grouped by the codes ``pairs`` (0..m-1, the order of the result's
    rows)."""
    return pd.DataFrame({"code": codes, "k": ks.astype(np.int64), "n": n} | _combined_measures(
        measures, pairs), copy=False)


def _combined_measures(measures: dict[str, np.ndarray], pairs: np.ndarray
                       ) -> dict[str, np.ndarray]:
    """Each measure's values combined (``COMBINE``) per pair code (0..m-1, each in use, in
    that order), by NumPy's unbuffered ``ufunc.at``: exact for the integer limbs, the least
    and greatest float ignoring NaN (none: NaN), as pandas' grouped sum, min and max give,
    at a hundredth of their fixed cost on a small step's few rows (a fourth less on a
    million)."""
    if not measures:
        return {}
    m = int(pairs.max()) + 1 if len(pairs) else 0
    return {c: _combined_values(COMBINE[c.split(":")[0]], v, pairs, m)
            for c, v in measures.items()}


def _combined_values(how: str, values: np.ndarray, pairs: np.ndarray, m: int) -> np.ndarray:
    """``values`` combined by ``how`` (sum, min or max) per pair code, ``m`` codes."""
    if how == "sum":
        out = np.zeros(m, values.dtype)
        np.add.at(out, pairs, values)
    elif values.dtype.kind == "f":  # (NaN: no value; NaN where a pair has none)
        out = np.full(m, np.nan, values.dtype)
        (np.fmin if how == "min" else np.fmax).at(out, pairs, values)
    else:
        limits = np.iinfo(values.dtype)
        out = np.full(m, limits.max if how == "min" else limits.min, values.dtype)
        (np.minimum if how == "min" else np.maximum).at(out, pairs, values)
    return out


def key_hashes(keys: np.ndarray) -> np.ndarray:
    """Each key's 64-bit hash (the runs' order within a window), of distinct keys (the same
    hashes as ``categorize=True`` gives, without first looking for repeats)."""
    return pd.util.hash_array(keys, categorize=False)


def _sorted(part: pd.DataFrame, keys: np.ndarray) -> Run:
    """A step's partials (one row per (k, key), column ``code``: each row's key in ``keys``,
    texts) as a run sorted by (k, hash), its keys those of ``keys`` it uses, each hashed
    once, in hash order: a window's rows then name their texts in ascending order, so a
    take reads each run's texts front to back, not at random (a third less time in the
    take's text lookups of twelve runs)."""
    codes, used = frame.renumbered(part["code"].to_numpy(), len(keys))
    if len(used) < len(keys):
        keys = keys[used]
    key_hash = key_hashes(keys)
    by_hash = np.argsort(key_hash, kind="stable")
    code_of = np.empty(len(by_hash), np.int64)
    code_of[by_hash] = np.arange(len(by_hash))
    codes = code_of[codes]
    hashes = key_hash[by_hash][codes]
    order = _order(part["k"].to_numpy(), hashes)
    out = _taken(part.drop(columns=["code"]), order)
    out["code"] = codes[order].astype(np.int32)
    out[HASH] = hashes[order]
    return Run(out, 0, len(part), _dictionary(keys, by_hash))


def _dictionary(keys: np.ndarray, order: np.ndarray | None = None) -> Texts:
    """Key texts (an array of objects) as ``Texts``, in ``order`` (None: as they are): two
    plain arrays, whatever their number (a state part on Spark). (Put in order in Arrow:
    Python strings read in the order they were made are read faster.)"""
    keys = pa.array(keys, pa.large_string(), from_pandas=False)
    return texts.of_arrow(keys if order is None else keys.take(pa.array(order)))


def _order(ks: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """The order of the rows by (k, hash). One stable sort of a 64-bit word of k's rank and
    the hash's high bits: it runs in about linear time over runs sorted already (a sort by
    two columns took 20 times longer); where two hashes share those bits, by both columns."""
    if len(ks) and ks[0] == ks[-1] and (ks == ks[0]).all():  # (one window: a take's)
        return np.argsort(hashes, kind="stable")
    ranks, windows = frame.dense_codes(ks)
    if len(windows) < 1 << 20:
        word = (ranks.astype(np.uint64) << np.uint64(44)) | (hashes >> np.uint64(20))
        order = np.argsort(word, kind="stable")
        word, hashes_in = word[order], hashes[order]
        if not ((word[1:] == word[:-1]) & (hashes_in[1:] != hashes_in[:-1])).any():
            return order
    return np.lexsort((hashes, ks))


def _taken(part: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """The ``rows`` of ``part``, indexed from 0 (one copy)."""
    out = part.take(rows)
    out.index = pd.RangeIndex(len(out))
    return out


Columns = dict[str, np.ndarray]  # partials' columns (``code``: key codes) as plain arrays
Coded = tuple[Columns, pa.Array]  # partials with key codes, and the texts they name


def _combined(pieces: list[Coded]) -> Coded:
    """Runs' rows (each with the key texts its codes name) as one run's columns: rows of the
    same (k, key) combined, sorted by (k, hash), the codes into the pieces' texts one after
    the other. Each column is stacked and put in order as a plain array (no frame of the
    rows: a take meets twelve runs' heads a micro-batch); keys are compared as Arrow texts
    only where a (k, hash) repeats, each with the row before it."""
    if len(pieces) == 1:
        return pieces[0]
    rows = _stacked_in_order(pieces)
    ks, hashes, codes = rows["k"], rows[HASH], rows["code"]
    dictionary = pa.concat_arrays([d for _, d in pieces])
    new = np.ones(len(ks), bool)
    new[1:] = (ks[1:] != ks[:-1]) | (hashes[1:] != hashes[:-1])
    if new.all():  # no (k, key) twice
        return rows, dictionary
    again = np.flatnonzero(~new)  # (a row whose (k, hash) came before: the same key?)
    if not _same(dictionary, codes[again], codes[again - 1]):  # two keys, one hash
        return _regrouped(rows, dictionary), dictionary
    firsts = np.flatnonzero(new)
    measures = {c: v for c, v in rows.items() if ":" in c}
    out = {c: v[firsts] for c, v in rows.items() if c not in measures}
    out["n"] = np.add.reduceat(rows["n"], firsts)
    return out | _combined_measures(measures, np.cumsum(new) - 1), dictionary


def _stacked_in_order(pieces: list[Coded]) -> Columns:
    """The pieces' columns one under the other, in (k, hash) order; codes (int64) into the
    pieces' texts one after the other."""
    frames = [f for f, _ in pieces]
    columns = set().union(*frames)  # (the limbs in use may differ)
    frames = [_with_columns(f, columns) for f in frames]
    stacked = {c: np.concatenate([f[c] for f in frames]) for c in frames[0]}
    order = _order(stacked["k"], stacked[HASH])
    shift = np.cumsum([0] + [len(d) for _, d in pieces[:-1]])
    stacked["code"] = stacked["code"].astype(np.int64) + np.repeat(
        shift, [len(f["k"]) for f in frames])
    return {c: v[order] for c, v in stacked.items()}


def _same(dictionary: pa.Array, these: np.ndarray, those: np.ndarray) -> bool:
    """Whether the texts ``these`` name in ``dictionary`` are those ``those`` name."""
    return bool(pc.all(pc.equal(dictionary.take(these), dictionary.take(those))).as_py())


def _regrouped(rows: Columns, dictionary: pa.Array) -> Columns:
    """``rows`` (codes into ``dictionary``) grouped by (k, key text), sorted by (k, hash):
    the exact path where key hashes collide."""
    ks, codes = rows["k"], rows["code"]
    same_key = pd.factorize(texts.objects(dictionary.take(codes)))[0]
    pairs, uniques = pd.factorize(pd.MultiIndex.from_arrays([ks, same_key]))
    first = frame.first_of(pairs, len(uniques))
    measures = {c: v for c, v in rows.items() if ":" in c}
    out = {c: v[first] for c, v in rows.items() if c not in measures}
    out["n"] = np.bincount(pairs, rows["n"], len(uniques)).astype(np.int64)
    out |= _combined_measures(measures, pairs)
    order = _order(out["k"], out[HASH])
    return {c: v[order] for c, v in out.items()}


def _with_columns(rows: Columns, columns: set[str]) -> Columns:
    """``rows`` with every column of ``columns`` (``exact_sum.with_columns``: 0 where it
    lacks one)."""
    n = len(rows["k"])
    return rows | {c: exact_sum.absent(c, n) for c in columns if c not in rows}


def _with_key_texts(coded: Coded) -> pd.DataFrame:
    """Partials with codes as partials with their keys (column ``key``): an Arrow text column
    taken from the texts the codes name (no Python string per row; ``to_numpy`` makes them)."""
    columns, dictionary = coded
    keys = dictionary.take(pa.array(columns["code"]))
    return pd.DataFrame({c: v for c, v in columns.items() if c != "code"} | {
        "key": pd.arrays.ArrowExtensionArray(keys)}, copy=False)


def key_texts(part: pd.DataFrame) -> pa.LargeStringArray:
    """The keys of taken partials (``Partials.take``) as the Arrow array they are."""
    keys = pa.array(part["key"].array)
    return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys


def _coded(part: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Partials with their keys' texts (column ``key``: a state written before runs held
    codes, or a caller's frame) as partials with codes, and the texts they name."""
    codes, keys = pd.factorize(part["key"].to_numpy(object))
    return part.drop(columns=["key", HASH], errors="ignore").assign(code=codes), np.asarray(
        keys, object)


FEW = 16  # runs held without merging (see the module)


@attrs.define
class Run:
    """Partials sorted by (k, key hash), one row per (k, key): the rows of ``frame`` from
    ``start`` (those before it were taken out); ``weight``, the rows it was made of; each
    row's key ``keys[code]`` (column ``code``), texts that are two plain arrays (on Spark,
    state parts like the frame's columns)."""

    frame: pd.DataFrame
    start: int = 0
    weight: int = 0
    keys: Texts | None = None  # (None only as a state written before runs held codes reads)

    def __len__(self) -> int:
        return len(self.frame) - self.start

    def rows(self, end: int | None = None) -> Coded:
        """Its rows from ``start`` to ``end`` (its end: None), slices of ``frame``'s columns,
        with the texts their codes name."""
        return {c: self.frame[c].to_numpy()[self.start:end] for c in self.frame.columns
                }, self.keys.arrow()

    def cut(self, done: int | None) -> int:
        """The end of its rows of the windows k <= ``done`` (every window: None)."""
        if done is None:
            return len(self.frame)
        return max(self.start, int(np.searchsorted(self.frame["k"].to_numpy(), done,
                                                   side="right")))

    def after(self, cut: int) -> Run:
        """Itself without its rows before ``cut``: the same frame while more than half of it
        is left, else what is left copied (so a run holds at most twice its rows)."""
        if 2 * (len(self.frame) - cut) > len(self.frame):
            return Run(self.frame, cut, self.weight, self.keys)
        return Run(_taken(self.frame, np.arange(cut, len(self.frame))), 0, self.weight,
                   self.keys)


def _merged(older: Run, newer: Run) -> Run:
    """Two runs as one, its texts only those its codes name."""
    out, dictionary = _combined([older.rows(), newer.rows()])
    codes, used = frame.renumbered(out["code"], len(dictionary))
    out["code"] = codes.astype(np.int32)
    return Run(pd.DataFrame(out, copy=False), 0, older.weight + newer.weight,
               texts.of_arrow(dictionary.take(used)))


def _current(run: Run | pd.DataFrame) -> Run:
    """A run as this module holds it, from a state written before: a sorted frame (runs
    were frames), or a run whose frame holds its keys' texts (runs held no codes)."""
    if isinstance(run, pd.DataFrame):
        run = Run(run, 0, len(run))
    if getattr(run, "keys", None) is not None:
        return run
    part, keys = _coded(run.frame.iloc[run.start:])
    part[HASH] = run.frame[HASH].to_numpy()[run.start:]
    part["code"] = part["code"].astype(np.int32)
    return Run(part.reset_index(drop=True), 0, run.weight, _dictionary(keys))


@attrs.define
class Partials:
    """The partials as runs sorted by (k, key hash), the oldest first (see the module)."""

    runs: list[Run] = attrs.field(factory=list)

    @classmethod
    def of(cls, held: Partials | pd.DataFrame | None) -> Partials:
        """``held`` as runs: a state written before the runs held one frame (or None)."""
        if isinstance(held, Partials):
            return held
        got = cls()
        if held is not None and len(held):
            got.add(held.drop(columns=[HASH], errors="ignore"))
        return got

    def held(self) -> list[Run]:
        """The runs, as ``Run`` with codes where a state written before held them otherwise
        (``_current``)."""
        if not all(isinstance(r, Run) and getattr(r, "keys", None) is not None
                   for r in self.runs):
            self.runs = [_current(r) for r in self.runs]
        return self.runs

    def __len__(self) -> int:
        return sum(len(r) for r in self.held())

    def add(self, part: pd.DataFrame, keys: np.ndarray | None = None) -> None:
        """Add a step's partials (one row per (k, key); each row's key ``keys[code]``, or
        where ``keys`` is None its text, column ``key``) as a run; while more than ``FEW``
        runs are held, merge the newest two while the older weighs no more than twice the
        newer."""
        if not len(part):
            return
        if keys is None:
            part, keys = _coded(part)
        runs = self.held()
        runs.append(_sorted(part, keys))
        while len(runs) > FEW and runs[-2].weight <= 2 * runs[-1].weight:
            last = runs.pop()
            runs[-1] = _merged(runs[-1], last)

    def take(self, done: int | None) -> pd.DataFrame | None:
        """The partials of the windows k <= ``done`` (every window: None), combined and taken
        out (with their key hashes, column ``#``, and keys, column ``key``: Arrow texts), or
        None where there are none."""
        ready, kept = [], []
        for run in self.held():
            cut = run.cut(done)
            if cut > run.start:
                ready.append(run.rows(cut))
            if cut < len(run.frame):
                kept.append(run.after(cut) if cut > run.start else run)
        if not ready:
            return None
        self.runs = kept
        return _with_key_texts(_combined(ready))
