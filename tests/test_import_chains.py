"""CTI imports along a chain a -> b -> c: a stream's rows wait for every CTI that can still
reach it up the chain, so how the input is cut into batches changes nothing (SPEC 5). The
random chains are in test_ingress_properties.py and test_spark_vs_local.py."""

from __future__ import annotations

from typing import Any

import pytest
from shard_runs import released, run_shards

from cti import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EdgeEvent,
    EventShape,
    PointEvent,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.base import query_inputs
from cti.runtime.local import LocalRuntime


def chain(tag: str = "") -> CepStream:
    """a's CTI at 10 arrives (at 10) before c's event at 5 (arriving at 20) and reaches c
    through b; b's own row arrives later (30), so b has not imported it when c1 arrives.
    (``tag`` ends the streams' names: several chains side by side in one run.)"""
    app, m = Application(), MemoryInputAdapterFactory()
    CepStream.create(f"a{tag}", m, [Arriving(PointEvent(1, {"id": "a1"}), 0),
                                    Arriving(PointEvent(10, {"id": "a2"}), 10)],
                     EventShape.POINT, AdvanceTimeSettings.increasing_start_time(),
                     application=app)
    CepStream.create(f"b{tag}", m, [Arriving(PointEvent(30, {"id": "b1"}), 30)],
                     EventShape.POINT,
                     AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings(f"a{tag}")),
                     application=app)
    return CepStream.create(
        f"c{tag}", m, [Arriving(PointEvent(5, {"id": "c1"}), 20)], EventShape.POINT,
        AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings(f"b{tag}")),
        application=app)


SPLITS = [None, [1], [2], [1, 2]]


def assert_c1_dropped(result, name: str) -> None:
    assert result.items(name) == [Cti(1), Cti(10), Cti(2**63 - 1)]
    [dropped] = result[name].dropped
    assert dropped.payload == {"id": "c1"} and dropped.cti == 10
    assert dropped.reason == "cti_violation"


@pytest.mark.parametrize("sizes", SPLITS)
def test_an_event_behind_a_cti_from_up_the_chain_is_dropped_whatever_the_batches(sizes):
    assert_c1_dropped(chain().run(LocalRuntime(batch_sizes=sizes)), "c")


@pytest.fixture(scope="module")
def spark_chains(spark: Any) -> list[Any]:
    """One streaming query over 3 shards for the Spark tests below: each split of ``SPLITS``
    a chain of its own (its streams capped to it: ``q0``...), then the join down a chain whole
    (``whole``) and in ``BATCHES`` (``cut``)."""
    from cti.runtime.spark import SparkRuntime

    caps = {f"{s}{k}": sizes for k, sizes in enumerate(SPLITS) if sizes for s in "abc"}
    caps |= {f"{name}_cut": BATCHES for name in ("cars", "owners", "status")}
    queries = [chain(str(k)).where(lambda p: True).named(f"q{k}") for k in range(len(SPLITS))]
    queries += [joined_down_a_chain(tag="_whole").named("whole"),
                joined_down_a_chain(tag="_cut").named("cut")]
    return SparkRuntime(spark, shards=3, batch_sizes=caps).run_queries(queries)


def test_on_spark_an_event_behind_a_cti_from_up_the_chain_is_dropped_whatever_the_batches(
        spark_chains):
    """The same on Spark, each split a chain of its own, in one streaming query."""
    for k in range(len(SPLITS)):
        assert_c1_dropped(spark_chains[k], f"c{k}")


