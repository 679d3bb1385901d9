"""The processes Spark starts to plan cti's source (its ``create_data_source`` and
``plan_data_source_read`` workers) and to drive it (the Python streaming source runner) import
``cti`` and unpickle the source: they import neither pandas nor, until they ask the adapters,
pyarrow (issue 40: each was 130-145 MB with them, about 40 without)."""

from __future__ import annotations

import pickle
import subprocess
import sys

from pyspark import cloudpickle

from cti import EventShape
from cti.engine.route import QueryRoute
from cti.io.reference import ReferenceDataConfig, ReferenceDataInputAdapterFactory
from cti.runtime.spark.source import (
    PACKED_SCHEMA,
    CtiAdapterSource,
    CtiAdapterStreamReader,
    encode_sources,
)

HEAVY = ("pandas", "pyarrow", "numpy")


def _in_fresh_python(code: str, *args: str) -> list[str]:
    """What of ``HEAVY`` a fresh interpreter has imported after running ``code``."""
    check = f"{code}\nimport sys\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", check, *args], capture_output=True, text=True,
                         check=True).stdout.strip()
    return [m for m in out.split(",") if m]


def test_import_cti_imports_neither_pandas_nor_pyarrow():
    assert _in_fresh_python("import cti, cti.io, cti.runtime.spark.source") == []
    assert _in_fresh_python("from cti import Application; Application") == list(HEAVY)


def _spec(tmp_path) -> str:
    path = tmp_path / "ref.csv"
    path.write_text("key,owner\nk1,a\nk2,b\nk3,c\n")
    stream = (0, 0, ReferenceDataInputAdapterFactory(), ReferenceDataConfig(path, 5, "csv"),
              EventShape.EDGE, False)
    return encode_sources([stream], None, [QueryRoute(0, 2, {(0, 0): "key"}, False)])


def test_planning_the_source_unpickles_no_adapter_and_no_route(tmp_path):
    """The schema from the spec alone; the reader the planning worker makes and pickles for
    the executors, without unpickling the streams; the driver's offsets with the adapter's
    module (numpy and pyarrow: a reference file is counted by Arrow), not the routes'
    (pandas)."""
    spec = _spec(tmp_path)
    (tmp_path / "spec").write_text(spec)
    source = cloudpickle.dumps(CtiAdapterSource({"spec": spec}))
    (tmp_path / "source").write_bytes(source)
    plan = ("import pickle, sys\n"
            "from pyspark import cloudpickle\n"
            "source = pickle.loads(open(sys.argv[1], 'rb').read())\n"
            "schema = source.schema()\n"
            "reader = source.streamReader(schema)\n"
            "blob = cloudpickle.dumps(reader)\n")
    assert _in_fresh_python(plan, str(tmp_path / "source")) == []
    offsets = plan + "print(reader.latestOffset(), file=sys.stderr)\n"
    assert _in_fresh_python(offsets, str(tmp_path / "source")) == ["pyarrow", "numpy"]
    source = CtiAdapterSource({"spec": spec})
    assert source.schema() == PACKED_SCHEMA
    reader = source.streamReader(PACKED_SCHEMA)
    assert reader.latestOffset()["0"] == {"pos": 3, "eos": True}
    again = pickle.loads(cloudpickle.dumps(reader))  # (the executors' copy: the spec alone)
    assert isinstance(again, CtiAdapterStreamReader) and vars(again) == {
        "spec": spec, "_decoded": None}
    rows = [row for p in again.partitions(again.initialOffset(), reader.latestOffset())
            for row in again.read(p)]
    assert len(rows) == 2 and all(len(row) == len(PACKED_SCHEMA) for row in rows)  # (a shard's)


def test_the_hold_stages_processor_unpickles_and_inits_without_pandas(tmp_path):
    """Spark unpickles the hold stage's processor, with the output adapter it writes to, in a
    Python process of the driver's on every query start and calls its ``init`` there
    (``transformWithStateInPandas``'s pre-init runner): that imports none of ``HEAVY``; the
    executors' copy gets the adapter back."""
    from cti.io.outputs import JsonLinesOutputAdapterFactory
    from cti.runtime.spark.hold_processor import Hold

    sink = (JsonLinesOutputAdapterFactory(), str(tmp_path), EventShape.POINT)
    (tmp_path / "hold").write_bytes(cloudpickle.dumps(Hold([2], ["query", "blob"], [sink])))
    init = ("import pickle, sys\n"
            "hold = pickle.loads(open(sys.argv[1], 'rb').read())\n"
            "class Handle:\n"
            "    def getValueState(self, name, schema):\n"
            "        return name\n"
            "hold.init(Handle())\n")
    assert _in_fresh_python(init, str(tmp_path / "hold")) == []
    again = pickle.loads(cloudpickle.dumps(Hold([2], ["query", "blob"], [sink])))
    assert isinstance(again.sink(0)[0], JsonLinesOutputAdapterFactory)
    assert again.sink(0)[1:] == sink[1:]
