"""The window operator's partials as sorted runs (``cti.operators.window_partials``): any
sequence of steps' partials and takes gives the sums, minima and counts a plain per-(k, key)
tally gives, also where keys' hashes collide, and the runs stay few."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from cti.operators import window_partials
from cti.operators.window_partials import Partials

KEYS = ["a", "b", "c", "d", "e"]
_row = st.tuples(st.sampled_from(KEYS), st.integers(0, 6), st.integers(-50, 50))
_steps = st.lists(st.tuples(st.lists(_row, max_size=12), st.none() | st.integers(-1, 7)),
                  max_size=12)


def _step_frame(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    """A step's partials as the window builds them: one row per (k, key)."""
    tally: dict[tuple[int, str], list[int]] = {}
    for key, k, v in rows:
        n, total, low = tally.get((k, key), (0, 0, v))
        tally[(k, key)] = [n + 1, total + v, min(low, v)]
    return pd.DataFrame({"key": np.asarray([key for _, key in tally], object),
                         "k": np.asarray([k for k, _ in tally], np.int64),
                         "n": np.asarray([t[0] for t in tally.values()], np.int64),
                         "sum:v": np.asarray([t[1] for t in tally.values()], np.int64),
                         "min:v": np.asarray([t[2] for t in tally.values()], np.int64)})


def _as_dict(part: pd.DataFrame | None) -> dict[tuple[int, str], tuple[int, int, int]]:
    if part is None:
        return {}
    got = {(int(k), key): (int(n), int(s), int(m)) for key, k, n, s, m in part[
        ["key", "k", "n", "sum:v", "min:v"]].itertuples(index=False)}
    assert len(got) == len(part)  # one row per (k, key)
    return got


def _check(steps: list[tuple[list[tuple[str, int, int]], int | None]]) -> None:
    partials, expected = Partials(), {}
    for rows, done in steps:
        partials.add(_step_frame(rows))
        for key, k, v in rows:
            n, total, low = expected.get((k, key), (0, 0, v))
            expected[(k, key)] = (n + 1, total + v, min(low, v))
        if done is not None:
            ready = {kk: t for kk, t in expected.items() if kk[0] <= done}
            assert _as_dict(partials.take(done)) == ready
            expected = {kk: t for kk, t in expected.items() if kk[0] > done}
        assert len(partials) >= len(expected)  # (a run may hold a (k, key) another holds)
    assert _as_dict(partials.take(None)) == expected
    assert len(partials) == 0


@settings(max_examples=examples(80), deadline=None)
@given(_steps)
def test_runs_tally_as_one_table(steps: list) -> None:
    _check(steps)


@settings(max_examples=examples(50), deadline=None)
@given(steps=_steps)
def test_keys_whose_hashes_collide_stay_apart(steps: list, monkeypatch_module: None) -> None:
    _check(steps)


