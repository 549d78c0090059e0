"""What Hugging Face ``transformers`` assumes when a config.json leaves a key out, per model_type.

A config.json lists only what differs from its config class's defaults (LLaVA-1.5's
``text_config`` gives five keys; Gemma-3-27B's gives ten), so reading one right needs the class's
defaults. Values are those of ``transformers`` 5.24, ``src/transformers/models/<type>/
configuration_<type>.py`` (the dataclass fields of each ``*Config``); config classes that do not
set ``tie_word_embeddings`` inherit ``PretrainedConfig``'s True.

``TIE_WORD_EMBEDDINGS[model_type]``   the class default of ``tie_word_embeddings``
``ARCHITECTURE_DEFAULTS[model_type]`` size defaults for the types whose nested configs rely on them
``NESTED_TEXT_TYPE[model_type]``      model_type of the language model inside a multimodal config
"""

from __future__ import annotations

PRETRAINED_CONFIG_TIE = True  # transformers.PretrainedConfig: tie_word_embeddings=True

TIE_WORD_EMBEDDINGS: dict[str, bool] = {
    "llama": False, "llama4": False, "llama4_text": False, "mistral": False, "mistral3": True,
    "mixtral": False, "qwen2": False, "qwen2_moe": False, "qwen3": False, "qwen3_moe": False,
    "qwen3_vl": False, "qwen3_vl_moe": False, "qwen3_vl_moe_text": True,
    "gemma": True, "gemma2": True, "gemma3": True, "gemma3_text": True, "phi": False, "phi3": False,
    "gpt2": True, "gptj": False, "gpt_neo": True, "gpt_bigcode": True, "falcon": True, "starcoder2": True,
    "deepseek_v2": False, "deepseek_v3": False, "gpt_oss": False, "nemotron": False, "nemotron_h": False,
    "jamba": False, "olmo2": False, "llava": False, "minicpm3": True, "glm": False,
    "phi-msft": False,  # remote code of microsoft/phi-2 before transformers' phi: configuration_phi.py
}

# Only the sizes the parser reads. llama: LlamaConfig; mistral: MistralConfig (note the 4096-token
# sliding window when the key is absent); gemma3_text: Gemma3TextConfig (sliding_window_pattern 6,
# read from kwargs in __post_init__); qwen3: Qwen3Config.
ARCHITECTURE_DEFAULTS: dict[str, dict] = {
    "llama": dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                  num_attention_heads=32, max_position_embeddings=2048),
    "mistral": dict(vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072,
                    sliding_window=4096),
    "gemma3_text": dict(vocab_size=262208, hidden_size=2304, intermediate_size=9216, num_hidden_layers=26,
                        num_attention_heads=8, num_key_value_heads=4, head_dim=256,
                        max_position_embeddings=131072, sliding_window=4096, sliding_window_pattern=6),
    "qwen3": dict(head_dim=128),
}

# Multimodal wrapper -> its language model's config class (when text_config has no model_type).
NESTED_TEXT_TYPE: dict[str, str] = {
    "llava": "llama", "gemma3": "gemma3_text", "mistral3": "mistral", "llama4": "llama4_text",
    "qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text", "gemma4": "gemma4_text",
}


def tie_default(model_type: str) -> bool:
    """``tie_word_embeddings`` that transformers uses for ``model_type`` when config.json omits it."""
    return TIE_WORD_EMBEDDINGS.get(model_type, PRETRAINED_CONFIG_TIE)
