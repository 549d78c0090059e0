"""Memory-bound kernels of a training step: the bytes each moves per layer, and the optimizer step's bytes.

Between the matmuls a transformer layer runs kernels that do a few FLOPs per element they read: norms,
softmax, dropout, residual adds, activation functions, rotary embeddings, and the optimizer step. Their
arithmetic intensity is a few FLOP/B against ridge points of 150-300 FLOP/B (A100, H100), so their time is
the bytes they move over HBM bandwidth (:func:`ringlab.calc.roofline.roofline`), whatever the matmul
efficiency. Counted here is the minimum traffic of each kernel: every input read once, every output
written once (the roofline's own idealisation), in the activation dtype ``E`` bytes (dropout masks 1 B).

Fusion assumed: Megatron-LM's fused kernels (Narayanan et al. 2021, sec. 4.2: bias + GeLU, bias + dropout +
residual add, scale + mask + softmax), Apex/Transformer Engine's one-pass LayerNorm / RMSNorm and a fused
(multi-tensor) Adam. Per layer, per micro-batch of ``T = b s / cp`` tokens on one GPU; tensors of width h
(norm inputs/outputs, residual stream) span ``T`` rows, or ``T / t`` with sequence parallelism (without it
every TP rank repeats these kernels on the whole sequence); TP-sharded tensors (heads, FFN width) span T:

=======================  ====================================  ======================================
kernel                   forward (reads + writes)              backward
=======================  ====================================  ======================================
norm (each of the        x in, y out: ``2E h``                 x and dy in, dx out: ``3E h``
layer's norms)
residual add (after      branch and residual in, sum out:      dy and the branch gradient summed for
each sub-layer)          ``3E h``; with dropout + mask ``1 h``  the residual: ``3E h``; dropout: dy,
                                                               mask in, dx out ``(2E + 1) h``
activation (FC1 output,  GeLU: in, out ``2E f``; gated          GeLU: input, dy in, dx out ``3E f``;
f = width / t)           (SwiGLU): gate, up in, out ``3E f``    gated: gate, up, dy in, two out ``5E f``
rotary embedding         Q and K in and out: ``2E (q + k)``     the same
(no learned positions)   (MLA: their rotary parts)
softmax (no Flash-       scores in, probabilities out:          y, dy in, dx out: ``3E`` per score
Attention)               ``2E`` per score
attention dropout        in, out, mask: ``2E + 1`` per score    dy, mask in, dx out: ``2E + 1``
MoE dispatch / combine   token in, k copies out; k copies in,   the same
                         token out: ``2E h (k + 1)``
=======================  ====================================  ======================================

A parallel block (GPT-J style, ``parallel_attn``) adds both branches to the residual in one kernel. MoE
layers count k = ``num_experts_per_tok`` copies of each token at the mean load, as the matmul FLOPs do.
Scores per GPU are ``T x heads / t x keys`` (keys = s, or the window). FlashAttention computes softmax
and dropout inside its own kernel (charged with the attention FLOPs), so there are no score kernels then.
The last stage adds the final norm and the loss: the vocabulary-parallel cross-entropy read once as
logits (E) and written once as fp32 probabilities (4 B) forward, the reverse backward (``T x V / t``).

Recomputation re-runs forward kernels in backward: ``full`` every kernel of the layer, ``selective``
the core-attention ones (softmax and its dropout; Korthikanti et al. 2022, sec. 5).

The optimizer step (:func:`optimizer_bytes_per_param`), per parameter a GPU updates (its shard under ZeRO
and FSDP): fused Adam reads the gradient, the weights it updates and both moments, and writes the weights
and moments back, plus the low-precision working copy when it keeps fp32 master weights (Micikevicius et
al. 2018, mixed precision; Megatron-LM's ``DistributedOptimizer`` copies main params to model params); the
global-norm gradient clipping reads every gradient once more. In bf16 with fp32 master weights and fp32
moments: reads 2 + 4 + 4 + 4 and writes 4 + 4 + 4 + 2, plus the 2-byte norm read: 30 B per parameter
(34 with an fp32 ``main_grad``). The 16-20 B per parameter usually quoted (ZeRO paper sec. 3.1; the
Ultra-Scale Playbook) is what these states *hold*; the step reads and writes most of them, hence ~2x.

Weight gradients are taken as accumulated over micro-batches inside the weight-gradient GEMM (Megatron-LM's
gradient-accumulation fusion); an unfused add, as PyTorch's AccumulateGrad or Megatron-LM in 2021 do it,
moves 6 B per parameter per micro-batch in bf16, 10 B into an fp32 ``main_grad``, and is not counted.
Left out: the embedding lookup and its gradient scatter (one row of h per token, on the first stage),
bias-gradient reductions, router softmax / top-k, Mamba's selective scan and other state-space kernels
(their projections are matmuls), and the bandwidth real kernels lose to launch and tail effects (they
reach ~80-90% of the datasheet's HBM bandwidth on large tensors, so these times are lower bounds).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from ringlab.calc.kvcache import kv_heads_per_rank
from ringlab.calc.layers import LayerSpec
from ringlab.calc.models import ModelConfig
from ringlab.calc.roofline import tensor_bytes
from ringlab.calc.training.flops import check_recompute
from ringlab.calc.training.layout import ParallelLayout
from ringlab.calc.training.memory import Precision
from ringlab.calc.units import dtype_bytes

_ATTENTION = ("full", "sliding", "chunked", "mla")


@dataclass(frozen=True)
class Kernel:
    """One memory-bound kernel of a layer: bytes moved (ints) on one GPU for one micro-batch, forward and
    backward. ``core_attention``: re-run by selective recomputation."""

    name: str
    forward: int
    backward: int
    core_attention: bool = False


def kernel_bytes(kernels: tuple[Kernel, ...], recompute: str = "none") -> int:
    """Bytes of ``kernels`` over one micro-batch: forward + backward + the forwards ``recompute`` re-runs."""
    check_recompute(recompute)
    total = sum(k.forward + k.backward for k in kernels)
    if recompute == "full":
        total += sum(k.forward for k in kernels)
    elif recompute == "selective":
        total += sum(k.forward for k in kernels if k.core_attention)
    return total


def _keys(layer: LayerSpec, seq_len: int) -> int:
    return min(seq_len, layer.window) if layer.mixer in ("sliding", "chunked") else seq_len


def _qk_widths(model: ModelConfig, layer: LayerSpec, tp: int) -> tuple[int, int, int]:
    """(query heads on one TP rank, Q width, K width) per token, of the parts a rotary embedding turns."""
    heads = model.num_attention_heads // tp
    if layer.mixer == "mla":  # only the rope part of each query head and the one shared rope key
        return heads, heads * model.qk_rope_head_dim, model.qk_rope_head_dim
    kv = kv_heads_per_rank(model, tp) if layer.kv_heads == model.num_key_value_heads else max(1, layer.kv_heads // tp)
    return heads, heads * layer.k_head_dim, kv * layer.k_head_dim


@lru_cache(maxsize=1024)
def _unnumbered(layer: LayerSpec) -> LayerSpec:
    """``layer`` as layer 0: the kernels do not depend on where a layer sits, so equal layers share a cache entry."""
    return replace(layer, index=0)


def layer_kernels(model: ModelConfig, layer: LayerSpec, seq_len: int, micro_batch: int = 1,
                  layout: ParallelLayout = ParallelLayout(), dropout: bool = False, flash_attention: bool = True,
                  act_dtype: str = "bf16") -> tuple[Kernel, ...]:
    """The memory-bound kernels of ``layer`` on one GPU of ``layout`` for one micro-batch (module docstring).

    ``dropout``: GPT-style training with dropout (masks of 1 B per element); ``flash_attention``: no score
    kernels; ``act_dtype``: of the activations (bytes per element E). Returns a tuple of :class:`Kernel`.
    """
    return _layer_kernels(model, _unnumbered(layer), seq_len, micro_batch, layout, dropout, flash_attention,
                          act_dtype)


@lru_cache(maxsize=4096)
def _layer_kernels(model: ModelConfig, layer: LayerSpec, seq_len: int, micro_batch: int, layout: ParallelLayout,
                   dropout: bool, flash_attention: bool, act_dtype: str) -> tuple[Kernel, ...]:
    t, e = layout.tp, dtype_bytes(act_dtype)
    tokens = micro_batch * (seq_len // layout.cp)
    rows = tokens / t if layout.sequence_parallel else tokens  # rows of the width-h tensors on this GPU
    h, mask = model.hidden_size, 1 if dropout else 0

    def size(elements_e: float, elements_1b: float = 0) -> int:
        return tensor_bytes(round(elements_e), act_dtype) + round(elements_1b)

    out = []
    parts = (layer.mixer != "none") + (layer.ffn != "none")
    norms = model.norms_per_layer if parts == 2 else parts
    out += [Kernel("norm", size(2 * rows * h), size(3 * rows * h))] * norms
    # a parallel block (GPT-J) adds attention and MLP outputs to the residual in one kernel
    adds, branches = (1, parts) if model.parallel_attn else (parts, 1)
    name = "residual add + dropout" if dropout else "residual add"
    for _ in range(adds):
        out.append(Kernel(name, size((branches + 2) * rows * h, mask * branches * rows * h),
                          size(3 * rows * h) + mask * branches * size(2 * rows * h, rows * h)))
    if layer.mixer in _ATTENTION:
        heads, q, k = _qk_widths(model, layer, t)
        if not model.position_embeddings:
            rope = size(2 * tokens * (q + k))
            out.append(Kernel("rotary embedding", rope, rope))
        if not flash_attention:
            scores = tokens * heads * _keys(layer, seq_len)
            out.append(Kernel("softmax", size(2 * scores), size(3 * scores), core_attention=True))
            if dropout:
                drop = size(2 * scores, scores)
                out.append(Kernel("attention dropout", drop, drop, core_attention=True))
    gated = model.mlp_gated
    width = 0
    if layer.ffn == "dense":
        width = layer.ffn_width
    elif layer.ffn == "moe":
        k = model.num_experts_per_tok
        width = k * layer.ffn_width + (model.n_shared_experts or 0) * layer.ffn_width
        width += model.shared_expert_intermediate_size or 0
        move = size(2 * rows * h * (k + 1))
        out.append(Kernel("moe dispatch + combine", move, move))
    if width:
        f = tokens * width / t
        out.append(Kernel("swiglu" if gated else "activation", size((3 if gated else 2) * f),
                          size((5 if gated else 3) * f)))
    return tuple(out)


def output_kernels(model: ModelConfig, seq_len: int, micro_batch: int = 1, layout: ParallelLayout = ParallelLayout(),
                   act_dtype: str = "bf16") -> tuple[Kernel, ...]:
    """The last stage's final norm and vocabulary-parallel cross-entropy on one GPU, one micro-batch
    (module docstring). Returns a tuple of :class:`Kernel`."""
    t = layout.tp
    tokens = micro_batch * (seq_len // layout.cp)
    rows = tokens / t if layout.sequence_parallel else tokens
    h = model.hidden_size
    logits = tokens * -(-model.vocab_size // t)
    loss = tensor_bytes(logits, act_dtype) + tensor_bytes(logits, "fp32")
    norm = [tensor_bytes(round(n * rows * h), act_dtype) for n in (2, 3)]
    return Kernel("final norm", *norm), Kernel("cross-entropy", loss, loss)


def optimizer_bytes_per_param(precision: Precision = Precision()) -> int:
    """Bytes fused Adam (with gradient-norm clipping) reads and writes per parameter it updates (module
    docstring): 30 for bf16 weights and gradients, fp32 master weights and moments; 34 with an fp32
    gradient accumulation buffer; 24 in pure bf16 (no master weights)."""
    grad = 4 if precision.fp32_grad_accum else int(dtype_bytes(precision.grad_dtype))
    weights = int(dtype_bytes(precision.param_dtype))
    moments = 2 * int(dtype_bytes(precision.optimizer_dtype))
    updated = 4 if precision.master_weights else weights  # the copy Adam updates, read and written
    copy = weights if precision.master_weights else 0  # the working copy written from the master
    return 2 * grad + 2 * (updated + moments) + copy
