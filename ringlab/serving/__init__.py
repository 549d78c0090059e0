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
- :func:`load_trace` / :func:`trace_requests` (``traces``): Azure's and Mooncake's production traces replayed,
  prompts as :class:`HashedPrompt` (``requests``) so equal hash ids share prefix blocks.
- :func:`prefix_hit_curve` (``prefix_hits``): prefix-cache hit rate against pool size on a trace's block hashes,
  under either free-block policy (``BlockManager(policy="vllm-v1")`` or the default ``"uncached-first"``);
  :func:`hits_per_request`: each request's hits under vLLM v1's policy.
- :func:`find_rate` (``goodput``): the highest arrival rate whose p99 TTFT and TPOT meet an SLA; goodput
  itself is :meth:`Trace.metrics` with ``sla_ttft`` / ``sla_tpot``.
- :func:`disaggregated` / :func:`colocated` / :func:`best_split` (``disagg``): prefill and decode on separate
  instances, each prompt's KV cache sent over NVLink or the network, against colocated serving.
"""

from ringlab.serving.blocks import (BlockManager, CacheLayout, InvariantError, OutOfBlocksError, block_bytes,
                                    cache_layout, pool_blocks, sequence_kv_bytes)
from ringlab.serving.cost import StepCost, SwapOrRecompute, host_link, swap_or_recompute
from ringlab.serving.disagg import best_split, colocated, disaggregated, kv_transfer_s
from ringlab.serving.goodput import find_rate, time_scaled
from ringlab.serving.prefix_hits import hits_per_request, infinite_cache_hit_rate, prefix_hit_curve
from ringlab.serving.requests import HashedPrompt, Request, poisson_requests, sampled_token
from ringlab.serving.scheduler import Scheduler, SchedulerConfig, simulate
from ringlab.serving.trace import Event, Trace
from ringlab.serving.traces import TraceRequest, load_trace, trace_requests

__all__ = [
    "BlockManager", "CacheLayout", "InvariantError", "OutOfBlocksError", "block_bytes", "cache_layout", "pool_blocks",
    "sequence_kv_bytes",
    "StepCost", "SwapOrRecompute", "host_link", "swap_or_recompute",
    "Request", "poisson_requests", "sampled_token", "Scheduler", "SchedulerConfig", "simulate", "Event", "Trace",
    "HashedPrompt", "TraceRequest", "load_trace", "trace_requests",
    "best_split", "colocated", "disaggregated", "kv_transfer_s", "find_rate", "time_scaled",
    "hits_per_request", "infinite_cache_hit_rate", "prefix_hit_curve",
]
