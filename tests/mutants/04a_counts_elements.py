"""Counts elements instead of bytes: never multiplies by bytes_per_param."""

EXPECT = ["elements", "bytes_per_param (2)"]


def fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param):
    one_pass = n_params * (world_size - 1) // world_size
    if strategy == "ddp":
        return {("backward", "all_reduce"): 2 * one_pass}
    out = {("forward", "all_gather"): one_pass, ("backward", "reduce_scatter"): one_pass}
    if strategy == "fsdp_full_shard":
        out[("backward", "all_gather")] = one_pass
    return out
