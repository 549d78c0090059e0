"""Counts ZeRO-1 as sharding the gradients too (it shards only the optimizer state; ZeRO-2 shards gradients)."""

EXPECT = ["ZeRO-1", "whole gradient"]


def memory_per_gpu(n_params, dp, zero_stage, hidden, heads, layers, seq_len, micro_batch, tp, pp,
                   sequence_parallel):
    shard = [1, dp, dp, dp][zero_stage]
    per_layer = (34 / tp if sequence_parallel else 10 + 24 / tp) * seq_len * micro_batch * hidden
    return {"params": 2 * n_params / (dp if zero_stage == 3 else 1), "grads": 2 * n_params / shard,
            "optimizer": 12 * n_params / shard, "activations": per_layer * layers}
