"""Counts the weights once per step but forgets that each sequence reads its own KV cache."""

EXPECT = ["batch_size=1", "KV", "memory-bound"]


def decode_step_time(batch_size, weight_bytes, kv_bytes_per_sequence, flops_per_token, peak_flops, hbm_bandwidth):
    return max(weight_bytes / hbm_bandwidth, batch_size * flops_per_token / peak_flops)  # bug: no KV bytes
