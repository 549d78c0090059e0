"""Counts each TP all-reduce as (t-1)/t x M, one reduce-scatter: the ring's all-gather half is missing."""

EXPECT = ["2(N-1)/N", "reduce-scatter", "all-gather"]


def layer_traffic(hidden, seq_len, micro_batch, tp, ep, top_k, bytes_per_element):
    message = micro_batch * seq_len * hidden * bytes_per_element
    return {"tp": 4 * (tp - 1) / tp * message, "ep": 4 * (ep - 1) / ep * message * top_k}
