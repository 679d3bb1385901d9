"""CTI imports along a chain a -> b -> c: a stream's rows wait for every CTI that can still
reach it up the chain, so how the input is cut into batches changes nothing (SPEC 5). The
random chains are in test_ingress_properties.py and test_spark_vs_local.py."""

from __future__ import annotations

import pytest

from cti import (
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Application,
    Arriving,
    CepStream,
    Cti,
    EventShape,
    PointEvent,
)
from cti.io.memory import MemoryInputAdapterFactory
from cti.runtime.local import LocalRuntime


def chain() -> CepStream:
    """a's CTI at 10 arrives (at 10) before c's event at 5 (arriving at 20) and reaches c
    through b; b's own row arrives later (30), so b has not imported it when c1 arrives."""
    app, m = Application(), MemoryInputAdapterFactory()
    CepStream.create("a", m, [Arriving(PointEvent(1, {"id": "a1"}), 0),
                              Arriving(PointEvent(10, {"id": "a2"}), 10)],
                     EventShape.POINT, AdvanceTimeSettings.increasing_start_time(),
                     application=app)
    CepStream.create("b", m, [Arriving(PointEvent(30, {"id": "b1"}), 30)], EventShape.POINT,
                     AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("a")),
                     application=app)
    return CepStream.create("c", m, [Arriving(PointEvent(5, {"id": "c1"}), 20)],
                            EventShape.POINT,
                            AdvanceTimeSettings(import_settings=AdvanceTimeImportSettings("b")),
                            application=app)


@pytest.mark.parametrize("sizes", [None, [1], [2], [1, 2]])
@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_an_event_behind_a_cti_from_up_the_chain_is_dropped_whatever_the_batches(
        runtime, sizes, request):
    if runtime == "spark":
        from cti.runtime.spark import SparkRuntime

        rt = SparkRuntime(request.getfixturevalue("spark"), batch_sizes=sizes)
    else:
        rt = LocalRuntime(batch_sizes=sizes)
    result = chain().run(rt)
    assert result.items("c") == [Cti(1), Cti(10), Cti(2**63 - 1)]
    [dropped] = result["c"].dropped
    assert dropped.payload == {"id": "c1"} and dropped.cti == 10
    assert dropped.reason == "cti_violation"
