"""Disaggregated serving: P prefill instances and D decode instances, the prompt's KV cache sent between them.

DistServe (Zhong et al., OSDI'24, arXiv:2401.09670) and Splitwise (Patel et al., ISCA'24, arXiv:2311.18677) run
a request's prefill on one group of GPUs and its decode on another, so long prefills no longer stall the decode
steps of other requests (TPOT) and each phase gets its own parallelism. What it costs: the prompt's whole KV cache
crosses the network once per request, and the GPUs are split. vLLM's disaggregated-prefill prototype (its docs,
"Disaggregated Prefilling (experimental)") says it does not raise throughput; whether it pays depends on the
workload, above all on prompt length against output length.

The model, per request, in order:

1. **Prefill.** Requests go to the prefill instances in turn (round-robin in arrival order). Each instance is a
   :class:`~ringlab.serving.scheduler.Scheduler` serving them with one output token: its time to first token
   is that of the whole system.
2. **KV transfer.** The prompt's KV cache on each GPU of the instance (:func:`ringlab.calc.kvcache.kv_cache_bytes`
   at the instance's TP degree, the ``calc kv`` figure) goes to the matching GPU of a decode instance, all TP GPUs
   at once. The decode instances are taken in turn, in order of prefill completion. A transfer takes
   ``bytes / rate + latency``. The rate is per GPU: over NVLink (the topology's ``gpu_bandwidth``) when both
   instances are in one node, and over the network otherwise. The network rate is the GPU's share of its node's
   NICs, capped by its PCIe path to them. Transfers from one prefill instance go one at a time, and so do
   transfers into one decode instance.
3. **Decode.** Each decode instance is a ``Scheduler(prefilled=True)``. The request arrives with its prompt plus
   the first token, and with its KV cache already computed; its remaining ``max_new_tokens - 1`` tokens are
   decoded there. A request preempted by recompute computes its context again on the decode instance.

Instances are ``tp`` GPUs inside one node (``tp`` divides ``gpus_per_node``), placed in node order: the prefill
instances first, then the decode ones. So only the instances that share a node, where the two roles meet, can use
NVLink. Colocated serving on the same GPUs is the same number of instances, each a plain ``Scheduler``, with
requests dealt round-robin (:func:`colocated`). Every instance is simulated on its own: with the routing fixed in
advance, instances do not interact. Parallel sampling (n > 1) is not modelled here.

TPOT of a disaggregated request is ``(finish - first token) / (output tokens - 1)``. Its span holds the transfer
and the queueing at the decode instance, as a client sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ringlab.calc.kvcache import kv_cache_bytes
from ringlab.serving.goodput import RateSearch, find_rate, time_scaled
from ringlab.serving.requests import HashedPrompt, Request, sampled_token
from ringlab.serving.scheduler import Scheduler, SchedulerConfig
from ringlab.serving.trace import Trace
from ringlab.topology import Cluster
from ringlab.validation import positive_int


@dataclass(frozen=True)
class Placement:
    """Where the instances sit: ``tp`` GPUs each, ``per_node`` of them in a node, ``instances`` in all."""

    tp: int
    per_node: int
    instances: int

    def node(self, instance: int) -> int:
        return instance // self.per_node


def placement(cluster: Cluster, tp: int) -> Placement:
    """Instances of ``tp`` GPUs on ``cluster``. Raises ValueError when ``tp`` does not divide ``gpus_per_node``."""
    tp = positive_int(tp, "tp")
    if cluster.gpus_per_node % tp:
        raise ValueError(f"tp={tp} must divide gpus_per_node={cluster.gpus_per_node} of {cluster.name}: an instance "
                         "is modelled inside one node")
    per_node = cluster.gpus_per_node // tp
    return Placement(tp, per_node, per_node * cluster.nodes)


def nvlink_rate(cluster: Cluster) -> float:
    """Bytes/s per direction from one GPU to another in its node: the NVSwitch port, one mesh link (one link
    joins each pair of a full mesh), or the PCIe link."""
    return cluster.gpu_bandwidth


def network_rate(cluster: Cluster) -> float:
    """Bytes/s per direction one GPU gets across nodes while every GPU of its node sends: its share of the node's
    NICs (``nics_per_node x nic_gbps / 8 / gpus_per_node``), at most its PCIe path to them."""
    share = cluster.nics_per_node * cluster.nic_gbps * 1e9 / 8 / cluster.gpus_per_node
    return min(share, cluster.pcie_bandwidth)


def kv_transfer_s(model, prompt_tokens: int, cluster: Cluster, tp: int = 1, same_node: bool = True,
                  dtype: str = "bf16") -> float:
    """Seconds to send one prompt's KV cache from a prefill instance to a decode instance: the bytes on each GPU
    (``kv_cache_bytes(model, prompt_tokens, dtype=dtype, tp=tp)``, what ``ringlab calc kv`` prints) over that
    GPU's link, all ``tp`` GPUs in parallel, plus the link's latency (``gpu_latency`` or ``nic_latency``).

    Llama-2-7B in bf16 holds 524,288 B per token: a 1,000-token prompt is 524,288,000 B, 1.17 ms over NVLink 4
    (450 GB/s per direction, 2 us) and 10.5 ms over one 400 Gb/s NIC (5 us). Raises ValueError for bad sizes."""
    size = kv_cache_bytes(model, prompt_tokens, dtype=dtype, tp=tp)
    if same_node:
        return size / nvlink_rate(cluster) + cluster.gpu_latency
    if cluster.nics_per_node == 0 or cluster.nic_gbps == 0:
        raise ValueError(f"{cluster.name} has no NIC: a transfer between nodes needs one")
    return size / network_rate(cluster) + cluster.nic_latency


@dataclass
class DisaggRun:
    """One run. ``requests``: one dict per request with ``request_id``, ``arrival_s``, ``status`` ("finished",
    "rejected" or "unfinished"), ``ttft_s``, ``tpot_s`` (None for a single output token), ``latency_s``,
    ``transfer_s`` (the KV transfer, queueing included; None when colocated or nothing was sent),
    ``output_tokens``, ``prompt_tokens``, ``preemptions`` (both roles), ``queueing_s`` (at the prefill instance);
    ``prefill``/``decode``: the instances' traces."""

    prefill_instances: int
    decode_instances: int
    requests: list[dict]
    prefill: list
    decode: list

    @property
    def trace(self) -> Trace:
        """The run as one :class:`Trace` (:meth:`Trace.combined`): its ``metrics()`` give TTFT, TPOT and goodput."""
        return Trace.combined(self.requests, [*self.prefill, *self.decode])


