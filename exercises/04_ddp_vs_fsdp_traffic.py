"""04a : bytes each rank sends per optimizer step, per collective, for DDP and FSDP.

Grade it: ``ringlab check 04a`` (or ``grade("04a")`` in notebook 04).
"""


def fsdp_traffic_breakdown(strategy, n_params, world_size, bytes_per_param):
    """Bytes one rank sends in each collective of one training step (no gradient accumulation).

    Args:
        strategy: ``"ddp"``, ``"fsdp_shard_grad_op"`` (ZeRO-2-like) or ``"fsdp_full_shard"`` (ZeRO-3).
        n_params: parameter count, an int that is a multiple of ``world_size`` (FSDP pads its flat
            parameters so that it is).
        world_size: data-parallel ranks N >= 1.
        bytes_per_param: bytes per element of parameters and gradients on the wire (2 for bf16).

    Every collective is a ring collective over all N ranks on the whole model (M = n_params x
    bytes_per_param bytes): count what one rank *sends*.

    Returns:
        a dict ``{(phase, collective): bytes}`` with phase ``"forward"`` or ``"backward"`` and
        collective ``"all_reduce"``, ``"all_gather"`` or ``"reduce_scatter"``; one entry per
        collective the strategy runs (bytes may be 0 when N = 1), e.g.
        ``{("backward", "all_reduce"): 27_562_500_000}`` for DDP with 7e9 bf16 params on 64 ranks.
    """
    raise NotImplementedError("04a: replace this line with your code")
