"""One all-to-all per MoE layer: forgets the combine and the backward pass (4 per layer)."""

EXPECT = ["one all_to_all per MoE layer", "4 per layer"]


def layer_traffic(hidden, seq_len, micro_batch, tp, ep, top_k, bytes_per_element):
    message = micro_batch * seq_len * hidden * bytes_per_element
    return {"tp": 8 * (tp - 1) / tp * message, "ep": (ep - 1) / ep * message * top_k}
