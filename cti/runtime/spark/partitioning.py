"""Which task runs each shard of a query.

Spark hash-partitions a stateful stage on its grouping key: the row of key (query, slot) goes
to partition ``pmod(murmur3(query, slot), partitions)`` (``HashPartitioning``, seed 42, one
32-bit round per int column). With the shard numbers themselves as slots, shards collide: 4
shards on 4 partitions land on 2 of them, 8 on 6, so some tasks run two shards and others
none. Each shard ``s`` of ``S`` therefore travels under a slot ``s + S * j``: the smallest such
number that Spark sends to partition ``s mod P``, so ``S`` shards on ``P = S`` partitions give
every task one shard (and on fewer partitions, ``S / P`` each). ``slot % S`` is the shard again.
"""

from __future__ import annotations

from functools import lru_cache

_MASK = 0xFFFFFFFF
SEED = 42  # Spark's Murmur3Hash seed for HashPartitioning


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur3_int(value: int, seed: int) -> int:
    """Murmur3_x86_32 ``hashInt(value, seed)`` as Spark computes it (a signed 32-bit int)."""
    k = (value & _MASK) * 0xCC9E2D51 & _MASK
    k = _rotl(k, 15) * 0x1B873593 & _MASK
    h = _rotl((seed & _MASK) ^ k, 13)
    h = (h * 5 + 0xE6546B64) & _MASK
    h ^= 4
    h ^= h >> 16
    h = h * 0x85EBCA6B & _MASK
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _MASK
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_of(query: int, slot: int, partitions: int) -> int:
    """The partition Spark gives grouping key (query, slot), two int columns."""
    return murmur3_int(slot, murmur3_int(query, SEED)) % partitions


@lru_cache(maxsize=256)
def shard_slots(query: int, shards: int, partitions: int) -> tuple[int, ...]:
    """Each shard's slot: shard ``s`` travels to partition ``s mod partitions``."""
    slots = []
    for s in range(shards):
        slot = s
        while partition_of(query, slot, partitions) != s % partitions:
            slot += shards
        slots.append(slot)
    return tuple(slots)


def default_tasks(shards: int, cores: int) -> int:
    """How many tasks run ``shards`` shards on ``cores`` cores by default: the largest divisor
    of ``shards`` up to ``cores`` (each task runs as many shards; more tasks than cores would
    only queue, each with Spark's fixed cost per task), or one per shard where that divisor is
    1 (a prime number of shards above the cores: the cores still share the work)."""
    best = max(d for d in range(1, min(shards, cores) + 1) if shards % d == 0)
    return shards if best == 1 else best
