"""Counts only K (or only V): the factor 2 for keys and values is missing."""

EXPECT = ["factor 2", "K and a V"]


def kv_cache_bytes(config, tokens, batch_size, bytes_per_element):
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    window = config.get("sliding_window")
    held = tokens if window is None else min(tokens, window)
    per_token = config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * bytes_per_element
    return per_token * held * batch_size
