"""Card 18 (Exposed communication of DDP's gradient buckets): the values its text uses, and fresh bucket shapes."""

from __future__ import annotations

from ringlab.calc.training.timeline import (
    LayerCost,
    TensorParallel,
    bucket_step,
    collective_time,
    ddp_buckets,
    ddp_step,
    fsdp_step,
    model_layer_costs,
)
from ringlab.check.cards import Ask, Slip
from ringlab.topology import get_cluster

PARAMS = {"k": 8, "backward_ms": 2.0, "fast_ms": 1.5, "slow_ms": 3.0}  # notebook 18's interview question
BUCKETS = (4, 6, 8, 12, 16)
BACKWARD_MS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)  # backward compute per bucket

ASKS = (
    Ask("exposed_fast", "exposed communication when each all-reduce is the shorter time", unit="s", show="ms",
        world_size="k", per="bucket"),
    Ask("exposed_slow", "exposed communication when each all-reduce is the longer time", unit="s", show="ms",
        world_size="k", per="bucket"),
)
_ALL = "all of it, k x a: the buckets before the last overlap the backward"
SLIPS = (
    Slip("exposed_fast", "wrong_fast_all_ms", _ALL),
    Slip("exposed_fast", "wrong_zero_ms", "nothing: the last bucket is complete only when the backward ends, and no "
         "compute follows it to hide its all-reduce"),
    Slip("exposed_slow", "wrong_all_ms", _ALL),
    Slip("exposed_slow", "wrong_cover_ms", "what compute cannot cover, k x (a - c): the last bucket can never hide"),
    Slip("exposed_slow", "slow_ms", "only the last bucket's all-reduce: the stream falls {excess_ms:.1f} ms behind "
         "per bucket, and the backlog shows too"),
)


def values(k: int = 8, backward_ms: float = 2.0, fast_ms: float = 1.5, slow_ms: float = 3.0) -> dict:
    """``k`` equal buckets of ``backward_ms`` backward compute each, all-reduced in ``fast_ms`` or ``slow_ms``
    (``bucket_step``); then notebook 18's fixed 8-layer model under DDP and FSDP (``ddp_step``, ``fsdp_step``),
    with tensor parallelism, and Llama-3-8B on 64 H100s, 8 DGX H100 nodes (``model_layer_costs``; its
    collectives run as NCCL-style rings over every NIC of the ``dgx-h100`` preset, not one link per rank)."""
    c, fast, slow = backward_ms / 1e3, fast_ms / 1e3, slow_ms / 1e3
    t_fast = bucket_step([c] * k, [fast] * k)
    t_slow = bucket_step([c] * k, [slow] * k)
    hidden = [t_fast.exposed()[f"bucket {i}"] for i in range(k - 1)]

    # notebook 18: 8 layers of 1 ms forward, 2 ms backward and 50 MiB of bf16 gradients, 8 ranks on NDR
    layers = [LayerCost(f"layer {i}", 1e-3, 2e-3, 50 * 2**20) for i in range(8)]
    one = ddp_step(layers, 8, "ib-ndr", bucket_cap_mb=1e6, first_bucket_mb=None)
    bucketed = ddp_step(layers, 8, "ib-ndr")
    fsdp = fsdp_step(layers, 8, "ib-ndr")
    lazy = fsdp_step(layers, 8, "ib-ndr", forward_prefetch=False, backward_prefetch=False)
    tp = TensorParallel(size=8, message_bytes=4096 * 4096 * 2, fabric="nvlink4")  # 4,096 tokens x hidden 4,096, bf16
    tp_step = ddp_step(layers, 8, "ib-ndr", tp=tp)
    with_tp, tp_total = tp_step.exposed_by_label(), tp_step.comm_time(stream="tp")

    costs = model_layer_costs("llama-3-8b", seq_len=4096, micro_batch=1, hardware="h100-sxm", efficiency=0.5)
    n = 64  # data-parallel ranks of the large run: 8 DGX H100 nodes
    cluster = get_cluster("dgx-h100", n // 8)
    big = ddp_step(costs, n, cluster)
    grad_bytes = sum(x.grad_bytes for x in costs)
    tail = [name for name, seconds in big.exposed().items() if seconds > 0]  # the buckets that show
    return {
        "k": k, "k1": k - 1, "backward_ms": backward_ms, "fast_ms": fast_ms, "slow_ms": slow_ms,
        "exposed_fast": t_fast.exposed_total() * 1e3, "exposed_slow": t_slow.exposed_total() * 1e3,
        "hidden_max_ms": max(hidden) * 1e3, "backward_total_ms": k * backward_ms,
        "step_fast_ms": t_fast.step_time * 1e3, "step_slow_ms": t_slow.step_time * 1e3,
        "excess_ms": slow_ms - backward_ms, "slack_ms": backward_ms - fast_ms,
        "wrong_all_ms": k * slow_ms, "wrong_cover_ms": k * (slow_ms - backward_ms),
        "wrong_fast_all_ms": k * fast_ms, "wrong_zero_ms": 0.0,
        "demo_ar_ms": bucketed.comm_time() / 8 * 1e3, "demo_gb": one.bytes_sent() / 1e9,
        "demo_fsdp_gb": fsdp.bytes_sent() / 1e9, "demo_ratio": fsdp.bytes_sent() / one.bytes_sent(),
        "one_step_ms": one.step_time * 1e3, "one_exposed_ms": one.exposed_total() * 1e3,
        "bucketed_step_ms": bucketed.step_time * 1e3, "bucketed_exposed_ms": bucketed.exposed_total() * 1e3,
        "fsdp_step_ms": fsdp.step_time * 1e3, "fsdp_exposed_ms": fsdp.exposed_total() * 1e3,
        "lazy_step_ms": lazy.step_time * 1e3, "lazy_exposed_ms": lazy.exposed_total() * 1e3,
        "tp_exposed_ms": with_tp["tp all_reduce"] * 1e3, "tp_total_ms": tp_total * 1e3,
        "tp_share": with_tp["tp all_reduce"] / tp_total, "tp_dp_exposed_ms": with_tp["dp all_reduce"] * 1e3,
        "latency_ms": collective_time("all_reduce", 0, n, cluster) * 1e3,
        "big_n": n, "big_n1": n - 1, "ring_steps": 2 * (n - 1),
        "big_backward_ms": sum(x.backward_s for x in costs) * 1e3,
        "big_grad_gb": grad_bytes / 1e9, "big_buckets": len(ddp_buckets(costs)),
        "big_step_ms": big.step_time * 1e3, "big_exposed_ms": big.exposed_total() * 1e3,
        "big_nodes": cluster.nodes, "big_nics": cluster.nics_per_node, "big_nic_gbps": cluster.nic_gbps,
        "big_nic_gbs": cluster.nic_bandwidth / 1e9,
        "big_allreduce_ms": collective_time("all_reduce", grad_bytes, n, cluster) * 1e3, "big_tail": len(tail),
    }


def draw(rng) -> dict:
    """k from :data:`BUCKETS`, a backward time from :data:`BACKWARD_MS`, and two all-reduce times to 0.1 ms: one
    50-90 % of the backward (it hides), one 125-200 % of it (the stream falls behind)."""
    c = float(rng.choice(BACKWARD_MS))
    fast = round(c * rng.uniform(0.5, 0.9), 1)
    slow = round(c * rng.uniform(1.25, 2.0), 1)
    return {"k": int(rng.choice(BUCKETS)), "backward_ms": c, "fast_ms": fast, "slow_ms": slow}
