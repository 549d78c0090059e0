"""Takes the largest usable degree at or below min_tp: the layers would not fit."""

EXPECT = ["memory needs at least min_tp"]


def choose_tp(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp):
    for tp in range(min_tp, 0, -1):
        splits_kv = num_key_value_heads % tp == 0 if tp <= num_key_value_heads else tp % num_key_value_heads == 0
        if num_attention_heads % tp == 0 and splits_kv:
            return tp, tp <= gpus_per_node
