"""A window operator's partial aggregates per (group key, window k), kept as sorted runs.

A step adds the partials of its own events; a window is taken out whole once the CTI passes
its end. Merging every step's partials into one table cost each step the whole table (a
month of hourly windows over a million keys rewritten for every micro-batch of a thousand
events). So the partials are a short list of runs, each sorted by (k, key hash) with one row
per (k, key), oldest and largest first: a step's partials become a new run, and two runs
merge only when the older is at most twice the newer's size, so a row is merged O(log n)
times in all and a step costs its own rows (amortised). A complete window is a prefix of every
run (the runs are sorted by k first). On Spark the large runs are the same arrays from one
micro-batch to the next, so the shard state's parts (``cti.runtime.spark.state``) are not
written again.

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
    """The runs as one run: rows of the same (k, key) combined, sorted by (k, hash)."""
    if len(runs) == 1:
        return runs[0]
    columns = set().union(*(r.columns for r in runs))  # (the limbs in use may differ)
    both = frame.stack([exact_sum.with_columns(r, columns) for r in runs])
    ks, hashes = both["k"].to_numpy(), both[_HASH].to_numpy()
    order = _order(ks, hashes)
    both = _taken(both, order)
    ks, hashes, keys = ks[order], hashes[order], both["key"].to_numpy(object)
    new = np.ones(len(both), bool)
    new[1:] = (ks[1:] != ks[:-1]) | (hashes[1:] != hashes[:-1])
    pairs = np.cumsum(new) - 1
    firsts = np.flatnonzero(new)
    again = np.flatnonzero(~new)  # (a row whose (k, hash) came before: the same key?)
    if not (keys[again] == keys[firsts[pairs[again]]]).all():  # two keys, one hash
        return _sorted(_regrouped(both, pd.factorize(keys)[0], ks))
    if len(firsts) == len(both):  # no (k, key) twice
        return both
    measures = {c: both[c].to_numpy() for c in both.columns if ":" in c}
    out = grouped(keys[firsts], ks[firsts], np.bincount(pairs, both["n"].to_numpy()).astype(
        np.int64), measures, pairs)
    out[_HASH] = hashes[firsts]
    return out


def _regrouped(both: pd.DataFrame, codes: np.ndarray, ks: np.ndarray) -> pd.DataFrame:
    """``both`` grouped by (k, key code): the exact path where key hashes collide."""
    pairs, uniques = pd.factorize(pd.MultiIndex.from_arrays([ks, codes]))
    first = frame.first_of(pairs, len(uniques))
    measures = {c: both[c].to_numpy() for c in both.columns if ":" in c}
    return grouped(both["key"].to_numpy(object)[first], ks[first], np.bincount(
        pairs, both["n"].to_numpy()).astype(np.int64), measures, pairs)


@attrs.define
class Partials:
    """The partials as runs sorted by (k, key hash), the largest first (see the module)."""

    runs: list[pd.DataFrame] = attrs.field(factory=list)

    @classmethod
    def of(cls, held: Partials | pd.DataFrame | None) -> Partials:
        """``held`` as runs: a state written before the runs held one frame (or None)."""
        if isinstance(held, Partials):
            return held
        got = cls()
        if held is not None and len(held):
            got.add(held.drop(columns=[_HASH], errors="ignore"))
        return got

    def __len__(self) -> int:
        return sum(len(r) for r in self.runs)

    def add(self, part: pd.DataFrame) -> None:
        """Add a step's partials (one row per (k, key)) as a run; merge the newest runs while
        the older is no more than twice the newer's size."""
        if not len(part):
            return
        self.runs.append(_sorted(part))
        while len(self.runs) > 1 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            last = self.runs.pop()
            self.runs[-1] = _combined([self.runs[-1], last])

    def take(self, done: int | None) -> pd.DataFrame | None:
        """The partials of the windows k <= ``done`` (every window: None), combined and taken
        out, or None where there are none."""
        ready, kept = [], []
        for run in self.runs:
            cut = len(run) if done is None else int(np.searchsorted(
                run["k"].to_numpy(), done, side="right"))
            if cut:
                ready.append(run.iloc[:cut])
            if cut < len(run):
                kept.append(run if not cut else run.iloc[cut:].reset_index(drop=True))
        if not ready:
            return None
        self.runs = kept
        return _combined(ready).drop(columns=[_HASH])
