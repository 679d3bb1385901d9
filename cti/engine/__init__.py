"""The engine: the step one query shard (or one ingress group) runs over a batch of input rows.

Below the runtimes and above ingress and the operators (``docs/architecture.md``):
``cti.engine.batch`` reads adapters into Arrow batches of input rows and routes them to
shards, ``cti.engine.shard`` runs a shard's step (ingress, vectorised where it
can be, then the query machine) on plain-data state. The Spark runtime runs that step in its
stateful function, one per shard; the in-process runtime runs it with one shard. Nothing here
imports pyspark.
"""
