"""Transformer model presets with Hugging Face ``config.json`` field names, per-layer structure and
parameter counts.

API
---
``ModelConfig``                       frozen dataclass; fields named as in HF config.json
``ModelConfig.from_hf_config(src)``   parse a config.json path or an already-loaded dict
                                      (:mod:`ringlab.calc.hf_config` does the reading)
``model.layers``                      tuple of :class:`~ringlab.calc.layers.LayerSpec`, one per layer
``MODELS[name]``                      presets: llama-2-7b/13b/70b, llama-3-8b/70b, llama-3.1-8b/405b,
                                      mistral-7b, mixtral-8x7b, qwen2-72b, deepseek-v3, falcon-7b,
                                      falcon-40b, gemma-2-9b, gpt-oss-20b, nemotron-h-56b
``get_model(name_or_obj_or_path)``    preset name (or an alias of :data:`ALIASES`), ``ModelConfig``, or a path to a config.json
``model.param_count()``               total parameters (tied embeddings counted once)
``model.active_param_count()``        parameters used per token (MoE: routed top-k + shared experts)
``model.weight_bytes(dtype)``         param_count() x bytes per element (int)
``model.kv_heads``, ``.is_moe``, ``.uses_mla``, ``.num_experts``, ``.expert_intermediate_size``

Every preset is written as the config.json dict of its Hugging Face repository (only the fields
that matter here) and parsed by ``from_hf_config``, so presets and real files share one code path.
How parameters are counted is in :mod:`ringlab.calc.params`.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ringlab.calc.hf_config import parse_hf_config
from ringlab.calc.layers import FFNS, MIXERS, LayerSpec, MambaSpec, dsa_index_key_bytes
from ringlab.calc.params import count_params
from ringlab.calc.units import dtype_bytes


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only language model, described with Hugging Face config.json field names.

    Uniform fields describe a typical layer; the per-layer tuples, when set, say how each layer
    differs, and :attr:`layers` combines the two:

    - ``layer_types``: each layer's mixer (``ringlab.calc.layers.MIXERS``); None = every layer
      ``full`` (``mla`` with ``kv_lora_rank``), except that ``sliding_window`` windows layers
      with index >= ``max_window_layers`` (Qwen2's rule; None = every layer, as Mistral v0.1).
    - ``mlp_types``: each layer's FFN (``FFNS``); None = ``moe`` from ``first_k_dense_replace`` on
      for an MoE model, else ``dense``.
    - ``layer_kv_heads`` / ``layer_intermediate``: per-layer KV heads and dense FFN widths
      (Nemotron-NAS blocks, MiMo-V2's sliding layers, Gemma-4's global layers).
    - ``layer_head_dims``: per-layer (K, V) head sizes of attention layers (Gemma-4's global
      layers); None = ``head_dim`` and ``v_head_dim`` everywhere.

    Attention: ``head_dim`` is the K (and Q) head size; ``v_head_dim`` the V head size when it
    differs (MLA: the V head size of the decompressed heads); ``attention_chunk_size`` the chunk
    of ``chunked`` layers. MoE: ``num_local_experts`` (Mixtral) or ``n_routed_experts``
    (DeepSeek), ``num_experts_per_tok``, ``n_shared_experts`` (of width
    ``moe_intermediate_size``) or ``shared_expert_intermediate_size`` (Qwen2-MoE, with
    ``shared_expert_gate``), ``moe_intermediate_size`` (expert width; None = ``intermediate_size``).
    MLA: ``kv_lora_rank``, ``q_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``.
    ``num_nextn_predict_layers``: DeepSeek-V3's multi-token-prediction modules (excluded from
    ``param_count`` by default). ``index_head_dim``: DeepSeek sparse attention (V3.2), whose indexer
    caches one more key per token in every MLA layer (``LayerSpec.index_bytes``). Layout switches used by :mod:`ringlab.calc.params`:
    ``mlp_gated``, ``mlp_bias``, ``attention_bias`` (Q/K/V), ``attention_out_bias``,
    ``qk_norm`` ("head" | "full"), ``attention_sinks``, ``expert_bias``, ``router_bias``,
    ``lm_head_bias``, ``position_embeddings`` (learned positions, rows), ``parallel_attn``,
    ``norm_type`` ("rmsnorm" | "layernorm"), ``norms_per_layer``, ``mamba``.
    ``params_unsupported`` names a layout whose parameters are not modelled (KV still is);
    ``notes`` say what was left out (a vision tower, say).
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
    layer_types: tuple[str, ...] | None = None
    mlp_types: tuple[str, ...] | None = None
    layer_kv_heads: tuple[int, ...] | None = None
    layer_intermediate: tuple[int, ...] | None = None
    layer_head_dims: tuple[tuple[int, int], ...] | None = None
    attention_chunk_size: int | None = None
    num_local_experts: int | None = None
    n_routed_experts: int | None = None
    num_experts_per_tok: int | None = None
    n_shared_experts: int | None = None
    moe_intermediate_size: int | None = None
    shared_expert_intermediate_size: int | None = None
    shared_expert_gate: bool = False
    first_k_dense_replace: int = 0
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None
    num_nextn_predict_layers: int = 0
    index_head_dim: int | None = None
    mlp_gated: bool = True
    mlp_bias: bool = False
    attention_bias: bool = False
    attention_out_bias: bool = False
    qk_norm: str | None = None
    attention_sinks: bool = False
    expert_bias: bool = False
    router_bias: bool = False
    lm_head_bias: bool = False
    position_embeddings: int = 0
    parallel_attn: bool = False
    norm_type: str = "rmsnorm"
    norms_per_layer: int = 2
    mamba: MambaSpec | None = None
    params_unsupported: str = ""
    notes: tuple[str, ...] = ()
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
        for f in ("sliding_window", "attention_chunk_size"):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
                raise ValueError(f"{self.name}: {f} must be a positive int or None, got {v!r}")
        if self.norm_type not in ("rmsnorm", "layernorm"):
            raise ValueError(f"{self.name}: norm_type must be 'rmsnorm' or 'layernorm', got {self.norm_type!r}")
        if self.is_moe and not self.num_experts_per_tok:
            raise ValueError(f"{self.name}: an MoE model needs num_experts_per_tok")
        if self.uses_mla and None in (self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim):
            raise ValueError(f"{self.name}: MLA (kv_lora_rank) needs qk_rope_head_dim, qk_nope_head_dim, v_head_dim")
        if not 0 <= self.first_k_dense_replace <= self.num_hidden_layers:
            raise ValueError(f"{self.name}: first_k_dense_replace ({self.first_k_dense_replace}) must be in "
                             f"0..num_hidden_layers ({self.num_hidden_layers})")
        for f, allowed in (("layer_types", MIXERS), ("mlp_types", FFNS)):
            kinds = getattr(self, f)
            if kinds is None:
                continue
            if len(kinds) != self.num_hidden_layers:
                raise ValueError(f"{self.name}: {f} has {len(kinds)} entries for {self.num_hidden_layers} layers")
            bad = sorted(set(kinds) - set(allowed))
            if bad:
                raise ValueError(f"{self.name}: {f} has unknown kinds {bad}; accepted: {', '.join(allowed)}")
        for f in ("layer_kv_heads", "layer_intermediate", "layer_head_dims"):
            values = getattr(self, f)
            if values is not None and len(values) != self.num_hidden_layers:
                raise ValueError(f"{self.name}: {f} has {len(values)} entries for {self.num_hidden_layers} layers")
        windowed = [k for k in (self.layer_types or ()) if k in ("sliding", "chunked")]
        if "sliding" in windowed and self.sliding_window is None:
            raise ValueError(f"{self.name}: sliding layers need sliding_window")
        if "chunked" in windowed and self.attention_chunk_size is None:
            raise ValueError(f"{self.name}: chunked layers need attention_chunk_size")

    # ---- per-layer structure --------------------------------------------------------------
    @cached_property
    def layers(self) -> tuple[LayerSpec, ...]:
        """One :class:`~ringlab.calc.layers.LayerSpec` per layer, from the uniform and per-layer fields."""
        out = []
        for i in range(self.num_hidden_layers):
            mixer = self.layer_types[i] if self.layer_types else self._default_mixer(i)
            if mixer == "full" and self.uses_mla:
                mixer = "mla"
            window = {"sliding": self.sliding_window, "chunked": self.attention_chunk_size}.get(mixer)
            index = 0
            if mixer == "mla":
                kv, k_dim, v_dim = 1, self.kv_lora_rank + self.qk_rope_head_dim, 0
                index = dsa_index_key_bytes(self.index_head_dim) if self.index_head_dim else 0
            elif mixer in ("full", "sliding", "chunked"):
                kv = self.layer_kv_heads[i] if self.layer_kv_heads else self.num_key_value_heads
                k_dim, v_dim = (self.layer_head_dims[i] if self.layer_head_dims
                                else (self.head_dim, self.v_head_dim or self.head_dim))
            else:
                kv, k_dim, v_dim = 0, 0, 0
            ffn = self.mlp_types[i] if self.mlp_types else (
                "moe" if self.is_moe and i >= self.first_k_dense_replace else "dense")
            width = {"dense": self.layer_intermediate[i] if self.layer_intermediate else self.intermediate_size,
                     "moe": self.expert_intermediate_size}.get(ffn, 0)
            out.append(LayerSpec(i, mixer, window, kv, k_dim, v_dim, ffn, width, index))
        return tuple(out)

    def _default_mixer(self, i: int) -> str:
        if self.sliding_window is not None and (self.max_window_layers is None or i >= self.max_window_layers):
            return "sliding"
        return "full"

    def count_layers(self, *mixers: str) -> int:
        """How many layers have one of ``mixers`` (e.g. ``count_layers("full", "mla")``)."""
        return sum(layer.mixer in mixers for layer in self.layers)

    # ---- derived properties -------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        """KV heads of a typical layer (``num_key_value_heads``): 1 = MQA, < heads = GQA, = heads = MHA."""
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
    def is_hybrid(self) -> bool:
        """Some layers cache KV and some do not (Mamba/attention hybrids, pruned blocks)."""
        kinds = {layer.caches_kv for layer in self.layers}
        return kinds == {True, False}

    @property
    def expert_intermediate_size(self) -> int:
        return self.moe_intermediate_size or self.intermediate_size

    @property
    def num_moe_layers(self) -> int:
        return sum(layer.ffn == "moe" for layer in self.layers)

    # ---- parameter counts (ringlab.calc.params) ----------------------------------------
    def param_count(self, include_mtp: bool = False) -> int:
        """Total parameters (int); tied input/output embeddings counted once.

        ``include_mtp=True`` adds DeepSeek-V3's multi-token-prediction weights as stored in the HF
        checkpoint (671B -> ~685B); the 671B the model card reports excludes them. Raises
        ValueError when ``params_unsupported`` names a layout that is not modelled.
        """
        return count_params(self, active=False, include_mtp=include_mtp)

    def active_param_count(self) -> int:
        """Parameters touched per token: dense models = ``param_count()``; MoE: attention, norms,
        embeddings and LM head, dense layers, router, shared experts and ``num_experts_per_tok``
        routed experts per MoE layer (the model cards' "activated parameters")."""
        return count_params(self, active=True, include_mtp=False)

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

        See :func:`ringlab.calc.hf_config.parse_hf_config` for the layouts read, the defaults
        applied and the errors raised (ValueError naming the file and field; TypeError for a
        ``src`` that is neither a path nor a dict).
        """
        return cls(**parse_hf_config(src, name=name, source=source))


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
    "llama-3.1-8b": ("meta-llama/Llama-3.1-8B", dict(  # llama-3-8b's shape, a 128k context (rope_scaling llama3)
        _LLAMA, hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_hidden_layers=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072)),
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
    "gemma-2-9b": ("google/gemma-2-9b", dict(
        model_type="gemma2", hidden_size=3584, intermediate_size=14336, num_attention_heads=16, num_hidden_layers=42,
        num_key_value_heads=8, head_dim=256, vocab_size=256000, max_position_embeddings=8192, sliding_window=4096)),
    "gpt-oss-20b": ("openai/gpt-oss-20b", dict(
        model_type="gpt_oss", hidden_size=2880, intermediate_size=2880, num_attention_heads=64, num_hidden_layers=24,
        num_key_value_heads=8, head_dim=64, vocab_size=201088, max_position_embeddings=131072, sliding_window=128,
        num_local_experts=32, num_experts_per_tok=4, attention_bias=True, tie_word_embeddings=False)),
    "nemotron-h-56b": ("nvidia/Nemotron-H-56B-Base-8K", dict(
        model_type="nemotron_h", hidden_size=8192, intermediate_size=32768, num_attention_heads=64,
        num_hidden_layers=118, num_key_value_heads=8, attention_head_dim=128, vocab_size=131072,
        max_position_embeddings=8192, hybrid_override_pattern="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
        mamba_num_heads=256, mamba_head_dim=64, ssm_state_size=256, conv_kernel=4, n_groups=8,
        tie_word_embeddings=False)),
}

MODELS: dict[str, ModelConfig] = {
    name: ModelConfig.from_hf_config(cfg, name=name, source=f"HF config.json: {_hf(repo)}")
    for name, (repo, cfg) in _PRESETS.items()
}


# other names of a preset: the Llama 3 paper's 405B (Grattafiori et al. 2024) was released as Llama 3.1 405B
ALIASES = {"llama-3-405b": "llama-3.1-405b"}


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
    key = ALIASES.get(key, key)
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
