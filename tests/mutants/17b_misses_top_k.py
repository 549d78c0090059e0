"""Dispatches each token once: forgets that top_k experts each get a copy of it."""

EXPECT = ["top_k = 2", "top_k copies"]


def layer_traffic(hidden, seq_len, micro_batch, tp, ep, top_k, bytes_per_element):
    message = micro_batch * seq_len * hidden * bytes_per_element
    return {"tp": 8 * (tp - 1) / tp * message, "ep": 4 * (ep - 1) / ep * message}
