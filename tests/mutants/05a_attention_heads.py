"""Uses num_attention_heads as the number of cached heads: 8x too much for Llama-2-70B (GQA)."""

EXPECT = ["num_attention_heads (64)", "num_key_value_heads (8)", "8x too large"]


def kv_cache_bytes(config, tokens, batch_size, bytes_per_element):
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    window = config.get("sliding_window")
    held = tokens if window is None else min(tokens, window)
    per_token = 2 * config["num_hidden_layers"] * config["num_attention_heads"] * head_dim * bytes_per_element
    return per_token * held * batch_size
