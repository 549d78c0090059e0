"""Counts FULL_SHARD like SHARD_GRAD_OP: one all-gather and one reduce-scatter (the common "2x" answer),
forgetting that parameters resharded after forward are gathered again in backward."""

EXPECT = ["fsdp_full_shard", "('backward', 'all_gather')", "1.5x DDP"]


def fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param):
    one_pass = n_params * bytes_per_param * (world_size - 1) // world_size
    if strategy == "ddp":
        return {("backward", "all_reduce"): 2 * one_pass}
    return {("forward", "all_gather"): one_pass, ("backward", "reduce_scatter"): one_pass}
