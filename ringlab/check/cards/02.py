"""Card 02 (Concepts behind the collectives): the values its text uses."""

from __future__ import annotations


def values() -> dict:
    from ringlab.collectives.cost import LINKS, alpha_beta_time, busiest_bytes, crossover, latency_terms

    n, m = 8, 2**30
    ratio = {f"{c}_{a}": busiest_bytes(c, a, n, m) / m for c, a in (
        ("all_reduce", "ring"), ("reduce_scatter", "ring"), ("all_gather", "ring"), ("broadcast", "binomial_tree"),
        ("broadcast", "scatter_allgather"), ("reduce", "binomial_tree"), ("all_to_all", "pairwise"),
        ("all_reduce", "double_binary_tree"))}
    ib = LINKS["ib-ndr"]
    big_n, small, large = 64, 2**20, 2**30
    times = {f"{a}_{tag}": alpha_beta_time("all_reduce", a, big_n, size, ib) * 1e3
             for a in ("ring", "double_binary_tree") for tag, size in (("small", small), ("large", large))}
    return {
        "n": n, **ratio, "ib_dir": ib.bandwidth / 1e9,
        "ib_alpha_us": ib.alpha * 1e6, "big_n": big_n, "ring_steps": latency_terms("all_reduce", "ring", big_n),
        "small_mib": small / 2**20, "large_gib": large / 2**30, **times,
        "cross8_mb": crossover("all_reduce", ib, 8)["double_binary_tree"] / 1e6,
        "cross64_mb": crossover("all_reduce", ib, big_n)["double_binary_tree"] / 1e6,
    }
