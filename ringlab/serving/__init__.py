"""Serving: the paged KV-cache block allocator, a continuous-batching scheduler, and request traces.

Imports numpy and ``ringlab.calc`` only (bytes per token, the decode roofline for step times).

- :class:`BlockManager` (``blocks``): block tables, reference counts, prefix sharing by chained keys of
  full blocks, an LRU cache of freed blocks, copy-on-write, watermark, ``check_invariants()``.
- :class:`Scheduler` / :func:`simulate` (``scheduler``): waiting / running / swapped queues, token and
  block budgets, chunked prefill, preemption by recompute or swap, the livelock and the fixed policy.
- :func:`poisson_requests` (``requests``): seeded traces; :class:`Trace` (``trace``): events, steps,
  TTFT / TPOT / throughput / queueing delay.
"""

from ringlab.serving.blocks import BlockManager, InvariantError, OutOfBlocksError, block_bytes, pool_blocks
from ringlab.serving.cost import StepCost
from ringlab.serving.requests import Request, poisson_requests, sampled_token
from ringlab.serving.scheduler import Scheduler, SchedulerConfig, simulate
from ringlab.serving.trace import Event, Trace

__all__ = [
    "BlockManager", "InvariantError", "OutOfBlocksError", "block_bytes", "pool_blocks", "StepCost",
    "Request", "poisson_requests", "sampled_token", "Scheduler", "SchedulerConfig", "simulate", "Event", "Trace",
]