def _deal(requests: list[Request], k: int) -> list[list[Request]]:
    """Requests to ``k`` instances in turn, in arrival order."""
    ordered = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
    return [ordered[i::k] for i in range(k)]


def _scheduler(model, hardware, num_blocks, block_size, config, dtype, tp, prefilled=False) -> Scheduler:
    return Scheduler(model, hardware, num_blocks, block_size, config, dtype=dtype, tp=tp, prefilled=prefilled)


def _records(traces) -> dict[int, dict]:
    return {r["request_id"]: r for trace in traces for r in trace.requests}


def disaggregated(requests: list[Request], prefill_instances: int, decode_instances: int, cluster: Cluster,
                  model="llama-2-7b", hardware="h100-sxm", num_blocks: int = 2048, block_size: int = 16,
                  config: SchedulerConfig | None = None, dtype: str = "bf16", tp: int = 1) -> DisaggRun:
    """Serve ``requests`` with ``prefill_instances`` + ``decode_instances`` instances of ``tp`` GPUs on ``cluster``
    (module docstring for the model). ``num_blocks``/``block_size``: each instance's KV pool; ``config``: both
    roles' scheduler settings; ``model``/``hardware``/``dtype`` as in :class:`Scheduler`.
    Raises ValueError when the instances do not fit the cluster, for n > 1, or for the Scheduler's reasons."""
    p, d = positive_int(prefill_instances, "prefill_instances"), positive_int(decode_instances, "decode_instances")
    where = placement(cluster, tp)
    if p + d > where.instances:
        raise ValueError(f"{p} prefill + {d} decode instances of tp={tp} need {(p + d) * tp} GPUs; {cluster.name} with "
                         f"{cluster.nodes} node(s) has {cluster.nodes * cluster.gpus_per_node}")
    if any(r.n != 1 for r in requests):
        raise ValueError("disaggregated serving is modelled for n=1 requests only")
    config = config or SchedulerConfig()
    prefill_traces = []
    for batch in _deal(requests, p):
        first_only = [replace(r, max_new_tokens=1) for r in batch]
        prefill_traces.append(_scheduler(model, hardware, num_blocks, block_size, config, dtype, tp).run(first_only))
    by_id = {r.request_id: r for r in requests}
    prefilled = _records(prefill_traces)
    home = {r.request_id: i for i, batch in enumerate(_deal(requests, p)) for r in batch}
    done = sorted((rec["arrival_s"] + rec["ttft_s"], rid) for rid, rec in prefilled.items()
                  if rec["status"] == "finished" and by_id[rid].max_new_tokens > 1)
    out_free, in_free = np.zeros(p), np.zeros(d)
    to_decode: list[list[Request]] = [[] for _ in range(d)]
    sent_at: dict[int, float] = {}
    for k, (ready, rid) in enumerate(done):
        src, dst = home[rid], k % d
        same = where.node(src) == where.node(p + dst)
        start = max(ready, out_free[src], in_free[dst])
        end = start + kv_transfer_s(model, len(by_id[rid].prompt), cluster, tp, same, dtype)
        out_free[src] = in_free[dst] = end
        sent_at[rid] = end - ready
        r = by_id[rid]
        first_token = sampled_token(rid, 0, len(r.prompt))  # the token the prefill instance sampled
        prompt = r.prompt.then((first_token,)) if isinstance(r.prompt, HashedPrompt) else (*r.prompt, first_token)
        to_decode[dst].append(Request(rid, end, prompt, r.max_new_tokens - 1))  # a trace's prompt is not listed
    decode_traces = [_scheduler(model, hardware, num_blocks, block_size, config, dtype, tp, prefilled=True).run(batch)
                     if batch else None for batch in to_decode]
    decoded = _records(t for t in decode_traces if t is not None)
    rows = []
    for r in sorted(requests, key=lambda r: r.request_id):
        first = prefilled[r.request_id]
        row = dict(first, tpot_s=None, transfer_s=sent_at.get(r.request_id))
        if first["status"] == "finished" and r.max_new_tokens > 1:
            second = decoded[r.request_id]
            row["status"], row["output_tokens"] = second["status"], 1 + second["output_tokens"]
            row["preemptions"] += second["preemptions"]
            if second["status"] == "finished":
                finish = second["arrival_s"] + second["latency_s"]
                row["latency_s"] = finish - r.arrival_s
                row["tpot_s"] = (row["latency_s"] - first["ttft_s"]) / (r.max_new_tokens - 1)
            else:
                row["latency_s"] = None
        rows.append(row)
    return DisaggRun(p, d, rows, prefill_traces, [t for t in decode_traces if t is not None])


