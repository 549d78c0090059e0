"""Training FLOPs of the per-layer model: forward and backward per layer, 6ND plus attention per step.

API (names kept stable: the step-timeline simulator imports them)
---
``LayerFlops``                     forward FLOPs of one layer for one micro-batch: ``matmul`` + ``attention``;
                                   ``.forward``, ``.backward`` (= 2 x forward), ``.recompute(mode)``
``layer_flops(model, layer, seq_len, micro_batch=1, causal=False)``   -> LayerFlops
``model_layer_flops(model, seq_len, micro_batch=1, causal=False)``     -> tuple of LayerFlops, one per layer
``lm_head_flops(model, seq_len, micro_batch=1)``                        forward FLOPs of the output layer (int)
``attention_pairs(layer, seq_len, causal=False)``                      (query, key) pairs scored per sequence
``StepFlops`` / ``step_flops(model, seq_len, global_batch, recompute="none", causal=False)``
                                   per optimizer step: model FLOPs (6ND + attention) and hardware FLOPs
                                   (model FLOPs + recomputation)

Conventions
-----------
- A weight matmul costs 2 FLOPs per weight per token (one multiply, one add). Every parameter a token
  uses counts, norm weights and biases included (the "6N" of Kaplan et al. 2020 counts all of them;
  they are < 0.01% of a layer). MoE layers count the router, the shared experts and the
  ``num_experts_per_tok`` routed experts: the active parameters of :mod:`ringlab.calc.params`.
  Embedding lookups cost nothing; the LM head costs ``2 x vocab x hidden`` per token, tied or not; the
  final norm (hidden weights) is left out.
- Attention adds, per sequence, ``2 x pairs x heads x (d_qk + d_v)`` FLOPs: QK^T (``d_qk`` per pair and
  head) and softmax(QK^T) V (``d_v``). ``causal=False`` counts every key for every query, the
  convention of Narayanan et al. 2021 (eq. 3: ``4 B s^2 h`` per layer forward) and of PaLM's MFU
  (Chowdhery et al. 2022, app. B: ``6N + 12 L H Q T`` per token); ``causal=True`` counts only the
  pairs a causal kernel computes (key <= query; FlashAttention skips the masked blocks). Sliding and
  chunked layers score ``min(window, ...)`` keys per query (:func:`attention_pairs`). Mamba and other
  state mixers count their projections only (the scan is O(d_inner x d_state) per token, not a matmul).
- Backward = 2 x forward, for matmuls (input gradient and weight gradient) and for attention (dQ and dK
  from dS, dP and dV from dO): Narayanan et al. 2021, sec. 5.1.
- Recomputation (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
  Models", sec. 5): ``full`` re-runs each layer's forward in backward; ``selective`` re-runs only the
  core attention (QK^T, softmax, dropout, attention over V), i.e. the ``attention`` FLOPs.
- Model FLOPs (for MFU) exclude recomputation; hardware FLOPs include it (Chowdhery et al. 2022, app. B;
  Korthikanti et al. 2022, sec. 6.3). With ``full`` recompute and ``causal=False`` on a GPT-3-style model,
  hardware FLOPs per step are Narayanan et al.'s ``96 B s l h^2 (1 + s/(6h) + V/(16 l h))``.
- Units: FLOPs (not FLOP/s), exact ints.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ringlab.calc.layers import LayerSpec
from ringlab.calc.models import ModelConfig, get_model
from ringlab.calc.params import layer_param_count
from ringlab.validation import check_int

RECOMPUTE = ("none", "selective", "full")


def check_recompute(recompute: str) -> str:
    """``recompute`` if it is one of :data:`RECOMPUTE`, else ValueError naming the accepted values."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}, got {recompute!r}")
    return recompute


@dataclass(frozen=True)
class LayerFlops:
    """Forward FLOPs (ints) of one layer for one micro-batch of ``micro_batch x seq_len`` tokens.

    ``matmul``: the weight matmuls; ``attention``: QK^T and softmax(QK^T)V (0 for layers without
    attention). Divide by the tensor- and context-parallel degrees for one GPU's share.
    """

    index: int
    mixer: str
    ffn: str
    matmul: int
    attention: int

    @property
    def forward(self) -> int:
        return self.matmul + self.attention

    @property
    def backward(self) -> int:
        """Input plus weight gradients: 2 x forward."""
        return 2 * self.forward

    def recompute(self, mode: str) -> int:
        """Forward FLOPs re-run in backward under ``mode`` (none: 0, selective: attention, full: forward)."""
        return {"none": 0, "selective": self.attention, "full": self.forward}[check_recompute(mode)]


