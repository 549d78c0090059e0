"""07a : the time of one decode step for a whole batch of sequences.

Grade it: ``ringlab check 07a`` or, in a notebook, ``ringlab.check.grade("07a")``.
Hints: ``ringlab.check.hint("07a", 1)`` (2 and 3 say more).
"""


def decode_step_time(batch_size, weight_bytes, kv_bytes_per_sequence, flops_per_token, peak_flops, hbm_bandwidth):
    """Roofline time of one decode step that produces one token for each of ``batch_size`` sequences.

    The batch goes through every weight matrix together (one batched matmul per layer), so the
    weights cross HBM once per step, whatever the batch size; each sequence also reads its own
    KV cache. Every generated token costs ``flops_per_token`` FLOPs.

    Args:
        batch_size: sequences decoding together, int >= 1.
        weight_bytes: bytes of weights streamed from HBM per step (int).
        kv_bytes_per_sequence: bytes of one sequence's KV cache read per step (int >= 0).
        flops_per_token: FLOPs to produce one token (about 2 x parameters), float.
        peak_flops: dense peak of the chip (FLOP/s), float.
        hbm_bandwidth: HBM bandwidth (bytes/s), float.

    Returns:
        The step time in seconds (float): the larger of the memory time (bytes per step /
        bandwidth) and the compute time (FLOPs per step / peak).
    """
    ### BEGIN SOLUTION
    bytes_per_step = weight_bytes + batch_size * kv_bytes_per_sequence
    flops_per_step = batch_size * flops_per_token
    return max(bytes_per_step / hbm_bandwidth, flops_per_step / peak_flops)
    ### END SOLUTION
