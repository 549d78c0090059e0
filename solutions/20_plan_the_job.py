"""20a: pick the tensor-parallel degree of a layout, and say whether it stays inside the NVLink domain.

Grade it: ``ringlab check 20a`` or, in a notebook, ``ringlab.check.grade("20a")``.
Hints: ``ringlab.check.hint("20a", 1)`` (2 and 3 say more).
"""


def choose_tp(num_attention_heads, num_key_value_heads, gpus_per_node, min_tp):
    """The smallest tensor-parallel degree a job can use, and whether its group stays inside one node.

    Memory needs at least ``min_tp`` ways of tensor parallelism (the layers do not fit with fewer). A TP
    degree ``tp`` is usable when it splits the attention into whole heads: ``tp`` divides
    ``num_attention_heads``, and ``tp`` and ``num_key_value_heads`` divide one another (a rank keeps
    ``kv // tp`` KV heads, or one replicated KV head when ``tp`` exceeds them, as Megatron-LM and vLLM do).
    TP ranks are numbered consecutively, so the group stays on NVLink when it fits in one node.

    Args:
        num_attention_heads: query heads (int >= 1).
        num_key_value_heads: KV heads (int >= 1, dividing num_attention_heads).
        gpus_per_node: GPUs in one NVLink domain (int >= 1).
        min_tp: the smallest degree memory allows (int, 1 <= min_tp <= num_attention_heads).

    Returns:
        ``(tp, inside_nvlink)``: the smallest usable ``tp >= min_tp`` (int) and whether ``tp <= gpus_per_node``.
    """
    ### BEGIN SOLUTION
    for tp in range(min_tp, num_attention_heads + 1):
        splits_heads = num_attention_heads % tp == 0
        splits_kv = num_key_value_heads % tp == 0 if tp <= num_key_value_heads else tp % num_key_value_heads == 0
        if splits_heads and splits_kv:
            return tp, tp <= gpus_per_node
    raise ValueError("no tensor-parallel degree splits the heads")  # tp = num_attention_heads always does
    ### END SOLUTION
