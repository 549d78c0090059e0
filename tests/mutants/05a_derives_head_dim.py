"""Always derives head_dim as hidden_size // num_attention_heads, ignoring an explicit head_dim
(Gemma-7B: 256, not 3072 // 16 = 192)."""

EXPECT = ["head_dim = 256", "google/gemma-7b"]


def kv_cache_bytes(config, tokens, batch_size, bytes_per_element):
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    window = config.get("sliding_window")
    held = tokens if window is None else min(tokens, window)
    per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * bytes_per_element
    return per_token * held * batch_size
