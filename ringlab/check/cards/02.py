"""Card 02 (Concepts behind the collectives): the values its text uses."""

from __future__ import annotations

from ringlab.collectives.cost import alpha_beta_time, busiest_bytes, crossover, latency_terms, single_gpu_hosts
from ringlab.topology import build_on_cluster, cost_of, get_cluster, linear_time
from ringlab.topology.algorithms import TREE_PIECES


def values() -> dict:
    n, m = 8, 2**30
    ratio = {f"{c}_{a}": busiest_bytes(c, a, n, m) / m for c, a in (
        ("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring"), ("broadcast", "binomial_tree"),
        ("broadcast", "scatter_allgather"), ("reduce", "binomial_tree"), ("all_to_all", "pairwise"),
        ("all_reduce", "double_binary_tree"))}
    # The flat model's own machine: every rank a host with one GPU and one NDR port, so any N is physical.
    ib = single_gpu_hosts("ib-ndr")
    big_n, small, large = 64, 2**20, 2**30
    sizes = (("small", small), ("large", large))
    times = {f"{a}_{tag}": alpha_beta_time("all_reduce", a, big_n, size, ib) * 1e3
             for a in ("ring", "double_binary_tree") for tag, size in sizes}
    # The same 64 GPUs as 8 DGX H100 nodes: NVLink inside, 8 NICs on their own rails (ringlab.topology).
    dgx = get_cluster("dgx-h100", big_n // 8)
    ring, tree = (build_on_cluster("all_reduce", a, dgx) for a in ("ring_channels", "tree_chains"))
    dgx_times = {f"dgx_{name}_{tag}": cost_of(sched, dgx, size).seconds * 1e3
                 for name, sched in (("ring", ring), ("tree", tree)) for tag, size in sizes}
    (ring_a, ring_b, _), (tree_a, tree_b, tree_line) = linear_time(ring, dgx), linear_time(tree, dgx)
    return {
        "n": n, **ratio, "ib_dir": ib.bandwidth / 1e9,
        "ib_alpha_us": ib.alpha * 1e6, "big_n": big_n, "ring_steps": latency_terms("all_reduce", "ring", big_n),
        "small_mib": small / 2**20, "large_gib": large / 2**30, **times,
        "cross8_mb": crossover("all_reduce", ib, 8)["double_binary_tree"] / 1e6,
        "cross64_mb": crossover("all_reduce", ib, big_n)["double_binary_tree"] / 1e6,
        "dgx_nodes": dgx.nodes, **dgx_times, "rail_speedup": times["ring_large"] / dgx_times["dgx_ring_large"],
        # where the lines t = a + b M meet: the tree as pipelined here, and at its line rate (an optimistic tree)
        "tree_pieces": TREE_PIECES, "cross_dgx_mb": (ring_a - tree_a) / (tree_b - ring_b) / 1e6,
        "cross_dgx_line_gb": (ring_a - tree_a) / (tree_line - ring_b) / 1e9,
    }