def colocated(requests: list[Request], instances: int, model="llama-2-7b", hardware="h100-sxm",
              num_blocks: int = 2048, block_size: int = 16, config: SchedulerConfig | None = None,
              dtype: str = "bf16", tp: int = 1) -> Trace:
    """The baseline on the same GPUs: ``instances`` plain :class:`Scheduler` instances (prefill and decode mixed
    in each), requests dealt in turn in arrival order; one :class:`Trace` for them all (:meth:`Trace.combined`).
    Raises ValueError as :class:`Scheduler` does."""
    k = positive_int(instances, "instances")
    parts = [_scheduler(model, hardware, num_blocks, block_size, config, dtype, tp).run(batch)
             for batch in _deal(requests, k) if batch]
    rows = sorted((r for part in parts for r in part.requests), key=lambda r: r["request_id"])
    return Trace.combined(rows, parts)


@dataclass(frozen=True)
class Split:
    """One way to use the instances: ``prefill`` + ``decode`` of them (0 + 0: colocated), ``goodput`` the highest
    arrival rate (requests/s) whose p99 TTFT and p99 TPOT meet the SLAs (None: none tried does), and ``search``,
    the :class:`~ringlab.serving.goodput.RateSearch` that found it (every run, the bracket)."""

    prefill: int
    decode: int
    goodput: float | None
    search: RateSearch

    @property
    def label(self) -> str:
        return "colocated" if not self.prefill else f"{self.prefill}P:{self.decode}D"


def best_split(requests: list[Request], cluster: Cluster, sla_ttft: float, sla_tpot: float, tp: int = 1,
               model="llama-2-7b", hardware="h100-sxm", num_blocks: int = 2048, block_size: int = 16,
               config: SchedulerConfig | None = None, dtype: str = "bf16", resolution: float = 0.05,
               max_runs: int = 16) -> list[Split]:
    """Every split of the cluster's instances (``P + D = instances``, P from 1 to instances - 1) and colocated
    serving on the same GPUs, each with its goodput: the highest rate at which ``requests``, replayed faster or
    slower (:func:`~ringlab.serving.goodput.time_scaled`), still meet the p99 SLAs ``sla_ttft``/``sla_tpot``
    (seconds), found by :func:`~ringlab.serving.goodput.find_rate` (DistServe's measure, arXiv:2401.09670,
    with p99s as the criterion). Best first; ties go to colocated, then to fewer prefill instances.
    ``resolution``/``max_runs``: each search's. Raises ValueError as :func:`disaggregated` and
    :func:`~ringlab.serving.goodput.find_rate` do, or when the cluster holds fewer than two instances."""
    n = placement(cluster, tp).instances
    if n < 2:
        raise ValueError(f"{cluster.name} with {cluster.nodes} node(s) holds {n} instance(s) of tp={tp}: "
                         "disaggregation needs at least two")
    common = dict(model=model, hardware=hardware, num_blocks=num_blocks, block_size=block_size, config=config,
                  dtype=dtype, tp=tp)
    make = time_scaled(requests)
    start = (len(requests) - 1) / max(r.arrival_s for r in requests)  # the trace's own rate (time_scaled's base)

    def run_split(p: int):
        if not p:
            return lambda batch: colocated(batch, n, **common)
        return lambda batch: disaggregated(batch, p, n - p, cluster, **common).trace

    out = []
    for p in range(n):
        search = find_rate(make, run_split(p), sla_ttft, sla_tpot, start_rate=start, resolution=resolution,
                           max_runs=max_runs)
        out.append(Split(p, n - p if p else 0, search.rate, search))
    return sorted(out, key=lambda s: (-(s.goodput or 0.0), s.prefill))
