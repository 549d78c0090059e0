"""Activation memory per layer and per GPU (Korthikanti et al. 2022, "Reducing Activation Recomputation in
Large Transformer Models", arXiv:2205.05198, sec. 4-5 and Table 2), generalised tensor by tensor.

Per layer, per micro-batch of b sequences of s tokens (16-bit activations, 1-byte dropout masks), the paper
counts for a GPT layer of width h with a heads and a 4h MLP:

- eq. (1), no parallelism: ``s b h (34 + 5 a s / h)``;
- eq. (2), tensor parallel t: ``s b h (10 + 24/t + 5 a s / (h t))``;
- Table 2, + sequence parallel: ``s b h / t (34 + 5 a s / h)``; selective recompute drops ``5 a s / h``
  (``s b h (10 + 24/t)`` without SP, ``34 s b h / t`` with it); full recompute keeps ``2 s b h``.

Here each of those tensors is counted from the model's own shapes, so GQA, SwiGLU, MLA, windows, MoE and
models without dropout are sized the same way (elements per token, x 2 bytes unless noted):

====================  ========================================  ======================================
group                 tensors (paper's GPT value)               divided by
====================  ========================================  ======================================
``unsharded``         LayerNorm inputs 2h (4sbh), inputs of the  t with sequence parallelism, else 1
                      QKV and FC1 matmuls 2h (4sbh), two dropout
                      masks h x 1 B (2sbh)
``tp_sharded``        Q, K: heads x d_qk + kv x d_qk (4sbh);      t (K and V: KV heads per rank, which
                      V: kv x d_v (2sbh); O input heads x d_v     are replicated when t > kv heads)
                      (2sbh); FC1 output(s) (8sbh, two of them
                      when gated), FC2 input (8sbh)
``scores``            softmax output a x keys (2 B), its dropout  t (heads); removed by selective or
                      mask (1 B) and output (2 B): 5as            full recompute; FlashAttention keeps
                                                                  only an fp32 log-sum-exp per head
====================  ========================================  ======================================

``keys`` is the number of keys each query sees (s, or min(s, window)); with context parallelism cp each
GPU holds s/cp tokens of every tensor and its s/cp queries score all keys (ring attention: Liu et al.
2023). MoE layers replace the MLP by ``top_k x load_imbalance`` copies of each token's expert input (h) and
expert intermediates (widths / t) plus the shared experts; routing probabilities are not counted.
Mamba and linear-attention mixers are not modelled (ValueError).

Per GPU (sec. 4.2.3): a pipeline stage holds its layers' activations for the micro-batches in flight,
``ringlab.calc.pipeline.peak_in_flight`` (1F1B: p - i on stage i; interleaved: in (micro-batch, chunk)
pairs, 1/v of the stage each, giving the paper's factor 1 + (p-1)/(p v) on the first stage). The first
stage adds the embedding-dropout mask (s b h x 1 B per micro-batch in flight, / t with SP; interleaved, per
micro-batch in flight through chunk 0, which holds the embedding: 2p - 1 of them at the peak once m >= 2p), the last
the output layer: final-norm and projection inputs (2 x 2 s b h, / t with SP) and fp32 logits for the
loss (4 s b V / t): sec. 4.3, ``4 s b h / t (1 + V / h)`` with SP.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringlab.calc.kvcache import kv_heads_per_rank
from ringlab.calc.layers import LayerSpec
from ringlab.calc.models import ModelConfig
from ringlab.calc.pipeline import peak_in_flight, stage_op_orders
from ringlab.calc.training.flops import check_recompute
from ringlab.calc.training.layout import Batch, ParallelLayout, stage_layers
from ringlab.calc.units import dtype_bytes


@dataclass(frozen=True)
class LayerActivations:
    """Activation bytes (ints) one GPU stores for one layer and one micro-batch, by group (module docstring),
    after tensor/sequence/context parallelism and recomputation; ``total`` is their sum."""

    index: int
    unsharded: int
    tp_sharded: int
    scores: int

    @property
    def total(self) -> int:
        return self.unsharded + self.tp_sharded + self.scores


def _keys(layer: LayerSpec, seq_len: int) -> int:
    if layer.mixer in ("sliding", "chunked"):
        return min(seq_len, layer.window)
    return seq_len


def activation_bytes_per_value(act_dtype: str) -> int:
    """Bytes per activation value of ``act_dtype`` (fp32 4, bf16/fp16 2, fp8 1). Raises ValueError naming
    ``act_dtype`` for a sub-byte type (int4, fp4: half a byte): saved activations and their messages are
    counted here in whole bytes, and a 4-bit tensor's scales (one per block of 16 or 32 values) are
    not modelled, so such a count would be wrong rather than rounded."""
    size = dtype_bytes(act_dtype)
    if size != int(size):
        raise ValueError(f"act_dtype {act_dtype!r} is sub-byte ({size} B per value, plus per-block scales): "
                         "activations are counted in whole bytes; use fp8, bf16, fp16 or fp32")
    return int(size)


def layer_activation_bytes(model: ModelConfig, layer: LayerSpec, seq_len: int, micro_batch: int,
                           layout: ParallelLayout = ParallelLayout(), recompute: str = "none",
                           dropout: bool = True, act_dtype: str = "bf16", load_imbalance: float = 1.0,
                           flash_attention: bool = False) -> LayerActivations:
    """Bytes one GPU keeps for backward of ``layer`` for one micro-batch (module docstring for each term).

    ``dropout``: the paper's GPT layers have dropout (masks of 1 B per element); Llama-style training has
    none. ``act_dtype``: 16-bit in the paper. ``load_imbalance``: tokens the busiest EP rank receives over
    the mean (MoE layers). ``flash_attention``: the fused kernel keeps no score matrix, only the fp32
    log-sum-exp of each query and head (4 B; Dao 2023, FlashAttention-2, alg. 1), and recomputes the
    scores in its backward (not counted as recompute FLOPs here). Raises ValueError for state-space mixers or an unknown ``recompute``.
    """
    check_recompute(recompute)
    if layer.mixer in ("mamba", "linear_attention"):
        raise ValueError(f"{model.name}: activation memory of {layer.mixer} mixers is not modelled")
    t, cp = layout.tp, layout.cp
    e = activation_bytes_per_value(act_dtype)
    mask = 1 if dropout else 0
    tokens = micro_batch * (seq_len // cp)
    h = model.hidden_size
    if recompute == "full":
        per_token = e * h // (t if layout.sequence_parallel else 1)
        return LayerActivations(layer.index, per_token * tokens, 0, 0)
    unsharded = 0  # bytes per token, divided by t only with sequence parallelism
    sharded = 0  # bytes per token already on one TP rank (attention: heads per rank)
    sharded_num = 0  # bytes per token of the FFN before dividing its width by t
    scores = 0
    if layer.mixer in ("full", "sliding", "chunked", "mla"):
        heads = model.num_attention_heads
        if layer.mixer == "mla":
            d_qk, d_v, kv_local = model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim, heads // t
        else:
            d_qk, d_v = layer.k_head_dim, layer.v_head_dim
            kv_local = (kv_heads_per_rank(model, t) if layer.kv_heads == model.num_key_value_heads
                        else max(1, layer.kv_heads // t))
        unsharded += 2 * e * h + mask * h  # norm input, QKV input; dropout mask after the O projection
        sharded += e * (heads // t * d_qk + kv_local * (d_qk + d_v) + heads // t * d_v)
        if flash_attention:
            scores = 4 * heads // t
        elif recompute == "none":
            scores = (e + mask * (1 + e)) * heads // t * _keys(layer, seq_len)
    elif layer.mixer == "linear":
        unsharded += e * h
    if layer.ffn != "none":
        unsharded += e * h + mask * h  # norm input; dropout mask after FC2
    if layer.ffn == "dense":
        unsharded += e * h  # FC1 input
        sharded_num += e * (3 if model.mlp_gated else 2) * layer.ffn_width
    elif layer.ffn == "linear":
        unsharded += e * h
    elif layer.ffn == "moe":
        copies = model.num_experts_per_tok * load_imbalance
        unsharded += e * h * (1 + copies)  # router input, and each routed copy's expert input
        widths = copies * layer.ffn_width + (model.n_shared_experts or 0) * layer.ffn_width
        widths += model.shared_expert_intermediate_size or 0
        sharded_num += e * (3 if model.mlp_gated else 2) * widths
    if layout.sequence_parallel:
        unsharded = unsharded / t
    per_token_sharded = sharded + sharded_num / t
    return LayerActivations(layer.index, round(unsharded * tokens), round(per_token_sharded * tokens),
                            scores * tokens)


@dataclass(frozen=True)
class StageActivations:
    """Activation bytes (ints) on one GPU of pipeline stage ``stage`` at its peak: ``layers`` (its layers x
    micro-batches in flight), ``embedding`` (first stage), ``output`` (last stage), and ``in_flight``
    (micro-batches, or (micro-batch, chunk) pairs when interleaved)."""

    stage: int
    in_flight: int
    layers: int
    embedding: int
    output: int

    @property
    def total(self) -> int:
        return self.layers + self.embedding + self.output


def stage_activation_bytes(model: ModelConfig, layout: ParallelLayout, batch: Batch, recompute: str = "none",
                           dropout: bool = True, act_dtype: str = "bf16", load_imbalance: float = 1.0,
                           flash_attention: bool = False) -> tuple[StageActivations, ...]:
    """Peak activation bytes per GPU of every pipeline stage (module docstring: in-flight micro-batches,
    embedding and output layer). ``batch`` from :func:`~ringlab.calc.training.layout.check_layout`."""
    p, v, m = layout.pp, layout.virtual_stages, batch.num_microbatches
    if p == 1:
        flight = [1]
    else:
        flight = peak_in_flight(p, m, "interleaved-1f1b" if v > 1 else "1f1b", v).tolist()
    t, sp = layout.tp, layout.sequence_parallel
    e = activation_bytes_per_value(act_dtype)
    tokens = batch.micro_batch * (batch.seq_len // layout.cp)
    h = model.hidden_size
    out = []
    for stage, indices in enumerate(stage_layers(model, layout)):
        per_mb = sum(layer_activation_bytes(model, model.layers[i], batch.seq_len, batch.micro_batch, layout,
                                            recompute, dropout, act_dtype, load_imbalance,
                                            flash_attention).total for i in indices)
        held = flight[stage]
        layers = per_mb * held // v
        embedding = 0
        if stage == 0 and dropout:
            # chunk 0 alone holds the embedding: count its micro-batches among the first `held` ops, all forwards
            first = held if v == 1 else sum(chunk == 0 for _, _, chunk in
                                            stage_op_orders(p, m, "interleaved-1f1b", v)[0][:held])
            embedding = tokens * h * first // (t if sp else 1)
        output = 0
        if stage == p - 1:
            output = tokens * 2 * e * h // (t if sp else 1) + tokens * 4 * (-(-model.vocab_size // t))
        out.append(StageActivations(stage, held, layers, embedding, output))
    return tuple(out)
