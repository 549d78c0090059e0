"""Card 19 (Downloading a sharded checkpoint): shard counts, per-connection and link caps, and the checkpoint
on a thousand nodes; fresh caps and sizes from ``draw``."""

from __future__ import annotations

import math

from ringlab.calc.download import LLAMA3_405B_BYTES, Caps, checkpoint_distribution, simulate_fetch, steady_throughput
from ringlab.check.cards import Ask, Slip

PARAMS = {"shards": 64, "shard_gb": 5, "conn_mbs": 100, "link_gbps": 25, "k_small": 8, "k_big": 48}
SHARDS = (32, 48, 64, 96, 128)
SHARD_GB = (2, 4, 5, 10)
CONN_MBS = (50, 100, 200)  # what one TCP stream gets over a long round trip
LINK_GBPS = (10, 25, 40, 100)

ASKS = (
    Ask("t_small", "time to fetch every shard at the smaller K", unit="s", show="s"),
    Ask("t_big", "time to fetch every shard at the larger K", unit="s", show="s"),
    Ask("k_fill", "smallest K whose streams fill the link", unit="1", rel_tol=0.0, noun="connection"),
)
SLIPS = (
    Slip("t_small", "link_s", "the link's rate, total / link: {k_small} streams of {conn_mbs} MB/s carry only "
         "{small_rate_gbs:.2f} GB/s, below the link's {link_gbs:.4g} GB/s"),
    Slip("t_small", "one_conn_s", "one connection at a time: with K = {k_small} there are {k_small} streams"),
    Slip("t_big", "link_s", "the link full to the end, total / link: the last wave has only {tail} shards, "
         "{tail} streams of {conn_mbs} MB/s = {tail_rate_gbs:.2f} GB/s"),
    Slip("k_fill", "k_fill_down", "rounded down: {k_fill_down} streams carry {k_fill_down_gbs:.3g} GB/s, short of "
         "the link's {link_gbs:.4g} GB/s"),
)


def values(shards: int = 64, shard_gb: float = 5, conn_mbs: float = 100, link_gbps: float = 25, k_small: int = 8,
           k_big: int = 48) -> dict:
    """``shards`` shards of ``shard_gb`` GB fetched over K connections of at most ``conn_mbs`` MB/s each through a
    ``link_gbps`` Gb/s link (:func:`ringlab.calc.download.simulate_fetch`, equal shares of the link, a new shard
    as soon as a slot frees); then the 405B checkpoint on 1,024 nodes (:func:`checkpoint_distribution`)."""
    size, conn, link = shard_gb * 1e9, conn_mbs * 1e6, link_gbps * 1e9 / 8
    caps = Caps(per_connection=conn, link=link)
    sizes = [size] * shards
    k_fill = next(k for k in range(1, 10 * shards) if steady_throughput(k, caps) >= link * (1 - 1e-12))
    tail = shards % k_big or k_big
    dist = checkpoint_distribution(storage_bandwidth=100e9)
    return {
        "shards": shards, "shard_gb": shard_gb, "conn_mbs": conn_mbs, "link_gbps": link_gbps, "k_small": k_small,
        "k_big": k_big, "total_gb": shards * shard_gb, "link_gbs": link / 1e9, "shard_s": size / conn,
        "t_small": simulate_fetch(sizes, k_small, caps).finished, "waves_small": math.ceil(shards / k_small),
        "small_rate_gbs": steady_throughput(k_small, caps) / 1e9,
        "t_big": simulate_fetch(sizes, k_big, caps).finished, "tail": tail,
        "big_share_mbs": caps.stream_rate(k_big) / 1e6,
        "first_wave_s": size / caps.stream_rate(k_big), "tail_s": size / caps.stream_rate(tail),
        "tail_rate_gbs": steady_throughput(tail, caps) / 1e9,
        "k_fill": k_fill, "t_fill": simulate_fetch(sizes, k_fill, caps).finished,
        "k_fill_down": k_fill - 1, "k_fill_down_gbs": (k_fill - 1) * conn / 1e9,
        "link_s": shards * size / link, "one_conn_s": shards * size / conn,
        "ckpt_gb": LLAMA3_405B_BYTES / 1e9, "storage_gbs": 100, "group": dist.nodes // dist.replicas,
        "nodes": dist.nodes, "replicas": dist.replicas, "replicas1": dist.replicas - 1, "per_node_gb": dist.bytes_per_node / 1e9,
        "direct_tb": dist.direct_bytes / 1e12, "direct_s": dist.direct_s, "read_once_s": dist.read_once_s,
        "broadcast_s": dist.broadcast_s, "per_gpu_gb": dist.broadcast_bytes_per_gpu / 1e9, "staged_s": dist.staged_s,
        "speedup": dist.speedup,
    }


def draw(rng) -> dict:
    """Shards, sizes, a per-connection cap and a link from the tuples above; K small enough that the
    connections, not the link, bind; K large enough to fill the link and above half the shards, so that one
    full wave shares the link and the last, partial one runs below it."""
    while True:
        shards, conn, link = int(rng.choice(SHARDS)), float(rng.choice(CONN_MBS)), float(rng.choice(LINK_GBPS))
        fill = math.ceil(link * 1e9 / 8 / (conn * 1e6) - 1e-9)
        small = [k for k in (2, 4, 8, 16) if k * conn * 1e6 < link * 1e9 / 8 and k < shards]
        # one full wave then a partial one: K above half the shards
        big = [k for k in range(max(fill, shards // 2) + 1, shards) if (shards % k) * conn * 1e6 < link * 1e9 / 8]
        size = float(rng.choice(SHARD_GB)) * 1e9
        # the last wave must cost visibly more than the link's floor (10 %), else the slip is within tolerance
        big = [k for k in big if k * size / (link * 1e9 / 8) + size / (conn * 1e6) >= 1.1 * shards * size / (link * 1e9 / 8)]
        if small and big and fill < shards:
            return {"shards": shards, "shard_gb": size / 1e9, "conn_mbs": conn, "link_gbps": link,
                    "k_small": int(rng.choice(small)), "k_big": int(rng.choice(big))}
