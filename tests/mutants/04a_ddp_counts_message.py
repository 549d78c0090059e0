"""Counts DDP's all-reduce as the message size M, not the ring's 2(N-1)/N x M per rank
(right only at N = 2, where the two coincide)."""

EXPECT = ["strategy=ddp", "all_reduce as M", "2(N-1)/N x M"]


def fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param):
    message = n_params * bytes_per_param
    one_pass = message * (world_size - 1) // world_size
    if strategy == "ddp":
        return {("backward", "all_reduce"): message}
    out = {("forward", "all_gather"): one_pass, ("backward", "reduce_scatter"): one_pass}
    if strategy == "fsdp_full_shard":
        out[("backward", "all_gather")] = one_pass
    return out
