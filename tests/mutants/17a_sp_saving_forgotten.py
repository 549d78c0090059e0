"""Takes sequence parallelism for free but keeps counting s b h (10 + 24/t): the 10 s b h that SP shards stays."""

EXPECT = ["sequence parallelism", "34 s b h / tp"]


def memory_per_gpu(n_params, dp, zero_stage, hidden, heads, layers, seq_len, micro_batch, tp, pp,
                   sequence_parallel):
    return {"params": 2 * n_params / (dp if zero_stage >= 3 else 1),
            "grads": 2 * n_params / (dp if zero_stage >= 2 else 1),
            "optimizer": 12 * n_params / (dp if zero_stage >= 1 else 1),
            "activations": seq_len * micro_batch * hidden * (10 + 24 / tp) * layers}
