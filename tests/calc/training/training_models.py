"""Models shared by the training-calculator tests: GPT-3-style configs as Megatron-LM builds them."""

from ringlab.calc import ModelConfig


def gpt(h: int, layers: int, heads: int, vocab: int = 51200, seq: int = 2048, name: str = "gpt") -> ModelConfig:
    """A GPT-2-style config.json (learned positions, biases, 4h GeLU MLP, LayerNorm, tied embeddings)."""
    return ModelConfig.from_hf_config(dict(model_type="gpt2", n_embd=h, n_layer=layers, n_head=heads,
                                           n_positions=seq, vocab_size=vocab), name=name)


def bare_gpt(h: int, layers: int, heads: int, vocab: int = 51200) -> ModelConfig:
    """The same layer without biases and with RMSNorm: its matmul weights are exactly 12 h^2 per layer."""
    return gpt(h, layers, heads, vocab).replace(attention_bias=False, attention_out_bias=False, mlp_bias=False,
                                                norm_type="rmsnorm", position_embeddings=0)

