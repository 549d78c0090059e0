"""Transformer model presets with Hugging Face ``config.json`` field names, and parameter counts.

API
---
``ModelConfig``                       frozen dataclass; fields named as in HF config.json
``ModelConfig.from_hf_config(src)``   parse a config.json path or an already-loaded dict
``MODELS[name]``                      presets: llama-2-7b/13b/70b, llama-3-8b/70b, llama-3.1-405b,
                                      mistral-7b, mixtral-8x7b, qwen2-72b, deepseek-v3, falcon-7b,
                                      falcon-40b
``get_model(name_or_obj_or_path)``    preset name, ``ModelConfig``, or a path to a config.json
``model.param_count()``               total parameters (tied embeddings counted once)
``model.active_param_count()``        parameters used per token (MoE: routed top-k + shared experts)
``model.weight_bytes(dtype)``         param_count() x bytes per element (int)
``model.kv_heads``, ``.is_moe``, ``.uses_mla``, ``.num_experts``, ``.expert_intermediate_size``

Every preset is written as the config.json dict of its Hugging Face repository (only the fields
that matter here) and parsed by ``from_hf_config``, so presets and real files share one code path.

Parameter counting (what the ``transformers`` modules of each model_type allocate):
- embeddings ``vocab_size x hidden_size``; LM head the same again unless ``tie_word_embeddings``;
- attention ``hidden x (heads + 2 kv_heads) x head_dim`` for Q, K, V plus ``heads x head_dim x
  hidden`` for the output projection (+ Q/K/V biases when ``attention_bias``, e.g. Qwen2);
  MLA (DeepSeek-V2/V3): q_a, q_b, kv_a_with_mqa, kv_b, o projections and the two latent RMSNorms;
- MLP ``3 x hidden x intermediate`` (gated SwiGLU: gate, up, down) or ``2 x`` (Falcon's GELU MLP);
  MoE layers: router ``hidden x experts`` + every expert (total) or the top-k + shared (active);
- norms: RMSNorm ``hidden`` (weight), LayerNorm ``2 x hidden`` (weight and bias), per layer and final.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ringlab.calc.units import dtype_bytes

_FALCON_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer, described with Hugging Face config.json field names.

    ``sliding_window`` is None when disabled (``use_sliding_window: false`` in Qwen2 configs) and
    applies to layers with index >= ``max_window_layers`` (Qwen2's convention; None = every layer).
    MoE: ``num_local_experts`` (Mixtral) or ``n_routed_experts`` (DeepSeek), ``num_experts_per_tok``,
    ``n_shared_experts``, ``moe_intermediate_size`` (expert FFN width; None = ``intermediate_size``),
    ``first_k_dense_replace`` (leading dense layers). MLA: ``kv_lora_rank``, ``q_lora_rank``,
    ``qk_rope_head_dim``, ``qk_nope_head_dim``, ``v_head_dim``. ``num_nextn_predict_layers``:
    DeepSeek-V3's multi-token-prediction modules (excluded from ``param_count`` by default).
    Architecture switches: ``mlp_gated`` (SwiGLU vs plain 2-matrix MLP), ``attention_bias``,
    ``parallel_attn`` (Falcon), ``norm_type`` ("rmsnorm" | "layernorm"), ``norms_per_layer``.
    """

    name: str
    model_type: str
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    hidden_size: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool = False
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    max_window_layers: int | None = None
    num_local_experts: int | None = None
    n_routed_experts: int | None = None
    num_experts_per_tok: int | None = None
    n_shared_experts: int | None = None
    moe_intermediate_size: int | None = None
    first_k_dense_replace: int = 0
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    num_nextn_predict_layers: int = 0
    mlp_gated: bool = True
    attention_bias: bool = False
    parallel_attn: bool = False
    norm_type: str = "rmsnorm"
    norms_per_layer: int = 2
    source: str = ""

    def __post_init__(self) -> None:
        for f in ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size",
                  "head_dim", "intermediate_size", "vocab_size"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{self.name}: {f} must be a positive int, got {v!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"{self.name}: num_attention_heads ({self.num_attention_heads}) must be a multiple "
                             f"of num_key_value_heads ({self.num_key_value_heads})")
        if self.sliding_window is not None and self.sliding_window <= 0:
            raise ValueError(f"{self.name}: sliding_window must be positive or None, got {self.sliding_window}")
        if self.norm_type not in ("rmsnorm", "layernorm"):
            raise ValueError(f"{self.name}: norm_type must be 'rmsnorm' or 'layernorm', got {self.norm_type!r}")
        if self.is_moe and not self.num_experts_per_tok:
            raise ValueError(f"{self.name}: an MoE model needs num_experts_per_tok")
        if self.uses_mla and None in (self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim):
            raise ValueError(f"{self.name}: MLA (kv_lora_rank) needs qk_rope_head_dim, qk_nope_head_dim, v_head_dim")

    # ---- derived properties -------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        """KV heads per layer (``num_key_value_heads``): 1 = MQA, < heads = GQA, = heads = MHA."""
        return self.num_key_value_heads

    @property
    def num_experts(self) -> int:
        """Routed experts per MoE layer (0 for a dense model)."""
        return self.num_local_experts or self.n_routed_experts or 0

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def uses_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): the cache holds a compressed latent."""
        return self.kv_lora_rank is not None

    @property
    def expert_intermediate_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def num_moe_layers(self) -> int:
        return self.num_hidden_layers - self.first_k_dense_replace if self.is_moe else 0

    # ---- parameter counts ---------------------------------------------------------------
    def _norm(self, width: int) -> int:
        return width * (2 if self.norm_type == "layernorm" else 1)

    def _attention_params(self) -> int:
        h, heads = self.hidden_size, self.num_attention_heads
        if self.uses_mla:
            qk_dim = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:  # q_a_proj, q_a_layernorm, q_b_proj
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * heads * qk_dim
            else:
                q = h * heads * qk_dim
            kv = (h * (self.kv_lora_rank + self.qk_rope_head_dim)  # kv_a_proj_with_mqa
                  + self.kv_lora_rank  # kv_a_layernorm
                  + self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim))  # kv_b_proj
            return q + kv + heads * self.v_head_dim * h
        qkv_out = (heads + 2 * self.num_key_value_heads) * self.head_dim
        bias = qkv_out if self.attention_bias else 0
        return h * qkv_out + bias + heads * self.head_dim * h

    def _mlp_params(self, width: int) -> int:
        return (3 if self.mlp_gated else 2) * self.hidden_size * width

    def _layer_params(self, moe: bool, active: bool) -> int:
        """One decoder layer; for an MoE layer count every expert, or only the routed top-k if active."""
        n = self._attention_params() + self.norms_per_layer * self._norm(self.hidden_size)
        if not moe:
            return n + self._mlp_params(self.intermediate_size)
        routed = self.num_experts_per_tok if active else self.num_experts
        experts = routed + (self.n_shared_experts or 0)
        # Router weight (hidden x experts). DeepSeek-V3's 256-entry score-correction bias is ignored (< 1e-7).
        return n + self.hidden_size * self.num_experts + experts * self._mlp_params(self.expert_intermediate_size)

    def _count(self, active: bool, include_mtp: bool) -> int:
        embed = self.vocab_size * self.hidden_size
        total = embed * (1 if self.tie_word_embeddings else 2) + self._norm(self.hidden_size)
        dense_layers = self.num_hidden_layers - self.num_moe_layers
        total += dense_layers * self._layer_params(False, active)
        if self.is_moe:
            total += self.num_moe_layers * self._layer_params(True, active)
        if include_mtp and self.num_nextn_predict_layers:
            # DeepSeek-V3 checkpoint layer 61: one MoE layer, enorm + hnorm, eh_proj (2h -> h),
            # shared_head.norm, and its own stored copies of embed_tokens and shared_head.head.
            h = self.hidden_size
            mtp = self._layer_params(True, active) + 3 * self._norm(h) + 2 * h * h + 2 * embed
            total += self.num_nextn_predict_layers * mtp
        return total

    def param_count(self, include_mtp: bool = False) -> int:
        """Total parameters (int); tied input/output embeddings counted once.

        ``include_mtp=True`` adds DeepSeek-V3's multi-token-prediction weights as stored in the HF
        checkpoint (671B -> ~685B); the 671B the model card reports excludes them.
        """
        return self._count(active=False, include_mtp=include_mtp)

    def active_param_count(self) -> int:
        """Parameters touched per token: dense models = ``param_count()``; MoE: attention, norms,
        embeddings and LM head, dense layers, router, shared experts and ``num_experts_per_tok``
        routed experts per MoE layer (the model cards' "activated parameters")."""
        return self._count(active=True, include_mtp=False)

    def weight_bytes(self, dtype: str = "bf16") -> int:
        """Bytes of all weights stored in ``dtype`` (``param_count() x dtype_bytes``), an int."""
        return int(self.param_count() * dtype_bytes(dtype))

    def replace(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed (e.g. ``MODELS['llama-2-7b'].replace(num_key_value_heads=8)``)."""
        return dataclasses.replace(self, **changes)

    # ---- parsing -------------------------------------------------------------------------
    @classmethod
    def from_hf_config(cls, src: str | os.PathLike | dict, name: str | None = None, source: str | None = None
                       ) -> ModelConfig:
        """Build a ``ModelConfig`` from a Hugging Face config.json (path, or a dict already loaded).

        Handles: missing ``head_dim`` (= hidden_size // num_attention_heads; MLA: qk_nope + qk_rope);
        missing ``num_key_value_heads`` (= num_attention_heads, i.e. MHA); ``use_sliding_window:
        false`` (Qwen2) -> ``sliding_window=None`` whatever its value; Falcon (``model_type`` falcon /
        RefinedWeb*, old ``n_layer``/``n_head``/``n_head_kv`` keys): KV heads = ``num_kv_heads`` when
        ``new_decoder_architecture`` (or when not ``multi_query``), else 1 (MQA), as transformers'
        FalconAttention does; non-gated 4x MLP (``ffn_hidden_size``), LayerNorm with bias, tied
        embeddings, 1 norm per layer for the parallel-attention 7B layout and 2 for the new one;
        DeepSeek-V2/V3 MLA and MoE fields. Raises ValueError naming a missing or invalid field,
        and for MoE layouts it does not model (Qwen2-MoE's ``shared_expert_intermediate_size``).
        """
        if isinstance(src, dict):
            cfg, where = src, "config dict"
        elif isinstance(src, (str, os.PathLike)):
            path = Path(src)
            if not path.is_file():
                raise ValueError(f"config.json not found: {str(path)!r}")
            try:
                cfg = json.loads(path.read_text())
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not valid JSON ({e})") from None
            where = str(path)
            name = name or (path.parent.name if path.name == "config.json" else path.stem)
        else:
            raise TypeError(f"from_hf_config takes a path or a dict, got {type(src).__name__}")
        if not isinstance(cfg, dict):
            raise ValueError(f"{where}: expected a JSON object")
        if "shared_expert_intermediate_size" in cfg or "num_experts" in cfg:
            raise ValueError(f"{where}: this MoE layout (num_experts / shared_expert_intermediate_size, e.g. "
                             "Qwen2-MoE) is not modelled; supported: Mixtral and DeepSeek-style MoE")

        model_type = cfg.get("model_type", "llama")
        falcon = model_type in _FALCON_TYPES

        def get(key: str, *aliases: str, default: Any = ..., required: bool = True) -> Any:
            for k in (key, *aliases):
                if cfg.get(k) is not None:
                    return cfg[k]
            if default is not ... or not required:
                return None if default is ... else default
            raise ValueError(f"{where}: missing required field {key!r}")

        hidden = get("hidden_size", "n_embed", "d_model")
        heads = get("num_attention_heads", "n_head")
        layers = get("num_hidden_layers", "n_layer")
        kv_lora_rank = get("kv_lora_rank", required=False)
        fields: dict[str, Any] = dict(
            name=name or cfg.get("_name_or_path") or model_type,
            model_type=model_type, num_hidden_layers=layers, num_attention_heads=heads,
            hidden_size=hidden, vocab_size=get("vocab_size"),
            max_position_embeddings=get("max_position_embeddings", required=False),
            source=source or where,
        )
        if falcon:
            new_arch = bool(cfg.get("new_decoder_architecture", False))
            multi_query = bool(cfg.get("multi_query", True))
            parallel = bool(cfg.get("parallel_attn", True))
            kv = get("num_kv_heads", "n_head_kv", default=heads) if (new_arch or not multi_query) else 1
            fields.update(
                num_key_value_heads=kv, intermediate_size=get("ffn_hidden_size", default=4 * hidden),
                tie_word_embeddings=cfg.get("tie_word_embeddings", True), mlp_gated=False,
                attention_bias=bool(cfg.get("bias", False)), parallel_attn=parallel, norm_type="layernorm",
                norms_per_layer=(cfg.get("num_ln_in_parallel_attn") or 2) if new_arch else (1 if parallel else 2),
            )
        else:
            fields.update(
                num_key_value_heads=get("num_key_value_heads", default=heads),
                intermediate_size=get("intermediate_size"),
                tie_word_embeddings=cfg.get("tie_word_embeddings", False),
                attention_bias=cfg.get("attention_bias", model_type == "qwen2"),  # Qwen2 always has QKV bias
            )
        head_dim = cfg.get("head_dim")
        if head_dim is None and kv_lora_rank is not None:
            head_dim = get("qk_nope_head_dim") + get("qk_rope_head_dim")
        if head_dim is None:
            if hidden % heads:
                raise ValueError(f"{where}: no head_dim and hidden_size {hidden} is not divisible by "
                                 f"num_attention_heads {heads}")
            head_dim = hidden // heads
        fields["head_dim"] = head_dim

        window = cfg.get("sliding_window")
        if cfg.get("use_sliding_window") is False:
            window = None
        fields["sliding_window"] = window
        if window is not None and cfg.get("use_sliding_window"):
            fields["max_window_layers"] = cfg.get("max_window_layers")

        for key in ("num_local_experts", "n_routed_experts", "num_experts_per_tok", "n_shared_experts",
                    "moe_intermediate_size", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim",
                    "v_head_dim"):
            fields[key] = cfg.get(key)
        fields["kv_lora_rank"] = kv_lora_rank
        fields["first_k_dense_replace"] = cfg.get("first_k_dense_replace") or 0
        fields["num_nextn_predict_layers"] = cfg.get("num_nextn_predict_layers") or 0
        if cfg.get("moe_layer_freq", 1) != 1:
            raise ValueError(f"{where}: moe_layer_freq != 1 is not modelled")
        return cls(**fields)


def _hf(repo: str) -> str:
    return f"https://huggingface.co/{repo}/blob/main/config.json"


_LLAMA = dict(model_type="llama", tie_word_embeddings=False)

# name -> (HF repository whose config.json the dict reproduces, the fields of that config.json that matter)
_PRESETS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama-2-7b": ("meta-llama/Llama-2-7b-hf", dict(
        _LLAMA, hidden_size=4096, intermediate_size=11008, num_attention_heads=32, num_hidden_layers=32,
        num_key_value_heads=32, vocab_size=32000, max_position_embeddings=4096)),
    "llama-2-13b": ("meta-llama/Llama-2-13b-hf", dict(
        _LLAMA, hidden_size=5120, intermediate_size=13824, num_attention_heads=40, num_hidden_layers=40,
        num_key_value_heads=40, vocab_size=32000, max_position_embeddings=4096)),
    "llama-2-70b": ("meta-llama/Llama-2-70b-hf", dict(
        _LLAMA, hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_hidden_layers=80,
        num_key_value_heads=8, vocab_size=32000, max_position_embeddings=4096)),
    "llama-3-8b": ("meta-llama/Meta-Llama-3-8B", dict(
        _LLAMA, hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_hidden_layers=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192)),
    "llama-3-70b": ("meta-llama/Meta-Llama-3-70B", dict(
        _LLAMA, hidden_size=8192, intermediate_size=28672, num_attention_heads=64, num_hidden_layers=80,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192)),
    "llama-3.1-405b": ("meta-llama/Llama-3.1-405B", dict(
        _LLAMA, hidden_size=16384, intermediate_size=53248, num_attention_heads=128, num_hidden_layers=126,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072)),
    "mistral-7b": ("mistralai/Mistral-7B-v0.1", dict(
        model_type="mistral", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
        num_hidden_layers=32, num_key_value_heads=8, vocab_size=32000, max_position_embeddings=32768,
        sliding_window=4096, tie_word_embeddings=False)),
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-v0.1", dict(
        model_type="mixtral", hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
        num_hidden_layers=32, num_key_value_heads=8, vocab_size=32000, max_position_embeddings=32768,
        num_local_experts=8, num_experts_per_tok=2, sliding_window=None, tie_word_embeddings=False)),
    "qwen2-72b": ("Qwen/Qwen2-72B", dict(
        model_type="qwen2", hidden_size=8192, intermediate_size=29568, num_attention_heads=64,
        num_hidden_layers=80, num_key_value_heads=8, vocab_size=152064, max_position_embeddings=131072,
        sliding_window=131072, use_sliding_window=False, max_window_layers=80, tie_word_embeddings=False)),
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3", dict(
        model_type="deepseek_v3", hidden_size=7168, intermediate_size=18432, moe_intermediate_size=2048,
        num_attention_heads=128, num_hidden_layers=61, num_key_value_heads=128, vocab_size=129280,
        max_position_embeddings=163840, n_routed_experts=256, n_shared_experts=1, num_experts_per_tok=8,
        first_k_dense_replace=3, moe_layer_freq=1, kv_lora_rank=512, q_lora_rank=1536, qk_rope_head_dim=64,
        qk_nope_head_dim=128, v_head_dim=128, num_nextn_predict_layers=1, tie_word_embeddings=False)),
    "falcon-7b": ("tiiuae/falcon-7b", dict(
        model_type="falcon", hidden_size=4544, num_attention_heads=71, num_hidden_layers=32, vocab_size=65024,
        multi_query=True, new_decoder_architecture=False, parallel_attn=True, bias=False)),
    "falcon-40b": ("tiiuae/falcon-40b", dict(
        model_type="falcon", hidden_size=8192, num_attention_heads=128, num_hidden_layers=60, num_kv_heads=8,
        vocab_size=65024, multi_query=True, new_decoder_architecture=True, parallel_attn=True, bias=False)),
}

MODELS: dict[str, ModelConfig] = {
    name: ModelConfig.from_hf_config(cfg, name=name, source=f"HF config.json: {_hf(repo)}")
    for name, (repo, cfg) in _PRESETS.items()
}


def get_model(name_or_obj_or_path: str | os.PathLike | ModelConfig) -> ModelConfig:
    """A ``ModelConfig`` from a preset name (case-insensitive), a ``ModelConfig`` (returned as is),
    or a path to a config.json (a str ending in .json, or any existing file / directory holding one).

    Raises ValueError listing close matches and all presets for an unknown name.
    """
    if isinstance(name_or_obj_or_path, ModelConfig):
        return name_or_obj_or_path
    if not isinstance(name_or_obj_or_path, (str, os.PathLike)):
        raise TypeError(f"model must be a preset name, a ModelConfig or a config.json path, "
                        f"got {type(name_or_obj_or_path).__name__}")
    text = os.fspath(name_or_obj_or_path)
    key = text.strip().lower().replace("_", "-").replace(" ", "-")
    if key in MODELS:
        return MODELS[key]
    path = Path(text)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if text.endswith(".json") or path.is_file():
        return ModelConfig.from_hf_config(path)
    close = difflib.get_close_matches(key, list(MODELS), n=3, cutoff=0.5)
    hint = f" Close matches: {', '.join(close)}." if close else ""
    raise ValueError(f"unknown model {text!r}.{hint} Presets: {', '.join(MODELS)}; or pass a config.json path")
