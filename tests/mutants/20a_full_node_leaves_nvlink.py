"""Says a TP group of exactly one node's GPUs leaves NVLink (tp < gpus_per_node)."""

EXPECT = ["fills it, on NVLink"]


def choose_tp(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp):
    for tp in range(min_tp, num_attention_heads + 1):
        splits_kv = num_key_value_heads % tp == 0 if tp <= num_key_value_heads else tp % num_key_value_heads == 0
        if num_attention_heads % tp == 0 and splits_kv:
            return tp, tp < gpus_per_node
