"""Adds memory time and compute time instead of taking the larger (no overlap of loads and math)."""

EXPECT = ["adds the two roofs", "larger"]


def decode_step_time(batch_size, weight_bytes, kv_bytes_per_sequence, flops_per_token, peak_flops, hbm_bandwidth):
    memory = (weight_bytes + batch_size * kv_bytes_per_sequence) / hbm_bandwidth
    return memory + batch_size * flops_per_token / peak_flops  # bug: sum, not max
