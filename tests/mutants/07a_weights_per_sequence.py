"""The circulating linear model: every sequence streams all the weights, so step time grows with batch."""

EXPECT = ["batch_size=8", "once per step", "circulating"]


def decode_step_time(batch_size, weight_bytes, kv_bytes_per_sequence, flops_per_token, peak_flops, hbm_bandwidth):
    memory = batch_size * (weight_bytes + kv_bytes_per_sequence) / hbm_bandwidth  # bug: weights B times
    return max(memory, batch_size * flops_per_token / peak_flops)
