"""A large column of texts held as UTF-8 bytes and offsets (Arrow's large string layout in
two numpy arrays), not as a numpy array of Python strings.

A reference table's payload and join-key texts stay in a shard's state for the whole run
(a join side's segments, an edge book opened in bulk). As Python strings they cost about
120 bytes a row in every process that holds them (a million rows of ~70 characters: 125 MB,
unpickled again in every Spark worker that runs the shard); as ``Texts`` they are ~78 bytes
a row in two plain arrays, which Spark's state keeps as memory-mapped parts
(``cti.runtime.spark.state``): clean page cache shared by the workers, read where a step
touches it. A step takes the rows it needs (``take``) as Python strings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import pyarrow as pa

MIN_ROWS = 32_768  # a column of fewer texts stays an array of objects (a step's own rows)


@attrs.frozen(eq=False)
class Texts:
    """``len(offsets) - 1`` texts: text i is ``data[offsets[i]:offsets[i + 1]]`` (UTF-8);
    ``validity``: Arrow's validity bitmap of the rows (None: none is null). Read-only in use:
    a column made anew, never changed in place."""

    offsets: np.ndarray
    data: np.ndarray
    validity: np.ndarray | None = None

    dtype = np.dtype(object)  # what indexing gives: texts as Python objects (None: null)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def shape(self) -> tuple[int]:
        return (len(self),)

    def arrow(self) -> pa.LargeStringArray:
        """The column as an Arrow array over the same memory (no copy)."""
        bitmap = None if self.validity is None else pa.py_buffer(self.validity)
        return pa.LargeStringArray.from_buffers(
            len(self), pa.py_buffer(self.offsets), pa.py_buffer(self.data), bitmap)

    def __getitem__(self, at: Any) -> Any:
        """Positions (integers): their texts as an array of objects; a mask or a slice: the
        rows it keeps, as ``Texts``; one position: its text."""
        if isinstance(at, slice):
            return of_arrow(self.arrow()[at])
        at = np.asarray(at)
        if at.ndim == 0:
            return self.arrow()[int(at)].as_py()
        if at.dtype == bool:
            return of_arrow(self.arrow().filter(pa.array(at)))
        return objects(self.arrow().take(pa.array(at.astype(np.int64, copy=False))))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return objects(self.arrow())

    def tolist(self) -> list[Any]:
        return self.arrow().to_pylist()


def objects(array: pa.Array) -> np.ndarray:
    """An Arrow string array as a numpy array of Python strings (None: null)."""
    return np.asarray(array.to_numpy(zero_copy_only=False), object)


def of_arrow(array: pa.Array) -> Texts:
    """An Arrow string array as ``Texts`` (its buffers copied only where it is a slice or of
    another layout)."""
    array = array.cast(pa.large_string()) if array.type != pa.large_string() else array
    if array.offset:
        array = pa.concat_arrays([array])  # (a slice: its own buffers from offset 0)
    validity, offsets, data = array.buffers()
    n = len(array)
    offsets_np = np.frombuffer(offsets, np.int64, n + 1) if n else np.zeros(1, np.int64)
    data_np = (np.frombuffer(data, np.uint8, int(offsets_np[-1])) if data is not None
               else np.empty(0, np.uint8))
    bitmap = (np.frombuffer(validity, np.uint8, (n + 7) // 8)
              if validity is not None and array.null_count else None)
    return Texts(offsets_np, data_np, bitmap)


def compact(values: Any) -> Any:
    """``values`` (an array of objects, or ``Texts``) as ``Texts`` where it holds at least
    ``MIN_ROWS`` rows, every one a text or None; else as it is."""
    if isinstance(values, Texts) or len(values) < MIN_ROWS:
        return values
    try:
        array = pa.array(values, pa.large_string(), from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
        return values  # (an object that is not a text, or a text UTF-8 cannot hold)
    return of_arrow(array)


def concat(columns: Sequence[Any]) -> Any:
    """Columns (arrays of objects or ``Texts``) one after the other: ``Texts`` where any is,
    else an array of objects."""
    if not any(isinstance(c, Texts) for c in columns):
        return np.concatenate(columns)
    try:
        return of_arrow(pa.concat_arrays([
            c.arrow() if isinstance(c, Texts) else pa.array(c, pa.large_string(),
                                                            from_pandas=False)
            for c in columns]))
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeEncodeError):
        return np.concatenate([np.asarray(c, object) for c in columns])
