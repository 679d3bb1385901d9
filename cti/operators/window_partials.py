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
merge that meets such a pair groups by the texts themselves).
"""

from __future__ import annotations

import attrs
import numpy as np
import pandas as pd

from cti.forms import frame
from cti.operators import exact_sum

# How each measure's partials combine, by the prefix of its column.
COMBINE = {"sum": "sum", "ints": "sum", "floats": "sum", "min": "min", "max": "max",
           "minf": "min", "maxf": "max"}
_HASH = "#"  # the key hash's column


def grouped(keys: np.ndarray, ks: np.ndarray, n: np.ndarray,
            measures: dict[str, np.ndarray], pairs: np.ndarray) -> pd.DataFrame:
    """The partial aggregates of each (key, k): ``n`` events, and each measure (``COMBINE``:
    its prefix, ``:``, the aggregate's name) of its rows' values, rows grouped by the codes
    ``pairs`` (0..m-1, the order of the result's rows)."""
    part = pd.DataFrame({"key": keys, "k": ks.astype(np.int64), "n": n}, copy=False)
    if measures:
        combined = pd.DataFrame(measures, copy=False).groupby(pairs, sort=True).agg(
            {c: COMBINE[c.split(":")[0]] for c in measures})
        for c in measures:
            part[c] = combined[c].to_numpy()
    return part


def key_hashes(keys: np.ndarray) -> np.ndarray:
    """Each key's 64-bit hash (the runs' order within a window)."""
    return pd.util.hash_array(keys)


def _sorted(part: pd.DataFrame) -> pd.DataFrame:
    """``part`` (one row per (k, key)) with its key hashes, sorted by (k, hash)."""
    hashes = key_hashes(part["key"].to_numpy(object))
    order = _order(part["k"].to_numpy(), hashes)
    out = _taken(part, order)
    out[_HASH] = hashes[order]
    return out


def _order(ks: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """The order of the rows by (k, hash). One stable sort of a 64-bit word of k's rank and
    the hash's high bits: it runs in about linear time over runs sorted already (a sort by
    two columns took 20 times longer); where two hashes share those bits, by both columns."""
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


def _combined(runs: list[pd.DataFrame]) -> pd.DataFrame:
    """The runs as one run: rows of the same (k, key) combined, sorted by (k, hash). Only the
    sort's columns and each pair's first key are taken in order, not the whole rows."""
    if len(runs) == 1:
        return runs[0]
    columns = set().union(*(r.columns for r in runs))  # (the limbs in use may differ)
    both = frame.stack([exact_sum.with_columns(r, columns) for r in runs])
    order = _order(both["k"].to_numpy(), both[_HASH].to_numpy())
    ks, hashes, keys = both["k"].to_numpy()[order], both[_HASH].to_numpy()[order], both[
        "key"].to_numpy(object)
    new = np.ones(len(both), bool)
    new[1:] = (ks[1:] != ks[:-1]) | (hashes[1:] != hashes[:-1])
    pairs = np.cumsum(new) - 1
    firsts = np.flatnonzero(new)
    if len(firsts) == len(both):  # no (k, key) twice
        return _taken(both, order)
    again = order[~new]  # (a row whose (k, hash) came before: the same key?)
    if not (keys[again] == keys[order[firsts[pairs[~new]]]]).all():  # two keys, one hash
        return _sorted(_regrouped(_taken(both, order), pd.factorize(keys[order])[0], ks))
    measures = {c: both[c].to_numpy()[order] for c in both.columns if ":" in c}
    out = grouped(keys[order[firsts]], ks[firsts], np.bincount(
        pairs, both["n"].to_numpy()[order]).astype(np.int64), measures, pairs)
    out[_HASH] = hashes[firsts]
    return out


def _regrouped(both: pd.DataFrame, codes: np.ndarray, ks: np.ndarray) -> pd.DataFrame:
    """``both`` grouped by (k, key code): the exact path where key hashes collide."""
    pairs, uniques = pd.factorize(pd.MultiIndex.from_arrays([ks, codes]))
    first = frame.first_of(pairs, len(uniques))
    measures = {c: both[c].to_numpy() for c in both.columns if ":" in c}
    return grouped(both["key"].to_numpy(object)[first], ks[first], np.bincount(
        pairs, both["n"].to_numpy()).astype(np.int64), measures, pairs)


FEW = 16  # runs held without merging (see the module)


@attrs.define
class Run:
    """Partials sorted by (k, key hash), one row per (k, key): the rows of ``frame`` from
    ``start`` (those before it were taken out); ``weight``, the rows it was made of."""

    frame: pd.DataFrame
    start: int = 0
    weight: int = 0

    def __len__(self) -> int:
        return len(self.frame) - self.start

    def rows(self, end: int | None = None) -> pd.DataFrame:
        """Its rows from ``start`` to ``end`` (its end: None), a slice of ``frame``."""
        return self.frame.iloc[self.start:end]

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
            return Run(self.frame, cut, self.weight)
        return Run(_taken(self.frame, np.arange(cut, len(self.frame))), 0, self.weight)


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
            got.add(held.drop(columns=[_HASH], errors="ignore"))
        return got

    def held(self) -> list[Run]:
        """The runs, as ``Run`` where a state written before runs were (frames) holds them."""
        if any(isinstance(r, pd.DataFrame) for r in self.runs):
            self.runs = [Run(r, 0, len(r)) if isinstance(r, pd.DataFrame) else r
                         for r in self.runs]
        return self.runs

    def __len__(self) -> int:
        return sum(len(r) for r in self.held())

    def add(self, part: pd.DataFrame) -> None:
        """Add a step's partials (one row per (k, key)) as a run; while more than ``FEW``
        runs are held, merge the newest two while the older weighs no more than twice the
        newer."""
        if not len(part):
            return
        runs = self.held()
        runs.append(Run(_sorted(part), 0, len(part)))
        while len(runs) > FEW and runs[-2].weight <= 2 * runs[-1].weight:
            last = runs.pop()
            runs[-1] = Run(_combined([runs[-1].rows(), last.rows()]), 0,
                           runs[-1].weight + last.weight)

    def take(self, done: int | None) -> pd.DataFrame | None:
        """The partials of the windows k <= ``done`` (every window: None), combined and taken
        out (with their key hashes, column ``#``), or None where there are none."""
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
        return _combined(ready)
