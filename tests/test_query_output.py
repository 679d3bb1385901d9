"""A query's output to adapters: an adapter with ``write_table`` receives each batch as an Arrow
table, one with ``write_frame`` as a frame, one with neither as items; all get the same
sequence, in output order, on both runtimes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Application,
    CepStream,
    EventShape,
    IntervalEvent,
    agg,
    ticks,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.io.outputs import JsonLinesOutputAdapterFactory, read_json_lines_output
from cti.runtime.local import LocalRuntime


class ItemsOnly:
    """The JSON-lines adapter without ``write_frame``: items only."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, items: Any, batch_id: int) -> None:
        self.inner.write(items, batch_id)

    def close(self) -> None:
        self.inner.close()


class ItemsOnlyFactory:
    def create(self, config: Any, shape: Any) -> ItemsOnly:
        return ItemsOnly(JsonLinesOutputAdapterFactory().create(config, shape))


class FrameOnly(ItemsOnly):
    """The JSON-lines adapter without ``write_table``: frames."""

    def write_frame(self, frame: Any, batch_id: int) -> None:
        assert list(frame.columns) == ["kind", "start", "end", "payload"]
        self.inner.write_frame(frame, batch_id)


class FrameOnlyFactory:
    def create(self, config: Any, shape: Any) -> FrameOnly:
        return FrameOnly(JsonLinesOutputAdapterFactory().create(config, shape))


def query() -> Any:
    rng = random.Random(7)
    events = []
    for n in range(300):
        start = rng.randrange(0, 400)
        events.append(IntervalEvent(start, start + rng.randrange(1, 30),
                                    {"k": rng.choice("abcd"), "v": n}))
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(
        25, delay=ticks(40), advance_to_infinity_on_shutdown=True))
    s = CepStream.create("s", MemoryInputAdapterFactory(), events, EventShape.INTERVAL,
                         settings, application=Application())
    counts = s.group_by("k").apply(
        lambda g: g.tumbling_window(ticks(50)).aggregate(n=agg.count()))
    return counts.union(s.where(lambda p: p["v"] % 7 == 0))


def _written(runtime: Any, factory: Any, out: Path) -> list:
    query().to(factory, str(out)).run(runtime)
    return read_json_lines_output(out)


@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_frame_and_item_adapters_get_the_same_output(runtime, tmp_path, request):
    if runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        make = lambda: SparkRuntime(request.getfixturevalue("spark"), batch_sizes=[70])  # noqa: E731
    else:
        make = lambda: LocalRuntime(batch_sizes=[70])  # noqa: E731
    tables = _written(make(), JsonLinesOutputAdapterFactory(), tmp_path / "tables")
    frames = _written(make(), FrameOnlyFactory(), tmp_path / "frames")
    items = _written(make(), ItemsOnlyFactory(), tmp_path / "items")
    assert tables == frames == items == query().collect(LocalRuntime())
    assert any(hasattr(i, "payload") for i in frames)
    if runtime == "local":  # (the same bytes: Arrow writes each line as the items' path does;
        # on Spark the partitioned factory writes a file per shard partition, the others one)
        files = [{p.name: p.read_bytes() for p in sorted((tmp_path / d).glob("*.jsonl"))}
                 for d in ("tables", "frames", "items")]
        assert files[0] == files[1] == files[2] and files[0]
