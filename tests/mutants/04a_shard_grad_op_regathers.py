"""Gives SHARD_GRAD_OP FULL_SHARD's second all-gather in backward, although it keeps the parameters
unsharded from forward to the end of backward."""

EXPECT = ["SHARD_GRAD_OP keeps the parameters", "fsdp_shard_grad_op"]


def fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param):
    one_pass = n_params * bytes_per_param * (world_size - 1) // world_size
    if strategy == "ddp":
        return {("backward", "all_reduce"): 2 * one_pass}
    return {("forward", "all_gather"): one_pass, ("backward", "all_gather"): one_pass,
            ("backward", "reduce_scatter"): one_pass}
