"""Tries 1, 2, 4, 8, ... only: 8 instead of 6 for 24 heads at min_tp 5."""

EXPECT = ["powers of two"]


def choose_tp(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp):
    tp = 1
    while True:
        splits_kv = num_key_value_heads % tp == 0 if tp <= num_key_value_heads else tp % num_key_value_heads == 0
        if tp >= min_tp and num_attention_heads % tp == 0 and splits_kv:
            return tp, tp <= gpus_per_node
        tp *= 2
