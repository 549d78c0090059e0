"""``plan_serve``: the cheapest serving configuration (in GPUs) that meets a TTFT and TPOT SLA, and the runner-up.

A configuration is a tensor-parallel degree ``tp`` (GPUs per replica), a batch limit (``max_num_seqs``),
chunked prefill off or on with a chunk (``max_num_batched_tokens``), and a number of ``replicas``; the
KV pool of a replica is every block that fits next to its weights (:func:`ringlab.calc.max_cached_tokens`
at vLLM's ``gpu_memory_utilization`` 0.9). Each is served by :class:`ringlab.serving.Scheduler` (paged KV
blocks, continuous batching, step times from the decode roofline with TP all-reduces on NVLink) on its
share of the requests: requests go round-robin to the replicas, so a replica sees every ``replicas``-th
arrival. Colocated prefill and decode only: disaggregated serving (prefill and decode on separate GPUs)
is not modelled by :mod:`ringlab.serving`, and is reported as such.

The SLA is met when the p99 TTFT and the p99 TPOT of the finished requests are within their limits and
every request finishes (none rejected, no livelock, no truncated run). The search is bounded: ``tp`` in
1, 2, 4, 8 (those that divide the heads and leave room for KV), batch limits :data:`BATCH_LIMITS`, chunks
:data:`CHUNKS`, and for each, the fewest replicas that meet the SLA found by doubling then bisecting
(assumed monotone: more replicas never serve a request later), up to :data:`MAX_REPLICAS` or one request
per replica; at most :data:`MAX_PLAN_REQUESTS` requests. The cheapest
counts GPUs (``tp x replicas``), ties broken by the lower p99 TTFT.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field

from ringlab.calc.hardware import get_hardware
from ringlab.calc.kvcache import kv_cache_bytes_per_token, max_cached_tokens
from ringlab.calc.models import get_model
from ringlab.calc.parsing import check_real
from ringlab.serving import Request, Scheduler, SchedulerConfig
from ringlab.serving.scheduler import over_context
from ringlab.serving.blocks import pool_blocks
from ringlab.serving.goodput import meets_p99

TP_DEGREES = (1, 2, 4, 8)
BATCH_LIMITS = (64, 256)
CHUNKS = (None, 2048)  # None: prefill in one step (budget 8,192 tokens); else chunked prefill of that many
MAX_REPLICAS = 64
MAX_PLAN_REQUESTS = 1000
BLOCK_SIZE = 16
WHOLE_PROMPT_BUDGET = 8192


@dataclass(frozen=True)
class ServeConfig:
    """One serving configuration (module docstring); ``chunk`` None means prefill in one step."""

    tp: int
    max_num_seqs: int
    chunk: int | None
    replicas: int
    blocks: int

    @property
    def gpus(self) -> int:
        return self.tp * self.replicas

    def describe(self) -> str:
        prefill = f"chunked prefill {self.chunk}" if self.chunk else "whole-prompt prefill"
        return (f"TP {self.tp} x {self.replicas} replicas = {self.gpus} GPUs; batch limit {self.max_num_seqs}, "
                f"{prefill}, {self.blocks:,} KV blocks of {BLOCK_SIZE} per replica, colocated")


@dataclass(frozen=True)
class ServeResult:
    """A configuration and what its busiest replica measured (``metrics``: :meth:`ringlab.serving.Trace.metrics`)."""

    config: ServeConfig
    metrics: dict
    meets_sla: bool


@dataclass
class ServePlan:
    """The cheapest configuration meeting the SLA (``best``), the ``runner_up`` (next cheapest of another
    TP degree, batch limit or chunk), every configuration's fewest replicas (``tried``), and ``notes``."""

    best: ServeResult | None
    runner_up: ServeResult | None
    tried: list[ServeResult] = field(default_factory=list)
    simulations: int = 0
    notes: list[str] = field(default_factory=list)


