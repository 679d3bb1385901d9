"""The Spark runtime equals the in-process runner on random SI ingress inputs (SPEC 3-6),
whole and in random micro-batch splits.

Many random cases run as separate ingress groups of ONE streaming query per hypothesis example
(a query costs seconds), so a few examples cover dozens of random inputs.
"""

from __future__ import annotations

from budget import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import bind, describe, past_the_simplest, spark_splits, stream_defs

from cti.runtime.local import LocalRuntime

# single streams, an importer, and import chains a -> b -> c (-> d)
CASES = st.lists(st.one_of(stream_defs(stray_edge_ends=True, max_size=10),
                           stream_defs(chain=3, max_size=8), stream_defs(chain=4, max_size=6)),
                 min_size=15, max_size=20)
SPLITS = spark_splits


@settings(max_examples=examples(2), deadline=None, suppress_health_check=list(HealthCheck))
@given(cases=CASES, splits=past_the_simplest(SPLITS))
def test_spark_equals_local(spark, cases, splits):
    from cti.runtime.spark import SparkRuntime

    groups = [bind(defs)[0].ingress_group() for defs in cases]
    spark_results = SparkRuntime(spark, batch_sizes=splits).run_groups(groups)
    for defs, group, got in zip(cases, groups, spark_results, strict=True):
        want = LocalRuntime().run(group)
        for name in group.names:
            assert got[name].items == want[name].items, describe(defs)
            assert got[name].diagnostics == want[name].diagnostics, describe(defs)
            assert got[name].metrics == want[name].metrics, describe(defs)