@pytest.fixture(scope="module")
def monkeypatch_module() -> object:
    """Every key hashed to one of two values: most merges meet two keys with one hash."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(window_partials, "key_hashes", lambda keys: np.asarray(
            [ord(k[0]) % 2 for k in keys], np.uint64))
        yield None


def test_runs_stay_few() -> None:
    """A thousand one-row steps leave ``FEW`` runs and a run per binary digit or so, not a
    thousand."""
    partials = Partials()
    for i in range(1000):
        partials.add(_step_frame([(f"k{i}", 0, 1)]))
    assert len(partials.runs) <= window_partials.FEW + 10
    assert len(partials) == 1000


def test_a_step_run_lives_apart_until_its_windows_are_taken() -> None:
    """Windows twelve steps long (an hour's windows every five minutes, a micro-batch a
    hop): each step's run is neither merged with others nor copied by a take while most of
    it is left, and once half of it is taken what is left is copied (the taken rows freed).
    So a step costs its own rows and the windows it takes, not the rows held."""
    partials = Partials()
    for step in range(40):
        partials.add(_step_frame([(f"k{j}", step + w, 1) for j in range(20)
                                  for w in range(12)]))
        frames = [run.frame for run in partials.runs]
        got = _as_dict(partials.take(step))
        assert set(got) == {(step, f"k{j}") for j in range(20)}
        assert all(n == min(step + 1, 12) for n, _, _ in got.values())
        assert len(partials.runs) == min(step + 1, 11)
        assert all(run.weight == 240 for run in partials.runs)  # (none merged)
        for run, before in zip(partials.runs, frames[-len(partials.runs):], strict=True):
            assert (run.frame is before) == (2 * len(run) > len(before))
            assert 2 * len(run) > len(run.frame) or run.start == 0


def test_a_state_holding_one_frame_reads_as_runs() -> None:
    """A window state written when the partials were one frame (a checkpoint of an earlier
    release) is taken over as runs."""
    old = _step_frame([("a", 1, 5), ("b", 1, 7), ("a", 2, 1)])
    partials = Partials.of(old)
    partials.add(_step_frame([("a", 1, 2)]))
    assert _as_dict(partials.take(1)) == {(1, "a"): (2, 7, 2), (1, "b"): (1, 7, 7)}
    assert Partials.of(None).runs == []


def test_a_state_holding_runs_as_frames_reads_as_runs() -> None:
    """A window state written when each run was a sorted frame (a checkpoint of an earlier
    release) is taken over as runs."""
    partials = Partials()
    partials.runs = [_old_run_frame([("a", 1, 5), ("b", 2, 7)])]
    partials.add(_step_frame([("a", 1, 2)]))
    assert len(partials) == 3
    assert _as_dict(partials.take(1)) == {(1, "a"): (2, 7, 2)}
    assert _as_dict(partials.take(None)) == {(2, "b"): (1, 7, 7)}


def _old_run_frame(rows: list[tuple[str, int, int]]) -> pd.DataFrame:
    """A step's partials as a run held them before runs held key codes: the keys' texts
    (column ``key``) and hashes (``#``), sorted by (k, hash)."""
    part = _step_frame(rows)
    part["#"] = window_partials.key_hashes(part["key"].to_numpy(object))
    return part.iloc[np.lexsort((part["#"].to_numpy(), part["k"].to_numpy()))].reset_index(
        drop=True)


# ``Partials`` pickled by d3cce54 (runs holding their keys' texts, one taken from): steps
# [a 1 5, b 1 7, c 2 1, a 3 4] and [a 1 2, c 2 3, d 3 -1], then ``take(1)``.
_KEY_TEXT_RUNS = (
    "eNqNU0trFEEQ3tmdiYkRNfhIVKIHBVeUwZuigQQThbi4SpAogTDpmendGnZe9Mxks2hED+YBfUsb0B/hxZseRH+A"
    "5A949id4jNW9M7p54iw7Xd1TXfVVfV+9Nt59Mkrq4aNO6plRTBlJI5aYbS90o7YVE5Z6xE8E739SmBvi2huxLLjO"
    "sjAR86IKJV6ZycLiQ5UbDUYCKvhQTEKXJKYTMWrmZwNTJCUPlP3XX7eCJhP8Yq+7F6aUhZjPDEhImpQhhmP3/Mhp"
    "Peru8To/m9+wfM9O/l0R/ISVhbHntHxq2fKOcg6zIO6YlgofZD5WwxjpYFiLUScKk5RlTio9DeUp+BEMrlw2RK30"
    "VkxqtlgVM6Ja0/BXXhFwgRtu2ollKbz8+LZYX+t+r3DtpajX6w+38VGv2ngq7HVsFtccwTUiKO55v515iAPbyI3E"
    "9xyqMsnwMk6tLN8wzE/1IkebMg+DDFoNFgV21mioZlQ3J7pUlsr5WslX7YBVP2Av4AovezuqGdtVTQnR13TZA65N"
    "ilTCvImwjZ3A4VZ182QedOvH598/3TMft74+m7j/4f03lSTrSQJj+6Totnk8T2DU+noTrErx8ZGdqnHpEk1MmySo"
    "taNWSNvWtDzDBsFTbhS2Up2LShRwHkYluXCpoLYPN1cVVZUWRRVoLfyHkqEsuLOIa+CFctUud0nUQynmerYiQc7y"
    "c/vhYSRsSkAzcu0BAc06xk1xtJB3ridpFGNx0qBoaComlS+cERQajo8EXYySFdCUqCrmERZJUxwSHMw+q+GTpjKH"
    "ie9H7cRysxjlRVJq+cSmOCFrSWZDiDn72tRrAqbX8aC/O5AwCMdzawhOI497eqTVKit5l+AGXOeaq3qBHO1RrxTB"
    "wi6l/a9Cd/tt589B5wLuoiorPZLZV5MjhSZzLRbanPvyS/8+MDglYDqv8DDlwSw8ly2aO0RCsAAEbHDABaoa1Cx0"
    "An6XfkkCRCj/uJduyGAR2rAEnWUBL/C/nBOmwataJbNpYpt/AJpVDQs=")


def test_a_state_whose_runs_hold_key_texts_reads_as_runs(monkeypatch) -> None:
    """A window state written when each run held its keys' texts (pickled by an earlier
    release, one run taken from) is taken over as runs with key codes."""
    import base64
    import pickle
    import zlib

    monkeypatch.setattr(window_partials, "key_hashes", pd.util.hash_array)  # (the state's)
    partials = pickle.loads(zlib.decompress(base64.b64decode(_KEY_TEXT_RUNS)))
    assert len(partials) == 4
    partials.add(_step_frame([("c", 2, 10), ("e", 3, 0)]))
    assert _as_dict(partials.take(2)) == {(2, "c"): (3, 14, 1)}
    assert _as_dict(partials.take(None)) == {(3, "a"): (1, 4, 4), (3, "d"): (1, -1, -1),
                                             (3, "e"): (1, 0, 0)}


def test_a_large_run_is_not_written_again_by_a_small_step(tmp_path) -> None:
    """On Spark, a window's large run read back from its parts is named again, not written
    again, when a step adds a small run (the state costs what the micro-batch touches)."""
    from cti.runtime.spark import state

    state.clear_cache()
    store = state.PartStore(str(tmp_path), 64 * 1024)
    big = pd.DataFrame({"key": np.asarray([f"k{i}" for i in range(40_000)], object),
                        "k": np.repeat(np.arange(4, dtype=np.int64), 10_000),
                        "n": np.ones(40_000, np.int64)})
    held = {"partials": Partials.of(big)}
    blob = state.dump_state(held, store, None, 1)
    written = set(tmp_path.iterdir())
    assert written  # the large run's columns are parts
    for batch in (2, 3, 4):
        back, manifest = state.load_parts(blob, store)
        back["partials"].add(_step_frame([("k7", 3, 1), ("new", 3, 2)]))
        assert len(back["partials"].runs[0]) == 40_000  # (not merged with the small runs)
        blob = state.dump_state(back, store, manifest, batch)
        assert set(tmp_path.iterdir()) == written
    back, manifest = state.load_parts(blob, store)
    assert len(back["partials"].take(0)) == 10_000  # (a take leaves the run's arrays as they are)
    blob = state.dump_state(back, store, manifest, 5)
    assert set(tmp_path.iterdir()) == written
    got = state.load_state(blob, store)["partials"].take(3)
    assert len(got) == 30_002 and int(got["n"].sum()) == 30_000 + 6  # (k7 and new at k 3)
    state.clear_cache()


@settings(max_examples=examples(100), deadline=None)
@given(st.data())
def test_combined_measures_equal_pandas_grouped_sum_min_and_max(data):
    """Each measure combined per pair code as pandas' grouped sum, min and max give them:
    integer limbs summed exactly, the least and greatest integer, the least and greatest
    float ignoring NaN (NaN where a pair has none), every pair code in use, in order."""
    m = data.draw(st.integers(1, 6))
    pairs = np.array(data.draw(st.permutations(range(m))) + data.draw(
        st.lists(st.integers(0, m - 1), max_size=20)), np.int64)
    n = len(pairs)
    ints = st.lists(st.integers(-2**62, 2**62), min_size=n, max_size=n)
    floats = st.lists(st.one_of(st.just(np.nan), st.floats(allow_nan=False, width=64)),
                      min_size=n, max_size=n)
    measures = {"sum:a": np.array(data.draw(st.lists(st.integers(0, 2**31), min_size=n,
                                                      max_size=n)), np.int64),
                "min:b": np.array(data.draw(ints), np.int64),
                "max:b": np.array(data.draw(ints), np.int64),
                "minf:b": np.array(data.draw(floats), np.float64) + 0.0,
                "maxf:b": np.array(data.draw(floats), np.float64) + 0.0}
    got = window_partials._combined_measures(measures, pairs)
    want = pd.DataFrame(measures).groupby(pairs, sort=True).agg(
        {c: window_partials.COMBINE[c.split(":")[0]] for c in measures})
    for c in measures:
        assert got[c].dtype == want[c].dtype, c
        assert np.array_equal(got[c], want[c].to_numpy(), equal_nan=True), c
