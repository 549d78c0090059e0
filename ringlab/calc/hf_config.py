"""Read a Hugging Face ``config.json`` into the fields of :class:`~ringlab.calc.models.ModelConfig`.

``parse_hf_config(src, name=None, source=None) -> dict`` (``ModelConfig.from_hf_config`` wraps it).

Layouts read
------------
- Nested configs: ``text_config`` / ``llm_config`` (LLaVA, Gemma-3 4B+, Llama-4, Qwen3-VL,
  Mistral-3, Kimi-K2.5) are read as the language model; the vision tower is not counted (a note
  says so). Keys the nested config leaves out take the defaults of its model_type's config
  class (:mod:`ringlab.calc.hf_defaults`), and ``tie_word_embeddings`` falls back on the outer
  config, then on the class default.
- Key spellings: ``hidden_size | n_embd | n_embed | d_model``, ``num_attention_heads | n_head |
  num_heads``, ``num_hidden_layers | n_layer | num_layers`` (GPT-2, GPT-J, GPT-Neo, GPTBigCode,
  Phi-2, ChatGLM).
- Per-layer attention: ``layer_types`` (gpt-oss, Qwen3-Next); Gemma-2's alternation (even layers
  sliding); Gemma-3's ``sliding_window_pattern`` (default 6: every 6th layer global); Qwen2/3's
  ``use_sliding_window`` + ``max_window_layers``; GPT-Neo's ``attention_layers`` (local =
  sliding ``window_size``); Llama-4's chunked layers (every ``no_rope_layer_interval``-th layer is
  global, the rest attend inside ``attention_chunk_size`` chunks); hybrid Mamba/attention patterns
  (Nemotron-H ``hybrid_override_pattern``: M Mamba-2, * attention, - MLP; Jamba
  ``attn_layer_period`` / ``attn_layer_offset`` and ``expert_layer_period`` / ``_offset``);
  Nemotron-NAS ``block_configs`` (per-block ``n_heads_in_group``, no-op and linear blocks,
  ``ffn_mult``).
- KV heads: ``num_key_value_heads`` (absent = MHA); ChatGLM's ``multi_query_group_num`` and
  ``kv_channels``; GPTBigCode's ``multi_query`` (1 head); Falcon: ``num_kv_heads`` / ``n_head_kv``
  with the new decoder architecture, else 1 with ``multi_query`` (default True), else MHA, as
  transformers' FalconAttention and vLLM's falcon.py do. The old RefinedWeb config of
  Falcon-40B has no ``new_decoder_architecture``: its remote code (model_type "RefinedWeb") is
  the new decoder, and vLLM's RWConfig forces it for hidden_size 8192, so it reads as 8 KV heads.
- Head sizes: ``head_dim`` (absent = hidden_size / heads), ``v_head_dim`` when V differs from K;
  MLA (DeepSeek-V2/V3, Kimi-K2, MiniCPM3): ``kv_lora_rank`` + ``qk_rope_head_dim`` cached.
- MoE: Mixtral/gpt-oss/MiniCPM (``num_local_experts`` | ``num_experts``), DeepSeek
  (``n_routed_experts``, ``n_shared_experts``, ``first_k_dense_replace``), Qwen2-MoE
  (``shared_expert_intermediate_size``), Qwen3-MoE (``decoder_sparse_step``,
  ``mlp_only_layers``), Llama-4 (``interleave_moe_layer_step``, a shared expert), Jamba.
  KV never depends on the experts.
- Two-matrix MLPs (GPT-2, GPT-J, GPT-Neo, GPTBigCode, OPT, Falcon, StarCoder2, Phi, Nemotron-H)
  versus gated ones; biases, LayerNorm vs RMSNorm, learned positions, tied embeddings (HF's
  per-model-type default when the key is absent).
- Learned absolute positions (GPT-2 ``n_positions``, GPT-Neo, OPT ``max_position_embeddings`` plus
  the two rows OPT's table is offset by) give ``position_embeddings`` table rows; such a model has no
  position past ``max_position_embeddings`` (``calc train`` refuses longer sequences).

- Per-layer head counts and sizes: DeepSeek-V3.2's sparse attention (``index_head_dim``: the
  lightning indexer caches one FP8 key with its scale per token and layer besides the MLA latent);
  Gemma-4's global layers (``global_head_dim``; with ``attention_k_eq_v`` the K projection feeds V
  and ``num_global_key_value_heads`` applies); MiMo-V2-Flash's ``hybrid_layer_pattern`` with the
  sliding layers' ``swa_num_key_value_heads`` / ``swa_head_dim`` / ``swa_v_head_dim`` and a per-layer
  ``moe_layer_freq`` list.
- Windows: only ``sliding_window``, and only for model types whose transformers config class has
  that field (not Llama, DeepSeek, OLMo-2, Gemma-1, MiniCPM3); ``sliding_window_size`` (MLC-LLM's
  key) is never read, as transformers never reads it.

Refused, with the reason: KV shared across layers (``num_kv_shared_layers``), cross-attention to
images (``cross_attention_layers``), per-block windows in Nemotron-NAS, ``moe_layer_freq`` other
than 1 outside MiMo-V2, the Gemma-4 and MiMo-V2 fields in other model types, and
``index_head_dim`` without MLA.

Validation: every size must be a positive integer, every flag a JSON boolean, windows positive
integers or null, ``first_k_dense_replace`` within the layer count, per-layer lists as long as
the model is deep; each error is a ValueError naming the file (or "config dict") and the field.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ringlab.calc.hf_defaults import ARCHITECTURE_DEFAULTS, NESTED_TEXT_TYPE, tie_default
from ringlab.calc.layers import MambaSpec

_FALCON_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")
_GPT2_STYLE = ("gpt2", "gpt_bigcode")
_QWEN_QKV_BIAS = ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl", "mimo")
_HEAD_QK_NORM = ("qwen3", "qwen3_moe", "qwen3_vl_text", "qwen3_vl_moe_text", "gemma3_text")
_LAYER_TYPE_NAMES = {"full_attention": "full", "attention": "full", "global": "full",
                     "sliding_attention": "sliding", "local": "sliding", "chunked_attention": "chunked",
                     "linear_attention": "linear_attention", "mamba": "mamba"}
_ARCH_TYPES = {"LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mixtral",
               "Qwen2ForCausalLM": "qwen2", "Phi3ForCausalLM": "phi3", "GemmaForCausalLM": "gemma"}

# Keys read only for the model types that define them (key, why refused elsewhere, model types read).
_REFUSED_KEYS = (
    ("global_head_dim", "global layers with their own head size and KV heads (global_head_dim, "
                        "num_global_key_value_heads, attention_k_eq_v) are read for Gemma-4 (model_type "
                        "gemma4_text) only", ("gemma4_text",)),
    ("num_global_key_value_heads", "global layers with their own KV heads are read for Gemma-4 only",
     ("gemma4_text",)),
    ("attention_k_eq_v", "layers whose K projection doubles as V (attention_k_eq_v) are read for Gemma-4 only",
     ("gemma4_text",)),
    ("hybrid_layer_pattern", "hybrid_layer_pattern with separate sliding-window head counts (swa_*) is read for "
                             "MiMo-V2-Flash (model_type mimo_v2_flash) only", ("mimo_v2_flash",)),
    ("swa_num_key_value_heads", "sliding-window layers with their own KV heads (swa_*) are read for MiMo-V2-Flash "
                                "only", ("mimo_v2_flash",)),
    ("cross_attention_layers", "cross-attention layers over image tokens (mllama) are not modelled", ()),
)

# Config classes of transformers without a ``sliding_window`` field: a stray key of that name (or an MLC
# config's ``sliding_window_size``, which no transformers class reads) windows nothing when transformers loads
# these, so it is not read as a window (LlamaConfig, DeepseekV2/V3Config, Olmo2Config, GemmaConfig, the
# remote MiniCPM3Config; Llama-4 windows by attention_chunk_size instead).
_NO_WINDOW_TYPES = ("llama", "llama4_text", "deepseek_v2", "deepseek_v3", "deepseek_v32", "kimi_k2", "olmo2",
                    "gemma", "minicpm3")

_MISSING = object()


# Bounds on config fields, checked before anything is built: every layer becomes an object (1e8 layers hang
# every calculator), and sizes beyond these are typos. The largest open models (2025) have 126 layers
# (Llama 3.1 405B), 16,384-wide hidden states and 256 routed experts.
MAX_LAYERS = 10_000
MAX_FIELD = 2**40
MAX_CONFIG_BYTES = 16 * 2**20


class _Reader:
    """Typed, validated access to one config dict; errors name ``where`` and the field."""

    def __init__(self, cfg: dict, where: str, defaults: dict):
        self.cfg, self.where, self.defaults = cfg, where, defaults

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def raw(self, *keys: str, default: Any = None) -> tuple[str, Any]:
        """The first of ``keys`` set in the file; an explicit null is kept; absent keys take the defaults."""
        for k in keys:
            if self.cfg.get(k) is not None:
                return k, self.cfg[k]
        if any(k in self.cfg for k in keys):
            return keys[0], default
        for k in keys:
            if self.defaults.get(k) is not None:
                return k, self.defaults[k]
        return keys[0], default

    def error(self, key: str, what: str, value: Any = _MISSING) -> ValueError:
        got = "" if value is _MISSING else f", got {value!r}"
        return ValueError(f"{self.where}: field {key!r} {what}{got}")

    def int(self, *keys: str, default: Any = _MISSING, minimum: int = 1, maximum: int = MAX_FIELD) -> int | None:
        key, value = self.raw(*keys)
        if value is None:
            if default is _MISSING:
                raise ValueError(f"{self.where}: missing required field {keys[0]!r}")
            return default
        return self.check_int(key, value, minimum, maximum)

    def check_int(self, key: str, value: Any, minimum: int = 1, maximum: int = MAX_FIELD) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, "must be an integer", value)
        if value < minimum:
            raise self.error(key, f"must be >= {minimum}", value)
        if value > maximum:
            raise self.error(key, f"must be <= {maximum:,} (no model comes near; a larger value is a typo)", value)
        return value

    def bool(self, key: str, default: bool) -> bool:
        value = self.cfg.get(key, self.defaults.get(key))
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "must be a JSON boolean (true or false, not a string or number)", value)
        return value

    def window(self, key: str = "sliding_window") -> int | None:
        """A sliding window: a positive integer, or null / absent for none."""
        _, value = self.raw(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise self.error(key, "must be a positive integer number of tokens or null", value)
        return self.check_int(key, int(value))

    def int_list(self, key: str, length: int, minimum: int = 0) -> list[int]:
        value = self.cfg.get(key)
        if not isinstance(value, list):
            raise self.error(key, "must be a list of integers", value)
        if length and len(value) != length:
            raise self.error(key, f"must have one entry per layer ({length}), has {len(value)}")
        return [self.check_int(key, v, minimum) for v in value]


def _load(src: str | os.PathLike | dict, name: str | None) -> tuple[dict, str, str | None]:
    if isinstance(src, dict):
        return src, "config dict", name
    if not isinstance(src, (str, os.PathLike)):
        raise TypeError(f"from_hf_config takes a path or a dict, got {type(src).__name__}")
    path = Path(src)
    if not path.is_file():  # also a FIFO or a device: reading one could block or never end
        what = "not a regular file" if path.exists() else "not found"
        raise ValueError(f"config.json {what}: {str(path)!r}")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"{path}: {size:,} bytes; a config.json is a few KB (at most {MAX_CONFIG_BYTES:,} are read)")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                         "config.json files are UTF-8 JSON") from None
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path}: expected a JSON object, got {type(cfg).__name__}")
    return cfg, str(path), name or (path.parent.name if path.name == "config.json" else path.stem)


def _unnest(cfg: dict, where: str) -> tuple[dict, str, list[str]]:
    """The language model's config of a multimodal one (or ``cfg`` itself), and notes."""
    key = next((k for k in ("text_config", "llm_config") if isinstance(cfg.get(k), dict)), None)
    if key is None:
        return cfg, where, []
    text = dict(cfg[key])
    outer = cfg.get("model_type")
    text.setdefault("model_type", NESTED_TEXT_TYPE.get(outer, outer))
    if text.get("tie_word_embeddings") is None and cfg.get("tie_word_embeddings") is not None:
        text["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    extra = [k for k in ("vision_config", "audio_config") if k in cfg]
    note = (f"{' and '.join(extra)} not counted: parameters and KV cache are those of {key}" if extra
            else f"only {key} is counted")
    return text, f"{where} [{key}]", [note]


def _model_type(cfg: dict) -> str | None:
    if isinstance(cfg.get("model_type"), str):
        return cfg["model_type"]
    for arch in cfg.get("architectures") or ():
        if arch in _ARCH_TYPES:
            return _ARCH_TYPES[arch]
    return None


def parse_hf_config(src: str | os.PathLike | dict, name: str | None = None, source: str | None = None) -> dict:
    """Keyword arguments of :class:`~ringlab.calc.models.ModelConfig` for a config.json (path or dict).

    See the module docstring for what is read. Raises ValueError naming the file and the field
    for a missing, mistyped or out-of-range field, a file that is not UTF-8 JSON, and for each
    refused layout (saying what is not modelled and why); TypeError when ``src`` is neither.
    """
    cfg, where, name = _load(src, name)
    cfg, where, notes = _unnest(cfg, where)
    model_type = _model_type(cfg)
    for key, why, read_for in _REFUSED_KEYS:
        if cfg.get(key) not in (None, False) and model_type not in read_for:
            raise ValueError(f"{where}: not supported: {why} (field {key!r})")
    if cfg.get("num_kv_shared_layers"):
        raise ValueError(f"{where}: not supported: KV shared across layers (num_kv_shared_layers) is not modelled")
    r = _Reader(cfg, where, ARCHITECTURE_DEFAULTS.get(model_type, {}))
    if r.has("moe_layer_freq") and cfg["moe_layer_freq"] != 1 and model_type != "mimo_v2_flash":
        raise ValueError(f"{where}: not supported: moe_layer_freq != 1 (MoE on a subset of layers) is not modelled")

    hidden = r.int("hidden_size", "n_embd", "n_embed", "d_model")
    heads = r.int("num_attention_heads", "n_head", "num_heads")
    layers = r.int("num_hidden_layers", "n_layer", "num_layers", maximum=MAX_LAYERS)
    vocab_keys = ("padded_vocab_size", "vocab_size") if model_type == "chatglm" else ("vocab_size", "padded_vocab_size")
    fields: dict[str, Any] = dict(
        name=name or cfg.get("_name_or_path") or model_type or "model",
        model_type=model_type or "llama", num_hidden_layers=layers, num_attention_heads=heads,
        hidden_size=hidden, vocab_size=r.int(*vocab_keys),
        max_position_embeddings=r.int("max_position_embeddings", "n_positions", "seq_length", default=None),
        tie_word_embeddings=r.bool("tie_word_embeddings", tie_default(model_type) if model_type else False),
        notes=tuple(notes), source=source or where,
    )
    family = (_falcon if model_type in _FALCON_TYPES else _gpt2 if model_type in _GPT2_STYLE
              else _FAMILIES.get(model_type, _transformer))
    if model_type != "nemotron-nas" and r.has("block_configs"):
        family = _nemotron_nas
    fields.update(family(r, fields))
    fields.setdefault("head_dim", _head_dim(r, fields))
    _check_heads(r, fields)
    return fields


def _head_dim(r: _Reader, f: dict) -> int:
    value = r.int("head_dim", default=None)
    if value is not None:
        return value
    if f["hidden_size"] % f["num_attention_heads"]:
        raise ValueError(f"{r.where}: no head_dim and hidden_size {f['hidden_size']} is not divisible by "
                         f"num_attention_heads {f['num_attention_heads']}")
    return f["hidden_size"] // f["num_attention_heads"]


def _check_heads(r: _Reader, f: dict) -> None:
    kv_counts = set(f.get("layer_kv_heads") or ()) - {0} or {f["num_key_value_heads"]}
    for kv in kv_counts:
        if f["num_attention_heads"] % kv:
            raise ValueError(f"{r.where}: num_attention_heads ({f['num_attention_heads']}) must be a multiple of "
                             f"num_key_value_heads ({kv})")
    if not 0 <= f.get("first_k_dense_replace", 0) <= f["num_hidden_layers"]:
        raise r.error("first_k_dense_replace", f"must be between 0 and num_hidden_layers ({f['num_hidden_layers']})",
                      f["first_k_dense_replace"])


# ---- the llama-like family, with its per-layer variants ---------------------------------------
def _layer_types(r: _Reader, f: dict, window: int | None) -> tuple[str, ...] | None:
    """Per-layer mixers from ``layer_types`` or the model type's rule; None when all are alike."""
    n, mt = f["num_hidden_layers"], f["model_type"]
    if r.has("layer_types"):
        names = r.cfg["layer_types"]
        if not isinstance(names, list) or len(names) != n:
            raise r.error("layer_types", f"must be a list of {n} layer kinds (one per layer)", names)
        unknown = sorted({str(t) for t in names} - set(_LAYER_TYPE_NAMES))
        if unknown:
            raise r.error("layer_types", f"has kinds not modelled: {unknown}; known: {', '.join(_LAYER_TYPE_NAMES)}")
        return tuple(_LAYER_TYPE_NAMES[t] for t in names)
    if window is None:
        return None
    if mt == "gemma2" or (mt == "gpt_oss"):  # transformers: sliding when (i + 1) % 2, i.e. even layers
        return tuple("sliding" if (i + 1) % 2 else "full" for i in range(n))
    if mt == "gemma3_text":
        pattern = r.int("sliding_window_pattern")
        return tuple("sliding" if (i + 1) % pattern else "full" for i in range(n))
    return None


def _moe_fields(r: _Reader, f: dict) -> dict:
    n = f["num_hidden_layers"]
    experts = r.int("num_local_experts", "num_experts", default=0, minimum=0)
    routed = r.int("n_routed_experts", default=0, minimum=0)
    if not (experts > 1 or routed):
        return {}
    out: dict[str, Any] = dict(num_experts_per_tok=r.int("num_experts_per_tok", "experts_per_token",
                                                         "num_experts_per_token", "top_k_experts"))
    if routed:
        out.update(n_routed_experts=routed, n_shared_experts=r.int("n_shared_experts", default=None, minimum=0),
                   moe_intermediate_size=r.int("moe_intermediate_size", default=None),
                   first_k_dense_replace=r.int("first_k_dense_replace", default=0, minimum=0))
        return out
    out.update(num_local_experts=experts, moe_intermediate_size=r.int("moe_intermediate_size", default=None))
    if r.has("shared_expert_intermediate_size"):  # Qwen2-MoE: one wide shared expert behind a sigmoid gate
        out.update(shared_expert_intermediate_size=r.int("shared_expert_intermediate_size", minimum=0),
                   shared_expert_gate=True)
    step = r.int("decoder_sparse_step", default=1)
    dense_only = set(r.int_list("mlp_only_layers", 0)) if r.has("mlp_only_layers") else set()
    if step != 1 or dense_only:  # Qwen2/3-MoE: MoE where (i + 1) % step == 0 and i not in mlp_only_layers
        out["mlp_types"] = tuple("moe" if (i + 1) % step == 0 and i not in dense_only else "dense" for i in range(n))
    return out


def _transformer(r: _Reader, f: dict) -> dict:
    """Llama-like decoders: Llama 2/3/4, Mistral, Mixtral, Qwen2/3 (MoE, VL), Gemma 1/2/3, Phi-3,
    OLMo-2, StarCoder2, DeepSeek-V2/V3, Kimi-K2, MiniCPM(3), gpt-oss, MiMo, Qwen3-Next."""
    mt, heads = f["model_type"], f["num_attention_heads"]
    out: dict[str, Any] = dict(num_key_value_heads=r.int("num_key_value_heads", default=heads))
    kv_lora = r.int("kv_lora_rank", default=None)
    if kv_lora is not None:
        nope, rope = r.int("qk_nope_head_dim"), r.int("qk_rope_head_dim")
        out.update(kv_lora_rank=kv_lora, q_lora_rank=r.int("q_lora_rank", default=None), qk_nope_head_dim=nope,
                   qk_rope_head_dim=rope, head_dim=nope + rope,
                   v_head_dim=r.int("v_head_dim", default=f["hidden_size"] // heads),
                   num_nextn_predict_layers=r.int("num_nextn_predict_layers", default=0, minimum=0))
        if r.has("index_head_dim"):  # DeepSeek sparse attention (V3.2): the lightning indexer's key is cached too
            out.update(index_head_dim=r.int("index_head_dim"), notes=f["notes"] + (
                "DeepSeek sparse attention: the indexer key (FP8 + scale) is cached in every layer; the "
                "indexer's own weights (wq_b, wk, weights_proj) are not counted in the parameters",))
    elif r.has("index_head_dim"):
        raise ValueError(f"{r.where}: not supported: index_head_dim (DeepSeek sparse attention) without MLA "
                         "(kv_lora_rank): the indexer is modelled on DeepSeek-V3.2's MLA layers only")
    elif r.has("v_head_dim"):
        out["v_head_dim"] = r.int("v_head_dim")
    out.update(_moe_fields(r, f))
    window = r.window()  # checked even where transformers ignores it: a malformed value is a broken file
    if _model_type(r.cfg) in _NO_WINDOW_TYPES:  # a config that names no model type keeps the window it sets
        window = None
    if not r.bool("use_sliding_window", not mt.startswith("qwen")):
        window = None  # Qwen-style configs carry a sliding_window that is off unless use_sliding_window
    out["sliding_window"] = window
    if window is not None and r.has("max_window_layers") and r.has("use_sliding_window"):
        out["max_window_layers"] = r.int("max_window_layers", minimum=0)
    out["layer_types"] = _layer_types(r, f, window)
    if out["layer_types"] and "linear_attention" in out["layer_types"]:
        out["params_unsupported"] = "linear-attention (Gated DeltaNet) layers"
    starcoder = mt == "starcoder2"
    bias = r.bool("attention_bias", mt in _QWEN_QKV_BIAS) or (starcoder and r.bool("use_bias", True))
    out.update(
        intermediate_size=r.int("intermediate_size", "ffn_hidden_size"),
        attention_bias=bias, attention_out_bias=bias and mt not in _QWEN_QKV_BIAS,
        mlp_bias=r.bool("mlp_bias", False) or (starcoder and r.bool("use_bias", True)),
        mlp_gated=not starcoder, norm_type="layernorm" if starcoder else "rmsnorm",
        norms_per_layer=4 if mt in ("gemma2", "gemma3_text") else 2,
        qk_norm="head" if mt in _HEAD_QK_NORM else "full" if mt == "olmo2" else None,
    )
    if mt == "gpt_oss":
        out.update(attention_sinks=True, expert_bias=True, router_bias=True)
    if mt == "llama4_text":
        out.update(_llama4(r, f))
    if mt == "gemma4_text":
        out.update(_gemma4(r, f, out))
    if mt == "mimo_v2_flash":
        out.update(_mimo_v2(r, f, out))
    return out


def _gemma4(r: _Reader, f: dict, out: dict) -> dict:
    """Gemma-4: ``layer_types`` interleave sliding layers (``head_dim``, ``num_key_value_heads``) with global
    ones of ``global_head_dim`` (default head_dim); with ``attention_k_eq_v`` a global layer has no v_proj,
    its K projection feeds V too and it keeps ``num_global_key_value_heads`` KV heads. K (k_norm + RoPE) and
    V (v_norm, no RoPE) still differ, so both are cached (transformers' Gemma4TextAttention)."""
    kinds = out["layer_types"]
    if not kinds or set(kinds) - {"full", "sliding"}:
        raise r.error("layer_types", "must list 'sliding_attention' and 'full_attention' layers (Gemma-4)",
                      r.cfg.get("layer_types"))
    k_eq_v = r.bool("attention_k_eq_v", False)
    if r.has("num_global_key_value_heads") and not k_eq_v:
        raise ValueError(f"{r.where}: not supported: num_global_key_value_heads without attention_k_eq_v (no "
                         "released Gemma-4 has it, and implementations differ on whether it applies)")
    head, kv = f.get("head_dim") or r.int("head_dim"), out["num_key_value_heads"]
    global_head = r.int("global_head_dim", default=head)
    global_kv = r.int("num_global_key_value_heads", default=kv) if k_eq_v else kv
    per_layer = [(global_kv, global_head) if k == "full" else (kv, head) for k in kinds]
    return dict(layer_kv_heads=tuple(k for k, _ in per_layer), layer_head_dims=tuple((d, d) for _, d in per_layer),
                norms_per_layer=4, qk_norm="head",
                params_unsupported="Gemma-4 (global layers with their own head size, K=V projections, MoE beside "
                                   "the dense MLP)")


def _mimo_v2(r: _Reader, f: dict, out: dict) -> dict:
    """MiMo-V2-Flash: ``hybrid_layer_pattern`` (1 = sliding window, 0 = full attention) with the sliding
    layers' own ``swa_num_key_value_heads`` (and ``swa_head_dim`` / ``swa_v_head_dim``, default the full
    layers' sizes); ``moe_layer_freq`` lists per layer whether its FFN is MoE (1) or dense (0). The window
    is ``sliding_window``, the key transformers-style configs carry."""
    n = f["num_hidden_layers"]
    pattern = r.int_list("hybrid_layer_pattern", n)
    if set(pattern) - {0, 1}:
        raise r.error("hybrid_layer_pattern", "must hold 0 (full attention) or 1 (sliding window) per layer",
                      pattern)
    if 1 in pattern and out["sliding_window"] is None:
        raise ValueError(f"{r.where}: hybrid_layer_pattern marks sliding-window layers but field 'sliding_window' "
                         "is missing or null (sliding_window_size is not read: transformers does not read it)")
    head = f.get("head_dim") or r.int("head_dim", default=f["hidden_size"] // f["num_attention_heads"])
    v_head = out.get("v_head_dim") or head
    full = (out["num_key_value_heads"], head, v_head)
    swa = (r.int("swa_num_key_value_heads", default=full[0]), r.int("swa_head_dim", default=head),
           r.int("swa_v_head_dim", default=v_head))
    if r.int("swa_num_attention_heads", default=f["num_attention_heads"]) != f["num_attention_heads"]:
        raise ValueError(f"{r.where}: not supported: swa_num_attention_heads differs from num_attention_heads "
                         "(query heads per layer kind are not modelled)")
    result: dict[str, Any] = dict(
        layer_types=tuple("sliding" if p else "full" for p in pattern),
        layer_kv_heads=tuple(swa[0] if p else full[0] for p in pattern),
        layer_head_dims=tuple((swa[1], swa[2]) if p else (full[1], full[2]) for p in pattern))
    freq = r.cfg.get("moe_layer_freq")
    if isinstance(freq, list):
        flags = r.int_list("moe_layer_freq", n)
        if set(flags) - {0, 1}:
            raise r.error("moe_layer_freq", "must hold 0 (dense) or 1 (MoE) per layer", freq)
        result["mlp_types"] = tuple("moe" if x else "dense" for x in flags)
    if swa[1:] != full[1:]:
        result["params_unsupported"] = "MiMo-V2 sliding layers with their own head sizes"
    return result


def _llama4(r: _Reader, f: dict) -> dict:
    """Llama-4: chunked local layers and NoPE global ones (iRoPE); MoE every ``interleave_moe_layer_step``
    layers with one shared expert; dense layers use ``intermediate_size_mlp`` (configuration_llama4.py)."""
    n = f["num_hidden_layers"]
    chunk = r.int("attention_chunk_size", default=None)
    interval = r.int("no_rope_layer_interval", default=4)
    rope = r.int_list("no_rope_layers", n) if r.has("no_rope_layers") else [int((i + 1) % interval != 0)
                                                                             for i in range(n)]
    step = r.int("interleave_moe_layer_step", default=1)
    moe = set(r.int_list("moe_layers", 0)) if r.has("moe_layers") else set(range(step - 1, n, step))
    out: dict[str, Any] = dict(attention_chunk_size=chunk, mlp_types=tuple("moe" if i in moe else "dense"
                                                                            for i in range(n)))
    if chunk is not None and not r.has("layer_types"):
        out["layer_types"] = tuple("chunked" if uses_rope else "full" for uses_rope in rope)
    if r.int("num_local_experts", default=0, minimum=0):
        out.update(moe_intermediate_size=r.int("intermediate_size"), n_shared_experts=1,
                   intermediate_size=r.int("intermediate_size_mlp", "intermediate_size"))
    return out


# ---- other layouts ------------------------------------------------------------------------------
def _falcon(r: _Reader, f: dict) -> dict:
    heads, hidden, mt = f["num_attention_heads"], f["hidden_size"], f["model_type"]
    new_arch = r.bool("new_decoder_architecture", False) or mt == "RefinedWeb"
    if new_arch:
        kv = r.int("num_kv_heads", "n_head_kv", default=heads)
    else:
        kv = 1 if r.bool("multi_query", True) else heads
    parallel = r.bool("parallel_attn", True)
    bias = r.bool("bias", False)
    return dict(
        num_key_value_heads=kv, intermediate_size=r.int("ffn_hidden_size", default=4 * hidden),
        mlp_gated=False, attention_bias=bias, attention_out_bias=bias, mlp_bias=bias, parallel_attn=parallel,
        norm_type="layernorm",
        norms_per_layer=r.int("num_ln_in_parallel_attn", default=2) if new_arch else (1 if parallel else 2),
        sliding_window=None,
    )


def _gpt2(r: _Reader, f: dict) -> dict:
    """GPT-2 and GPTBigCode (StarCoder, SantaCoder): learned positions, biases everywhere, 4h MLP;
    GPTBigCode's ``multi_query`` (default True) keeps one KV head (configuration_gpt_bigcode.py)."""
    heads = f["num_attention_heads"]
    multi_query = f["model_type"] == "gpt_bigcode" and r.bool("multi_query", True)
    return dict(num_key_value_heads=1 if multi_query else heads,
                intermediate_size=r.int("n_inner", default=4 * f["hidden_size"]),
                position_embeddings=r.int("n_positions", "max_position_embeddings"), **_BIASED_LAYERNORM)


_BIASED_LAYERNORM = dict(mlp_gated=False, attention_bias=True, attention_out_bias=True, mlp_bias=True,
                         norm_type="layernorm")


def _gptj(r: _Reader, f: dict) -> dict:
    """GPT-J: parallel attention and MLP under one LayerNorm, no attention biases, rotary
    positions, an untied LM head with a bias (modeling_gptj.py)."""
    return dict(num_key_value_heads=f["num_attention_heads"],
                intermediate_size=r.int("n_inner", default=4 * f["hidden_size"]), mlp_gated=False, mlp_bias=True,
                norm_type="layernorm", norms_per_layer=1, lm_head_bias=True, parallel_attn=True)


def _gpt_neo(r: _Reader, f: dict) -> dict:
    """GPT-Neo: ``attention_layers`` (or ``attention_types``) mark local layers, which attend to the
    last ``window_size`` tokens; Q/K/V without bias, out_proj and MLP with bias; learned positions."""
    n = f["num_hidden_layers"]
    kinds = r.cfg.get("attention_layers")
    if kinds is None and isinstance(r.cfg.get("attention_types"), list):
        kinds = [kind for group, repeat in r.cfg["attention_types"] for _ in range(repeat) for kind in group]
    if kinds is None:
        kinds = ["global"] * n
    if len(kinds) != n or set(kinds) - {"global", "local"}:
        raise r.error("attention_layers", f"must list {n} entries of 'global' or 'local'", kinds)
    local = "local" in kinds
    return dict(num_key_value_heads=f["num_attention_heads"],
                intermediate_size=r.int("intermediate_size", default=4 * f["hidden_size"]),
                sliding_window=r.int("window_size") if local else None,
                layer_types=tuple("sliding" if k == "local" else "full" for k in kinds) if local else None,
                position_embeddings=r.int("max_position_embeddings"), mlp_gated=False, attention_out_bias=True,
                mlp_bias=True, norm_type="layernorm")


def _opt(r: _Reader, f: dict) -> dict:
    """OPT (modeling_opt.py): a ReLU MLP of ``ffn_dim``, biases on every linear but the LM head
    (``enable_bias``), pre-LayerNorm blocks and a final LayerNorm, an LM head tied to the embedding, and
    learned positions in a table of ``max_position_embeddings + 2`` rows (OPTLearnedPositionalEmbedding
    offsets positions by 2). Refused, since they change the parameters: OPT-350m's projections between a
    narrower embedding and the blocks (``word_embed_proj_dim``), post-LayerNorm blocks without the final
    norm (``do_layer_norm_before`` false, ``_remove_final_layer_norm``), LayerNorms without weights."""
    hidden = f["hidden_size"]
    if r.int("word_embed_proj_dim", default=hidden) != hidden:
        raise r.error("word_embed_proj_dim", f"differs from hidden_size ({hidden}): the project_in / project_out "
                      "layers around a narrower embedding are not modelled", r.cfg["word_embed_proj_dim"])
    for key, modelled in (("do_layer_norm_before", True), ("_remove_final_layer_norm", False),
                          ("layer_norm_elementwise_affine", True)):
        if r.bool(key, modelled) != modelled:
            raise r.error(key, f"is {not modelled}: only OPT's pre-LayerNorm layout with weighted norms and a "
                          f"final norm is modelled ({key}={str(modelled).lower()})")
    positions = r.int("max_position_embeddings")
    bias = r.bool("enable_bias", True)
    return dict(num_key_value_heads=f["num_attention_heads"], intermediate_size=r.int("ffn_dim"),
                position_embeddings=positions + 2, mlp_gated=False, attention_bias=bias, attention_out_bias=bias,
                mlp_bias=bias, norm_type="layernorm")


def _phi(r: _Reader, f: dict) -> dict:
    """Phi-1/1.5/2 (``phi``, and the older ``phi-msft`` keys): one LayerNorm feeding attention and
    MLP in parallel, biases everywhere, a biased untied LM head."""
    heads = f["num_attention_heads"]
    return dict(num_key_value_heads=r.int("num_key_value_heads", "n_head_kv", default=heads),
                intermediate_size=r.int("intermediate_size", "n_inner", default=4 * f["hidden_size"]),
                norms_per_layer=1, lm_head_bias=True, parallel_attn=True, **_BIASED_LAYERNORM)


def _chatglm(r: _Reader, f: dict) -> dict:
    """ChatGLM2/3 and GLM-4 (remote code): ``multi_query_group_num`` KV groups of ``kv_channels``
    when ``multi_query_attention``; fused QKV with ``add_qkv_bias``; SwiGLU of ``ffn_hidden_size``."""
    heads = f["num_attention_heads"]
    groups = r.int("multi_query_group_num") if r.bool("multi_query_attention", False) else heads
    linear_bias = r.bool("add_bias_linear", False)
    return dict(num_key_value_heads=groups, head_dim=r.int("kv_channels", default=f["hidden_size"] // heads),
                intermediate_size=r.int("ffn_hidden_size"), attention_bias=r.bool("add_qkv_bias", False),
                attention_out_bias=linear_bias, mlp_bias=linear_bias,
                norm_type="rmsnorm" if r.bool("rmsnorm", True) else "layernorm")


def _nemotron_h(r: _Reader, f: dict) -> dict:
    """Nemotron-H: one mixer or one MLP per block, from ``hybrid_override_pattern`` (M Mamba-2,
    * attention, - squared-ReLU MLP; E MoE, whose parameters are not modelled)."""
    n = f["num_hidden_layers"]
    pattern = r.cfg.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != n or set(pattern) - set("M*-E"):
        raise r.error("hybrid_override_pattern", f"must be a string of {n} characters from 'M*-E'", pattern)
    heads = f["num_attention_heads"]
    mixer = {"M": "mamba", "*": "full", "-": "none", "E": "none"}
    ffn = {"M": "none", "*": "none", "-": "dense", "E": "none"}
    mamba_heads = r.int("mamba_num_heads")
    out = dict(
        num_key_value_heads=r.int("num_key_value_heads", default=heads),
        head_dim=r.int("head_dim", "attention_head_dim", default=f["hidden_size"] // heads),
        intermediate_size=r.int("intermediate_size"), layer_types=tuple(mixer[c] for c in pattern),
        mlp_types=tuple(ffn[c] for c in pattern), mlp_gated=False, mlp_bias=r.bool("mlp_bias", False),
        attention_bias=r.bool("attention_bias", False), attention_out_bias=r.bool("attention_bias", False),
        sliding_window=r.window(),
        mamba=MambaSpec(version=2, d_inner=mamba_heads * r.int("mamba_head_dim"), d_state=r.int("ssm_state_size"),
                        d_conv=r.int("conv_kernel"), num_heads=mamba_heads, n_groups=r.int("n_groups", default=1),
                        conv_bias=r.bool("use_conv_bias", True), proj_bias=r.bool("use_bias", False)),
    )
    if "E" in pattern:
        out["params_unsupported"] = "Nemotron-H MoE blocks ('E' in hybrid_override_pattern)"
    return out


def _jamba(r: _Reader, f: dict) -> dict:
    """Jamba: attention where i % attn_layer_period == attn_layer_offset (else Mamba-1), MoE where
    i % expert_layer_period == expert_layer_offset (configuration_jamba.py)."""
    n, hidden = f["num_hidden_layers"], f["hidden_size"]
    a_period, a_offset = r.int("attn_layer_period"), r.int("attn_layer_offset", minimum=0)
    e_period, e_offset = r.int("expert_layer_period"), r.int("expert_layer_offset", minimum=0)
    experts = r.int("num_experts", default=1)
    _, dt_rank = r.raw("mamba_dt_rank", default="auto")
    dt_rank = math.ceil(hidden / 16) if dt_rank == "auto" else r.check_int("mamba_dt_rank", dt_rank)
    out = dict(
        num_key_value_heads=r.int("num_key_value_heads", default=f["num_attention_heads"]),
        intermediate_size=r.int("intermediate_size"), sliding_window=r.window(),
        layer_types=tuple("full" if i % a_period == a_offset else "mamba" for i in range(n)),
        mamba=MambaSpec(version=1, d_inner=r.int("mamba_expand") * hidden, d_state=r.int("mamba_d_state"),
                        d_conv=r.int("mamba_d_conv"), dt_rank=dt_rank, conv_bias=r.bool("mamba_conv_bias", True),
                        proj_bias=r.bool("mamba_proj_bias", False), inner_norms=True),
    )
    if experts > 1:
        out.update(num_local_experts=experts, num_experts_per_tok=r.int("num_experts_per_tok"),
                   mlp_types=tuple("moe" if i % e_period == e_offset else "dense" for i in range(n)))
    return out


def _nemotron_nas(r: _Reader, f: dict) -> dict:
    """Nemotron-NAS / DeciLM (Llama-3.1/3.3-Nemotron Super and Ultra): ``block_configs`` give each
    block's attention (``n_heads_in_group``: KV heads = heads / it; ``no_op``; ``replace_with_linear``)
    and FFN (``ffn_mult``; width = 2/3 x ffn_mult x hidden rounded up to 256, as vLLM's
    nemotron_nas.py computes it; ``no_op``; ``replace_with_linear``)."""
    n, hidden, heads = f["num_hidden_layers"], f["hidden_size"], f["num_attention_heads"]
    blocks = r.cfg.get("block_configs")
    if not isinstance(blocks, list) or len(blocks) != n:
        raise r.error("block_configs", f"must be a list of {n} block configs", type(blocks).__name__)
    mixers, kv_heads, ffns, widths = [], [], [], []
    for i, block in enumerate(blocks):
        attn, ffn = block.get("attention") or {}, block.get("ffn") or {}
        if attn.get("window_length") is not None or attn.get("num_sink_tokens") is not None:
            raise ValueError(f"{r.where}: not supported: block_configs[{i}] has a per-block attention window "
                             "(window_length / num_sink_tokens), which is not modelled")
        if attn.get("no_op"):
            mixers.append("none"), kv_heads.append(0)
        elif attn.get("replace_with_linear"):
            mixers.append("linear"), kv_heads.append(0)
        else:
            group = r.check_int(f"block_configs[{i}].attention.n_heads_in_group", attn.get("n_heads_in_group"))
            if heads % group:
                raise r.error(f"block_configs[{i}].attention.n_heads_in_group",
                              f"must divide num_attention_heads ({heads})", group)
            mixers.append("full"), kv_heads.append(heads // group)
        if ffn.get("no_op") or ffn.get("replace_with_linear"):
            ffns.append("none" if ffn.get("no_op") else "linear"), widths.append(0)
        else:
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or mult <= 0:
                raise r.error(f"block_configs[{i}].ffn.ffn_mult", "must be a positive number", mult)
            ffns.append("dense"), widths.append(-(-int(2 * mult * hidden / 3) // 256) * 256)
    attention_kv = [k for k in kv_heads if k] or [heads]
    return dict(num_key_value_heads=attention_kv[0], intermediate_size=max(widths + [1]),
                layer_types=tuple(mixers), layer_kv_heads=tuple(kv_heads), mlp_types=tuple(ffns),
                layer_intermediate=tuple(widths), sliding_window=None,
                attention_bias=r.bool("attention_bias", False), mlp_bias=r.bool("mlp_bias", False))


_FAMILIES = {"gptj": _gptj, "gpt_neo": _gpt_neo, "opt": _opt, "phi": _phi, "phi-msft": _phi, "chatglm": _chatglm,
             "nemotron_h": _nemotron_h, "jamba": _jamba, "nemotron-nas": _nemotron_nas}
