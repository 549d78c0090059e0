"""Forgets the (N-1)/N factor: every all-gather / reduce-scatter counted as the whole message M."""

EXPECT = ["(N-1)/N factor", "27,562,500,000"]


def fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param):
    message = n_params * bytes_per_param
    if strategy == "ddp":
        return {("backward", "all_reduce"): 2 * message}
    out = {("forward", "all_gather"): message, ("backward", "reduce_scatter"): message}
    if strategy == "fsdp_full_shard":
        out[("backward", "all_gather")] = message
    return out
