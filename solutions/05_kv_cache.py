"""05a : KV-cache bytes of a model from its Hugging Face config.json.

Grade it: ``ringlab check 05a`` (or ``grade("05a")`` in notebook 05).
"""


def kv_cache_bytes(config, tokens, batch_size, bytes_per_element):
    """Bytes of KV cache for ``batch_size`` sequences of ``tokens`` tokens each, on one GPU (no TP).

    Args:
        config: a dict with Hugging Face config.json fields: ``num_hidden_layers``,
            ``num_attention_heads``, ``num_key_value_heads``, ``hidden_size``, and maybe
            ``head_dim`` (when absent it is ``hidden_size // num_attention_heads``) and
            ``sliding_window`` (absent or None: full attention; an int W: every layer keeps only the
            last W tokens) and ``use_sliding_window`` (Qwen2-style configs: when it is false the
            window is switched off, whatever ``sliding_window`` says). Other keys may be present; ignore them.
        tokens: tokens per sequence (prompt + generated), >= 1.
        batch_size: sequences, >= 1.
        bytes_per_element: bytes of one cached value (2 for fp16/bf16, 1 for fp8).

    Returns:
        an int, bytes. Llama-2-70B, 4096 tokens x 32 sequences, fp16: 42,949,672,960.
    """
    ### BEGIN SOLUTION
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
    held = tokens if window is None else min(tokens, window)
    # K and V, per layer, per KV head (GQA/MQA share one KV head among several query heads).
    per_token = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * bytes_per_element
    return per_token * held * batch_size
    ### END SOLUTION
