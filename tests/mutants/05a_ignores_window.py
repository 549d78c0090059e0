"""Ignores sliding_window: Mistral-7B v0.1's cache grows past its 4096-token window."""

EXPECT = ["sliding_window = 4096", "min(tokens, sliding_window)", "Mistral-7B-v0.1"]


def kv_cache_bytes(config, tokens, batch_size, bytes_per_element):
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * bytes_per_element
    return per_token * tokens * batch_size
