"""One all-reduce per layer for TP: forgets the second block and the backward pass (4 per layer)."""

EXPECT = ["one all_reduce per layer", "4 per layer"]


def layer_traffic(hidden, seq_len, micro_batch, tp, ep, top_k, bytes_per_element):
    message = micro_batch * seq_len * hidden * bytes_per_element
    return {"tp": 2 * (tp - 1) / tp * message, "ep": 4 * (ep - 1) / ep * message * top_k}
