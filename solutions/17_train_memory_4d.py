"""17a, 17b: memory per GPU and traffic per layer of DP x TP x PP (x EP) training with ZeRO.

Grade them: ``ringlab check 17a`` / ``ringlab check 17b`` or, in a notebook, ``ringlab.check.grade("17a")``.
Hints: ``ringlab.check.hint("17a", 1)`` (2 and 3 say more).
"""


def memory_per_gpu(n_params, dp, zero_stage, hidden, heads, layers, seq_len, micro_batch, tp, pp,
                   sequence_parallel):
    """Peak bytes one GPU of the first pipeline stage holds: model states and activations.

    Model states (mixed-precision Adam): bf16 weights (2 B per parameter), bf16 gradients (2 B), and an
    optimizer state of fp32 master weights plus Adam's two fp32 moments (4 + 4 + 4 = 12 B). ZeRO shards
    them over the ``dp`` data-parallel ranks: stage 0 nothing, stage 1 the optimizer state, stage 2 also
    the gradients, stage 3 also the weights.

    Activations of a GPT layer (hidden h, ``heads`` attention heads, a 4h MLP, dropout), 16-bit, with the
    attention scores not kept (selective recomputation, or FlashAttention), per layer and micro-batch of
    b sequences of s tokens (Korthikanti et al. 2022, Table 2): ``s b h (10 + 24 / tp)`` bytes with tensor
    parallelism alone, ``34 s b h / tp`` with sequence parallelism. With a 1F1B pipeline of ``pp`` stages
    (and at least pp micro-batches) the first stage holds ``pp`` micro-batches of its ``layers / pp`` layers.

    Args:
        n_params: parameters this GPU's model shard holds after the TP and PP split (an int, a multiple of dp).
        dp: data-parallel ranks; zero_stage: 0, 1, 2 or 3.
        hidden, heads, layers: the model's width, attention heads and layers (all of them, not per stage).
        seq_len, micro_batch: s and b.
        tp, pp: tensor-parallel degree (divides heads) and pipeline stages (divides layers).
        sequence_parallel: True or False (only meaningful with tp > 1).

    Returns:
        a dict of bytes (ints or floats): ``{"params": ..., "grads": ..., "optimizer": ..., "activations": ...}``.
    """
    ### BEGIN SOLUTION
    weights, grads, optimizer = 2 * n_params, 2 * n_params, 12 * n_params
    if zero_stage >= 1:
        optimizer /= dp
    if zero_stage >= 2:
        grads /= dp  # ZeRO-1 keeps whole gradients: only stage 2 shards them
    if zero_stage >= 3:
        weights /= dp
    sbh = seq_len * micro_batch * hidden
    if sequence_parallel:
        per_layer = 34 * sbh / tp  # SP shards the norms, dropouts and matmul inputs too
    else:
        per_layer = sbh * (10 + 24 / tp)  # 10 sbh stay replicated on every TP rank
    in_flight, layers_here = pp, layers // pp  # 1F1B: stage 0 holds pp micro-batches
    return {"params": weights, "grads": grads, "optimizer": optimizer,
            "activations": per_layer * layers_here * in_flight}
    ### END SOLUTION


def layer_traffic(hidden, seq_len, micro_batch, tp, ep, top_k, bytes_per_element):
    """Bytes one GPU sends for one MoE transformer layer and one micro-batch, forward and backward.

    Tensor parallelism (Megatron, no sequence parallelism): every block (attention, MoE MLP) ends with an
    all_reduce of the hidden states in forward, and its backward all_reduces the input gradient; each on
    M = micro_batch x seq_len x hidden x bytes_per_element, as a ring over the tp ranks.

    Expert parallelism: the MoE block sends each token to its ``top_k`` experts (dispatch all_to_all) and
    brings the results back (combine all_to_all); backward runs both again on the gradients. Each
    all_to_all carries micro_batch x seq_len x top_k x hidden elements from every rank, of which 1/ep stays
    on the rank (uniform routing).

    Args:
        hidden, seq_len, micro_batch: h, s, b.
        tp: tensor-parallel degree (1 = none); ep: expert-parallel degree (1 = none); top_k: experts per token.
        bytes_per_element: 2 for bf16.

    Returns:
        ``{"tp": bytes, "ep": bytes}`` (0 where the degree is 1).
    """
    ### BEGIN SOLUTION
    message = micro_batch * seq_len * hidden * bytes_per_element
    all_reduce = 2 * (tp - 1) / tp * message  # ring: reduce-scatter + all-gather
    tp_bytes = 4 * all_reduce  # 2 blocks x (forward + backward)
    routed = message * top_k
    all_to_all = (ep - 1) / ep * routed  # everything but the rank's own share leaves it
    ep_bytes = 4 * all_to_all  # dispatch + combine, forward and backward
    return {"tp": tp_bytes, "ep": ep_bytes}
    ### END SOLUTION