def joined_down_a_chain(reference: str = "status", tag: str = "") -> CepStream:
    """Cars (a CTI every 3 events) joined by plate with reference data: ``owners``, which
    imports the cars' CTIs, or ``status``, which imports those of ``owners`` (a -> b -> c):
    status changes arrive late now and then, so ADJUST moves them to the CTI that reached
    them; reference rows wait for the cars that pass them (held into a later micro-batch).
    The streams' names end in ``tag``."""
    app, m = Application(), MemoryInputAdapterFactory()
    plates = [f"P{k}" for k in range(6)]
    cars = [Arriving(PointEvent(10 * t, {"plate": plates[t % 6]}), 10 * t) for t in range(60)]
    owners = [Arriving(EdgeEvent.start_edge(5 * t, {"plate": plates[t % 6], "o": t}), 5 * t)
              for t in range(0, 120, 7)]
    status, arrival = [], 0
    for t in range(0, 120, 5):
        arrival = max(arrival, 5 * t + (40 if t % 3 else 0))  # (arrivals never go back)
        status.append(Arriving(EdgeEvent.start_edge(5 * t, {"plate": plates[t % 6],
                                                            "ok": t % 2}), arrival))
    cars_stream = CepStream.create(
        f"cars{tag}", m, cars, EventShape.POINT,
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(3, 0)), application=app)
    CepStream.create(f"owners{tag}", m, owners, EventShape.EDGE, AdvanceTimeSettings(
        import_settings=AdvanceTimeImportSettings(f"cars{tag}"),
        policy=AdvanceTimePolicy.ADJUST), application=app)
    CepStream.create(f"status{tag}", m, status, EventShape.EDGE, AdvanceTimeSettings(
        import_settings=AdvanceTimeImportSettings(f"owners{tag}"),
        policy=AdvanceTimePolicy.ADJUST), application=app)
    return cars_stream.join(app.stream(f"{reference}{tag}"), on="plate")


BATCHES = [7, 3]  # each stream's rows per micro-batch, in turn


def _batches(adapters: dict) -> list[dict]:
    """``run_shards``' micro-batches: ``BATCHES`` rows of each stream in turn."""
    n = {name: a.latest_offset() for name, a in adapters.items()}
    pos, out = dict.fromkeys(n, 0), []
    while any(pos[name] < n[name] for name in n):
        size = BATCHES[len(out) % len(BATCHES)]
        batch = {}
        for name in n:
            a, b = pos[name], min(n[name], pos[name] + size)
            batch[name], pos[name] = ([(a, b, b == n[name])] if a < b else []), b
        out.append(batch)
    return out


@pytest.mark.parametrize("reference", ["owners", "status"])
def test_reference_rows_held_back_reach_the_join_on_every_shard(reference):
    """A reference stream (importing the fast stream's CTIs, or down a chain) whose rows wait
    for the fast stream into a later micro-batch: on 3 shards, where the fast stream's CTIs
    come from its events (``cti.ingress.timed``), its rows and CTIs released by the fast
    stream's piece still reach the join: the same events and CTIs as on one shard."""
    query = joined_down_a_chain(reference)
    groups, _ = query_inputs(query)
    adapters = {s.name: s.factory.create(s.config, s.shape) for s in groups[0].streams}
    batches = _batches(adapters)
    route, outs, _, _ = run_shards(query, adapters, batches, 3)
    assert route.timed  # (the path where they were lost)
    _, one, _, _ = run_shards(query, adapters, batches, 1)
    assert [o.ctis for o in outs[0]] == [o.ctis for o in one[0]]
    assert released([o for shard in outs for o in shard]) == released(one[0])
    assert len(released(one[0])) > 20


def test_a_join_with_reference_data_down_a_chain_on_shards(spark_chains):
    """The reference stream two imports down from the fast stream, joined on 3 shards: the
    same result as in process, whatever the batches (the fast stream's time comes from
    generation points on Spark, the chain's streams are merged with the CTIs passed down):
    the chain whole and in ``BATCHES``."""
    want = joined_down_a_chain().collect(LocalRuntime())
    assert sum(isinstance(e, PointEvent) for e in want) > 20
    assert joined_down_a_chain().collect(LocalRuntime(batch_sizes=BATCHES)) == want
    assert [r.items(name) for r, name in zip(spark_chains[-2:], ("whole", "cut"),
                                             strict=True)] == [want, want]
