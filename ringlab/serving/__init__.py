"""Serving: the paged KV-cache block allocator, a continuous-batching scheduler, and request traces.

Imports numpy and ``ringlab.calc`` only (bytes per token, the decode roofline for step times).

- :class:`BlockManager` (``blocks``): block tables, reference counts, prefix sharing by chained keys of
  full blocks, an LRU cache of freed blocks, copy-on-write, watermark, ``check_invariants()``;
  :class:`CacheLayout`: windowed layers and Mamba state as further blocks of the same pool.
- :func:`swap_or_recompute` (``cost``): a preempted sequence's two costs on a chip, the host link from
  the hardware preset.
- :class:`Scheduler` / :func:`simulate` (``scheduler``): waiting / running / swapped queues, token and
  block budgets, chunked prefill, preemption by recompute or swap, the livelock and the fixed policy.
- :func:`poisson_requests` (``requests``): seeded traces; :class:`Trace` (``trace``): events, steps,
  TTFT / TPOT / throughput / queueing delay.
"""

from ringlab.serving.blocks import (BlockManager, CacheLayout, InvariantError, OutOfBlocksError, block_bytes,
                                    cache_layout, pool_blocks, sequence_kv_bytes)
from ringlab.serving.cost import StepCost, SwapOrRecompute, host_link, swap_or_recompute
from ringlab.serving.requests import Request, poisson_requests, sampled_token
from ringlab.serving.scheduler import Scheduler, SchedulerConfig, simulate
from ringlab.serving.trace import Event, Trace

__all__ = [
    "BlockManager", "CacheLayout", "InvariantError", "OutOfBlocksError", "block_bytes", "cache_layout", "pool_blocks",
    "sequence_kv_bytes",
    "StepCost", "SwapOrRecompute", "host_link", "swap_or_recompute",
    "Request", "poisson_requests", "sampled_token", "Scheduler", "SchedulerConfig", "simulate", "Event", "Trace",
]
