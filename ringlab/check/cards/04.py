"""Card 04 (Gradient traffic: DDP vs FSDP): the values its text uses, and fresh models and world sizes."""

from __future__ import annotations

from ringlab.calc import GB, GiB, bus_bandwidth, get_model, grad_comm_bytes
from ringlab.check.cards import Ask, Slip
from ringlab.collectives.cost import LINKS
from ringlab.topology import get_cluster

PARAMS = {"n_params": 7_000_000_000, "n": 64, "meas_s": 0.6}  # the fixed card; 0.6 s an assumed measured time
MODELS = ("llama-2-7b", "llama-3-8b", "mistral-7b", "llama-2-13b", "llama-3-70b")  # real configs, >= 5e9 params
WORLD_SIZES = (16, 32, 64, 128, 256)  # 2 to 32 DGX H100 nodes of 8 GPUs

ASKS = (
    Ask("ddp_bytes", "bytes each GPU sends per step with DDP", unit="B", show="B", world_size="n"),
    Ask("fsdp_bytes", "bytes each GPU sends per step with FSDP FULL_SHARD", unit="B", show="B", world_size="n"),
)
SLIPS = (
    Slip("ddp_bytes", "ag_bytes", "one phase counted: a ring all-reduce is a reduce-scatter plus an all-gather, "
         "2(N-1)/N x M"),
    Slip("fsdp_bytes", "sgo_bytes", "one all-gather counted, as SHARD_GRAD_OP / ZeRO-2 does; FULL_SHARD frees the "
         "gathered parameters after forward and gathers them again in backward"),
)


def values(n_params: int = 7_000_000_000, n: int = 64, meas_s: float = 0.6) -> dict:
    """DDP, FULL_SHARD, SHARD_GRAD_OP and HYBRID_SHARD traffic of ``n_params`` bf16 parameters on ``n`` GPUs
    (``n // 8`` DGX H100 nodes); ``meas_s`` is the measured all-reduce time of the follow-up."""
    ddp, fsdp, sgo = (grad_comm_bytes(s, n_params, n) for s in ("ddp", "fsdp_full_shard", "fsdp_shard_grad_op"))
    hsdp = grad_comm_bytes("hybrid_shard", n_params, n, gpus_per_node=8)
    m = ddp.message_bytes
    ndr = LINKS["ib-ndr"]  # the wrong picture: one 400 Gb/s port per GPU carrying all of its ring traffic
    cluster = get_cluster("dgx-h100", n // 8)
    seconds = meas_s
    algbw = m / seconds
    healthy = cluster.node_network_bandwidth  # ring busbw at line rate across DGX H100 nodes: 8 rails x 50 GB/s
    return {
        "n_params": int(n_params), "n": n, "n1": n - 1, "m": m, "m_gb": m / GB, "m_gib": m / GiB,
        "ddp_bytes": ddp.bytes_sent_per_rank, "ddp_gb": ddp.bytes_sent_per_rank / GB,
        "ag_bytes": fsdp.breakdown[0].bytes_sent, "fsdp_bytes": fsdp.bytes_sent_per_rank,
        "fsdp_gb": fsdp.bytes_sent_per_rank / GB, "sgo_bytes": sgo.bytes_sent_per_rank,
        "ratio": fsdp.bytes_sent_per_rank / ddp.bytes_sent_per_rank,
        "ddp_mem_gb": ddp.memory.total / GB, "fsdp_mem_gb": fsdp.memory.total / GB,
        "sgo_mem_gb": sgo.memory.total / GB,
        "nodes": cluster.nodes, "nics": cluster.nics_per_node, "nic_gbps": cluster.nic_gbps,
        "link_gbs": ndr.bandwidth / GB, "node_gbs": healthy / GB, "nvlink_gbs": cluster.gpu_bandwidth / GB,
        "wrong_ddp_s": ddp.time(ndr), "wrong_fsdp_s": fsdp.time(ndr),
        "ddp_ms": ddp.time_on_cluster(cluster) * 1e3, "fsdp_ms": fsdp.time_on_cluster(cluster) * 1e3,
        "hsdp_ms": hsdp.time_on_cluster(cluster) * 1e3,
        "meas_s": seconds, "algbw_gbs": algbw / GB,
        "busbw_gbs": bus_bandwidth("all_reduce", m, seconds, n) / GB,
        "busbw_frac": bus_bandwidth("all_reduce", m, seconds, n) / healthy,
        "wrong_frac": bus_bandwidth("all_reduce", m, seconds, n) / ndr.bandwidth,
    }


def draw(rng) -> dict:
    """A model of :data:`MODELS` (its exact parameter count), a world size of :data:`WORLD_SIZES`, and a
    measured all-reduce time at 9-12 % of the rails' busbw (the unhealthy run of the follow-up)."""
    n_params = get_model(str(rng.choice(MODELS))).param_count()
    n = int(rng.choice(WORLD_SIZES))
    healthy = get_cluster("dgx-h100", n // 8).node_network_bandwidth
    busbw_at_1s = bus_bandwidth("all_reduce", 2 * n_params, 1.0, n)  # busbw scales as 1 / time
    meas_s = round(busbw_at_1s / (healthy * rng.uniform(0.09, 0.12)), 2)
    return {"n_params": int(n_params), "n": n, "meas_s": meas_s}
