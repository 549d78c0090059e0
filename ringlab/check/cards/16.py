"""Card 16 (Reading NCCL: is this busbw expected?): the values its text uses."""

from __future__ import annotations

from ringlab.check.cards import Ask, Slip
from ringlab.collectives.cost import bus_factor
from ringlab.nccl.tuning import algo_time, choose, comm_for_cluster, time_terms, tune
from ringlab.nccl.tuning.versions import NEWEST as NCCL_VERSION
from ringlab.topology import get_cluster

PARAMS = {"nodes": 2, "size": 8 * 2**30, "time_us": 84_000, "probe": 2**20}  # the run of notebook 16
PROBES = (2**16, 2**20, 2**24, 2**28)  # the all-reduce whose NCCL choice is asked: 64 KiB to 256 MiB
NODES = (2, 4, 8, 16)
SIZES = (2**30, 2**31, 2**32, 2**33)  # rows of `-b 8 -e 8G -f 2`: 8 x 2**k bytes

ASKS = (
    Ask("algbw_gbs", "algbw of that row", unit="B/s", show="GB/s", rel_tol=0.005),
    Ask("busbw_gbs", "busbw of that row", unit="B/s", show="GB/s", rel_tol=0.005),  # tells 2 from 2(n-1)/n at n = 128
    Ask("nccl_time_us", "the time NCCL's model expects for the probe all-reduce", unit="s", show="us", rel_tol=0.02),
)
SLIPS = (
    Slip("busbw_gbs", "wrong_two_gbs", "a factor of 2 instead of 2(n-1)/n = {factor_ar:g}"),
    Slip("busbw_gbs", "wrong_ag_gbs", "the all_gather factor (n-1)/n; all_reduce's is 2(n-1)/n = {factor_ar:g}"),
    Slip("nccl_time_us", "ring_simple_us", "Ring/Simple's time; NCCL's model picks {nccl_label} at this size"),
)


def values(nodes: int = 2, size: int = 8 * 2**30, time_us: int = 84_000, probe: int = 2**20) -> dict:
    """The ``size``-byte row of an all_reduce_perf run over ``nodes`` DGX H100 nodes that took ``time_us``:
    algbw, busbw (nccl-tests' factors, ``bus_factor``) against the rails' line rate; and NCCL's own choice
    for a ``probe``-byte all-reduce on those nodes (:mod:`ringlab.nccl.tuning`, the newest release ported)."""
    tcp_gbps = 100
    cluster = get_cluster("dgx-h100", nodes)  # the ring busbw line rate across nodes: all rails in use
    n, ceiling = cluster.world_size, cluster.node_network_bandwidth
    algbw = size / (time_us * 1e-6)
    busbw = algbw * bus_factor("all_reduce", n)
    half = cluster.nics_per_node // 2
    return {
        "nodes": nodes, "n": n, "nics": cluster.nics_per_node, "nic_gbps": cluster.nic_gbps, "size": size,
        "time_us": time_us, "time_s": time_us * 1e-6, "algbw_gbs": algbw / 1e9, "busbw_gbs": busbw / 1e9,
        "wrong_two_gbs": 2 * algbw / 1e9, "wrong_ag_gbs": algbw * bus_factor("all_gather", n) / 1e9,
        "factor_ar": bus_factor("all_reduce", n), "factor_ag": bus_factor("all_gather", n),
        "factor_bc": bus_factor("broadcast", n), "nic_gbs": cluster.nic_bandwidth / 1e9,
        "ceiling_gbs": ceiling / 1e9, "efficiency": busbw / ceiling, "half_nics": half,
        "half_ceiling_gbs": half * cluster.nic_bandwidth / 1e9, "half_efficiency": busbw / (half * cluster.nic_bandwidth),
        "tcp_gbps": tcp_gbps, "tcp_gbs": tcp_gbps / 8, "tcp_ratio": ceiling / (tcp_gbps / 8 * 1e9),
        **_nccl_choice(cluster, probe),
    }


def _nccl_choice(cluster, probe: int) -> dict:
    """NCCL's pick for a ``probe``-byte all-reduce on ``cluster``, its predicted time split into latency and
    bytes over the bandwidth it assumed, and what Ring/Simple and Tree/LL would have taken."""
    table = tune(comm_for_cluster(cluster, NCCL_VERSION).comm, NCCL_VERSION)
    c = choose(table, "all_reduce", probe)
    lat, bw = time_terms(table, "AllReduce", c.algorithm, c.protocol, probe)
    ring = algo_time(table, "AllReduce", "Ring", "Simple", probe)
    return {"probe": probe, "nccl_version": NCCL_VERSION, "nccl_label": c.label, "nccl_channels": c.channels,
            "nccl_time_us": c.time_us, "nccl_lat_us": lat, "nccl_bw_gbs": bw,
            "ring_simple_us": None if c.label == "RING/SIMPLE" else ring,
            "ring_simple_text_us": ring, "tree_ll_us": algo_time(table, "AllReduce", "Tree", "LL", probe)}


def draw(rng) -> dict:
    """A node count and row of the tuples above, and a time that puts busbw at 40-50 % of the rails (so the
    text's "half the NICs" reading lands at 80-100 %)."""
    nodes, size = int(rng.choice(NODES)), int(rng.choice(SIZES))
    cluster = get_cluster("dgx-h100", nodes)
    busbw = rng.uniform(0.41, 0.49) * cluster.node_network_bandwidth  # inside 40-50 % after rounding the time
    time_us = round(size * bus_factor("all_reduce", cluster.world_size) / busbw * 1e6)
    return {"nodes": nodes, "size": size, "time_us": time_us, "probe": int(rng.choice(PROBES))}
