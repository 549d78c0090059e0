"""Parameter counts of a :class:`~ringlab.calc.models.ModelConfig`, summed layer by layer.

What the ``transformers`` modules of each model_type allocate:

- embeddings ``vocab_size x hidden_size`` (+ ``position_embeddings x hidden_size`` for learned
  positions, GPT-2 style); LM head the same again unless ``tie_word_embeddings`` (+ a bias, Phi);
- attention: Q ``hidden x heads x head_dim``, K and V ``hidden x kv_heads x`` their head sizes, O
  ``heads x v_head_dim x hidden``; Q/K/V biases with ``attention_bias``, an O bias with
  ``attention_out_bias``; per-head RMSNorms of Q and K (``qk_norm="head"``: Qwen3, Gemma-3) or over
  all heads (``"full"``: OLMo-2); one sink logit per head (gpt-oss);
  MLA (DeepSeek-V2/V3): q_a, q_b, kv_a_with_mqa, kv_b, o projections and the two latent RMSNorms;
  a ``linear`` replacement: ``hidden x hidden``; Mamba mixers: :meth:`MambaSpec.params`;
- FFN ``3 x hidden x width`` when gated (SwiGLU/GeGLU), else ``2 x`` (GPT-2, Falcon, StarCoder2,
  Phi, Nemotron-H's squared-ReLU MLP), biases with ``mlp_bias``; MoE layers: router
  ``hidden x experts`` (+ bias), every expert (total) or the top-k (active), plus shared experts
  (``n_shared_experts`` of the expert width, or one of ``shared_expert_intermediate_size`` with a
  ``hidden x 1`` gate for Qwen2-MoE);
- norms: RMSNorm ``hidden`` (weight), LayerNorm ``2 x hidden`` (weight and bias):
  ``norms_per_layer`` in a layer that has both a mixer and an FFN, one in a layer that has one of
  them (Nemotron-H blocks, Nemotron-NAS no-op blocks), and the final norm.
"""

from __future__ import annotations

from ringlab.calc.layers import LayerSpec


def norm_param_count(m, width: int) -> int:
    """Weights of one norm of ``width`` features: ``width`` for RMSNorm, 2 x ``width`` (scale and bias) for LayerNorm."""
    return width * (2 if m.norm_type == "layernorm" else 1)


def _mla_params(m) -> int:
    h, heads = m.hidden_size, m.num_attention_heads
    qk_dim = m.qk_nope_head_dim + m.qk_rope_head_dim
    if m.q_lora_rank:  # q_a_proj, q_a_layernorm, q_b_proj
        q = h * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * heads * qk_dim
    else:
        q = h * heads * qk_dim
    kv = (h * (m.kv_lora_rank + m.qk_rope_head_dim)  # kv_a_proj_with_mqa
          + m.kv_lora_rank  # kv_a_layernorm
          + m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim))  # kv_b_proj
    return q + kv + heads * m.v_head_dim * h


def _attention_params(m, layer: LayerSpec) -> int:
    h, heads, kv = m.hidden_size, m.num_attention_heads, layer.kv_heads
    dk, dv = layer.k_head_dim, layer.v_head_dim
    n = h * heads * dk + h * kv * (dk + dv) + heads * dv * h
    if m.attention_bias:
        n += heads * dk + kv * (dk + dv)
    if m.attention_out_bias:
        n += h
    if m.qk_norm == "head":
        n += 2 * dk
    elif m.qk_norm == "full":
        n += (heads + kv) * dk
    return n + (heads if m.attention_sinks else 0)


def mixer_param_count(m, layer: LayerSpec) -> int:
    """Parameters of ``layer``'s token mixer (attention of any kind, or none) for model config ``m``."""
    if layer.mixer in ("full", "sliding", "chunked"):
        return _attention_params(m, layer)
    if layer.mixer == "mla":
        return _mla_params(m)
    if layer.mixer == "mamba":
        return m.mamba.params(m.hidden_size)
    if layer.mixer == "linear":
        return m.hidden_size * m.hidden_size
    return 0  # none


def mlp_param_count(m, width: int, bias: bool) -> int:
    """Parameters of one dense MLP of intermediate ``width`` (3 matrices when gated, else 2; biases if ``bias``)."""
    h = m.hidden_size
    matrices = 3 if m.mlp_gated else 2
    biases = ((2 if m.mlp_gated else 1) * width + h) if bias else 0
    return matrices * h * width + biases


def _ffn_params(m, layer: LayerSpec, active: bool) -> int:
    h = m.hidden_size
    if layer.ffn == "dense":
        return mlp_param_count(m, layer.ffn_width, m.mlp_bias)
    if layer.ffn == "linear":
        return h * h
    if layer.ffn == "none":
        return 0
    experts = m.num_experts
    routed = m.num_experts_per_tok if active else experts
    # Router (hidden x experts). DeepSeek-V3's 256-entry score-correction bias is ignored (< 1e-7).
    n = h * experts + (experts if m.router_bias else 0)
    n += (routed + (m.n_shared_experts or 0)) * mlp_param_count(m, layer.ffn_width, m.expert_bias)
    if m.shared_expert_intermediate_size:
        n += mlp_param_count(m, m.shared_expert_intermediate_size, m.mlp_bias) + (h if m.shared_expert_gate else 0)
    return n


def layer_param_count(m, layer: LayerSpec, active: bool) -> int:
    """Parameters of one decoder layer: mixer, FFN (``active``: only the routed top-k and shared experts of an
    MoE layer) and its norms."""
    parts = (layer.mixer != "none") + (layer.ffn != "none")
    norms = m.norms_per_layer if parts == 2 else parts
    return mixer_param_count(m, layer) + _ffn_params(m, layer, active) + norms * norm_param_count(m, m.hidden_size)


def count_params(m, active: bool, include_mtp: bool) -> int:
    """Total (``active=False``) or per-token (``active=True``) parameters of ``m`` (int).

    ``include_mtp`` adds DeepSeek-V3's multi-token-prediction modules as stored in its
    checkpoint. Raises ValueError naming the layout when ``m.params_unsupported`` is set
    (linear-attention mixers, MoE blocks of hybrid patterns): KV bytes are still computed.
    """
    if m.params_unsupported:
        raise ValueError(f"{m.name}: parameter count not modelled for {m.params_unsupported} "
                         "(KV-cache bytes are; pass weight bytes explicitly where needed)")
    h = m.hidden_size
    embed = m.vocab_size * h
    head = 0 if m.tie_word_embeddings else embed
    total = embed + head + (m.vocab_size if m.lm_head_bias else 0) + m.position_embeddings * h + norm_param_count(m, h)
    total += sum(layer_param_count(m, layer, active) for layer in m.layers)
    if include_mtp and m.num_nextn_predict_layers:
        # DeepSeek-V3 checkpoint layer 61: one MoE layer, enorm + hnorm, eh_proj (2h -> h),
        # shared_head.norm, and its own stored copies of embed_tokens and shared_head.head.
        moe_layer = LayerSpec(m.num_hidden_layers, "mla" if m.uses_mla else "full", None, m.num_key_value_heads,
                              m.head_dim, m.v_head_dim or m.head_dim, "moe", m.expert_intermediate_size)
        mtp = layer_param_count(m, moe_layer, active) + 3 * norm_param_count(m, h) + 2 * h * h + 2 * embed
        total += m.num_nextn_predict_layers * mtp
    return total
