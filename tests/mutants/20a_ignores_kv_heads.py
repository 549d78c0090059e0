"""Checks the query heads only: tp = 5 for 40 heads and 8 KV heads."""

EXPECT = ["KV heads"]


def choose_tp(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp):
    for tp in range(min_tp, num_attention_heads + 1):
        if num_attention_heads % tp == 0:
            return tp, tp <= gpus_per_node