def plan_serve(model, hardware, requests: list[Request], sla_ttft: float, sla_tpot: float,
               dtype: str = "bf16") -> ServePlan:
    """Search the configurations of the module docstring for ``requests`` (a trace: ``poisson_requests`` or
    read from a file). ``sla_ttft`` / ``sla_tpot``: p99 limits in seconds (> 0). Raises ValueError naming the
    argument for an empty trace, a request longer than the model's context (``max_position_embeddings``: the
    scheduler would reject it at any configuration) or bad limits, and when no TP degree fits the weights."""
    model, hw = get_model(model), get_hardware(hardware)
    ttft = check_real(sla_ttft, "sla_ttft", min=1e-6, max=3600.0)
    tpot = check_real(sla_tpot, "sla_tpot", min=1e-6, max=3600.0)
    if not requests:
        raise ValueError("requests: the trace is empty")
    if len(requests) > MAX_PLAN_REQUESTS:
        raise ValueError(f"requests: {len(requests):,} in the trace, above {MAX_PLAN_REQUESTS:,}: the search runs the "
                         "scheduler a few hundred times; give a shorter trace (fewer --seconds or a lower --rate)")
    requests = sorted(requests, key=lambda r: r.arrival_s)
    too_long = [(r, why) for r in requests if (why := over_context(r, model))]  # rejected at every configuration
    if too_long:
        r, why = too_long[0]
        raise ValueError(f"requests: {len(too_long):,} of {len(requests):,} are longer than {model.name}'s context "
                         f"(request {r.request_id}: {why}), so no configuration serves them all; choose a model "
                         "with a longer context or shorter requests")
    plan = ServePlan(None, None, notes=[
        "colocated prefill and decode only: disaggregated serving is not modelled by ringlab.serving",
        "requests go round-robin to the replicas; the SLA is the p99 TTFT and p99 TPOT of the busiest replica"])
    cache: dict = {}

    def run(tp, seqs, chunk, replicas, blocks) -> ServeResult:
        key = (tp, seqs, chunk, replicas)
        if key not in cache:
            budget = chunk or WHOLE_PROMPT_BUDGET
            config = SchedulerConfig(max_num_batched_tokens=budget, max_num_seqs=seqs, chunked_prefill=chunk is not None)
            worst = None
            for start in range(min(replicas, 2)):  # round-robin shares differ by one request: the first two
                share = requests[start::replicas]
                if not share:
                    continue
                scheduler = Scheduler(model, hw, blocks, BLOCK_SIZE, config, enable_prefix_caching=True,
                                      dtype=dtype, tp=tp)
                m = scheduler.run(share).metrics()
                plan.simulations += 1
                if worst is None or not meets_p99(m, ttft, tpot) or (m["ttft_p99_s"] or 0) > (worst["ttft_p99_s"] or 0):
                    worst = m
                if not meets_p99(m, ttft, tpot):
                    break
            cache[key] = ServeResult(ServeConfig(tp, seqs, chunk, replicas, blocks), worst, meets_p99(worst, ttft, tpot))
        return cache[key]

    for tp in TP_DEGREES:
        try:
            tokens = max_cached_tokens(model, hw, dtype, tp=tp, block_size=BLOCK_SIZE)
        except ValueError as e:
            plan.notes.append(f"TP {tp} refused: {e}")
            continue
        if tokens == 0:
            plan.notes.append(f"TP {tp}: the weights leave no room for KV cache on {hw.name}")
            continue
        blocks = pool_blocks(tokens * kv_cache_bytes_per_token(model, dtype, tp), model, BLOCK_SIZE, dtype)
        for seqs in BATCH_LIMITS:
            for chunk in CHUNKS:
                low, high = 0, 1
                while high <= MAX_REPLICAS and not run(tp, seqs, chunk, high, blocks).meets_sla:
                    if high >= len(requests):  # one request per replica already: more replicas change nothing
                        high = MAX_REPLICAS + 1
                        break
                    low, high = high, high * 2
                if high > MAX_REPLICAS:
                    continue
                while high - low > 1:  # fewest replicas: low fails, high meets
                    mid = (low + high) // 2
                    low, high = (low, mid) if run(tp, seqs, chunk, mid, blocks).meets_sla else (mid, high)
                plan.tried.append(run(tp, seqs, chunk, high, blocks))
    ranked = sorted(plan.tried, key=lambda r: (r.config.gpus, r.metrics["ttft_p99_s"], r.config.tp,
                                              r.config.max_num_seqs, r.config.chunk or 0))
    if ranked:
        plan.best = ranked[0]
        plan.runner_up = next((r for r in ranked[1:] if r.config.gpus > plan.best.config.gpus
                               or r.config.tp != plan.best.config.tp), None)
    return plan


TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")
MAX_TRACE_REQUESTS = 100_000


def read_trace(path) -> list[Request]:
    """Requests from a CSV file with the header ``arrival_s,prompt_tokens,output_tokens`` (seconds, then token
    counts >= 1), one request per line. Prompts get distinct token ids (no shared prefix). Raises ValueError
    naming the file, the line and the column for anything else, and for more than 100,000 requests."""
    out: list[Request] = []
    with open(path, newline="") as f:
        reader = csv.reader(f)
        head = next(reader, None)
        if head is None or tuple(h.strip() for h in head) != TRACE_COLUMNS:
            raise ValueError(f"{path}: the first line must be the header {','.join(TRACE_COLUMNS)}, got {head!r}")
        for line, row in enumerate(reader, start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 3:
                raise ValueError(f"{path}, line {line}: expected 3 values ({','.join(TRACE_COLUMNS)}), got {len(row)}")
            try:
                arrival = float(row[0])
                prompt, output = int(row[1]), int(row[2])
            except ValueError:
                raise ValueError(f"{path}, line {line}: arrival_s must be a number and the token counts integers, "
                                 f"got {row!r}") from None
            if not (0 <= arrival < 1e7) or not 1 <= prompt <= 10**6 or not 1 <= output <= 10**6:
                raise ValueError(f"{path}, line {line}: need 0 <= arrival_s < 1e7 and token counts 1..1,000,000, "
                                 f"got {row!r}")
            rid = len(out)
            out.append(Request(rid, arrival, tuple((rid << 20) + i for i in range(prompt)), output))
            if len(out) > MAX_TRACE_REQUESTS:
                raise ValueError(f"{path}: more than {MAX_TRACE_REQUESTS:,} requests; cut the trace")
    if not out:
        raise ValueError(f"{path}: no requests after the header")
    return out