def attention_pairs(layer: LayerSpec, seq_len: int, causal: bool = False) -> int:
    """(query, key) pairs one sequence of ``seq_len`` tokens scores in ``layer`` (int; 0 without attention).

    ``full``/``mla``: s^2, or s(s+1)/2 when ``causal``. ``sliding`` (window w): each query sees at most w
    keys: s min(s, w), causal sum_i min(i, w) = w(w+1)/2 + (s-w) w for s > w. ``chunked`` (chunk w):
    attention inside each chunk, full chunks of w plus a last one of s mod w.
    """
    s = check_int(seq_len, "seq_len", min=1)
    if layer.mixer in ("full", "mla"):
        return s * (s + 1) // 2 if causal else s * s
    w = layer.window
    if layer.mixer == "sliding":
        if not causal:
            return s * min(s, w)
        return s * (s + 1) // 2 if s <= w else w * (w + 1) // 2 + (s - w) * w
    if layer.mixer == "chunked":
        full, rest = divmod(s, w)
        if causal:
            return full * (w * (w + 1) // 2) + rest * (rest + 1) // 2
        return full * w * w + rest * rest
    return 0


def _head_dims(model: ModelConfig, layer: LayerSpec) -> tuple[int, int]:
    """(d_qk, d_v) of one query head in ``layer``."""
    if layer.mixer == "mla":
        return model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    return layer.k_head_dim, layer.v_head_dim


def layer_flops(model: str | ModelConfig, layer: LayerSpec, seq_len: int, micro_batch: int = 1,
                causal: bool = False) -> LayerFlops:
    """Forward FLOPs of ``layer`` for ``micro_batch`` sequences of ``seq_len`` tokens (module docstring).

    GPT-3-style layer (hidden h, 4h MLP, no biases, causal=False): matmul ``24 b s h^2`` (+ norms),
    attention ``4 b s^2 h``. Raises ValueError for non-positive sizes.
    """
    model = get_model(model)
    s = check_int(seq_len, "seq_len", min=1)
    b = check_int(micro_batch, "micro_batch", min=1)
    matmul = 2 * layer_param_count(model, layer, active=True) * b * s
    d_qk, d_v = _head_dims(model, layer)
    attention = 2 * attention_pairs(layer, s, causal) * model.num_attention_heads * (d_qk + d_v) * b
    return LayerFlops(layer.index, layer.mixer, layer.ffn, matmul, attention)


@lru_cache(maxsize=256)
def model_layer_flops(model: str | ModelConfig, seq_len: int, micro_batch: int = 1,
                      causal: bool = False) -> tuple[LayerFlops, ...]:
    """:func:`layer_flops` of every layer of ``model``, in order (cached: a layout search asks again and again)."""
    model = get_model(model)
    return tuple(layer_flops(model, layer, seq_len, micro_batch, causal) for layer in model.layers)


def lm_head_flops(model: str | ModelConfig, seq_len: int, micro_batch: int = 1) -> int:
    """Forward FLOPs of the output layer: ``2 x vocab_size x hidden_size`` per token (int)."""
    model = get_model(model)
    tokens = check_int(seq_len, "seq_len", min=1) * check_int(micro_batch, "micro_batch", min=1)
    return 2 * model.vocab_size * model.hidden_size * tokens


@dataclass(frozen=True)
class StepFlops:
    """FLOPs (ints) of one optimizer step over ``tokens`` = global batch x sequence length.

    ``forward``: layers + LM head, one pass. ``model_flops`` = 3 x forward (6ND + attention), the
    numerator of MFU. ``recompute_flops``: forward work re-run in backward. ``hardware_flops`` =
    model + recompute (HFU's numerator). ``six_nd``: 6 x active non-embedding-lookup params x tokens
    (the same matmul FLOPs without attention).
    """

    tokens: int
    forward: int
    attention_forward: int
    recompute_flops: int
    six_nd: int

    @property
    def model_flops(self) -> int:
        return 3 * self.forward

    @property
    def hardware_flops(self) -> int:
        return self.model_flops + self.recompute_flops

    @property
    def model_flops_per_token(self) -> float:
        return self.model_flops / self.tokens


@lru_cache(maxsize=256)
def step_flops(model: str | ModelConfig, seq_len: int, global_batch: int, recompute: str = "none",
               causal: bool = False) -> StepFlops:
    """FLOPs of one optimizer step over ``global_batch`` sequences of ``seq_len`` tokens.

    Sums :func:`layer_flops` over the layers and adds the LM head (module docstring for conventions).
    Raises ValueError for non-positive sizes or an unknown ``recompute``.
    """
    model = get_model(model)
    check_recompute(recompute)
    gb = check_int(global_batch, "global_batch", min=1)
    layers = model_layer_flops(model, seq_len, gb, causal)
    head = lm_head_flops(model, seq_len, gb)
    forward = sum(x.forward for x in layers) + head
    attention = sum(x.attention for x in layers)
    recomputed = sum(x.recompute(recompute) for x in layers)
    return StepFlops(gb * seq_len, forward, attention, recomputed, 3 * (forward - attention))
