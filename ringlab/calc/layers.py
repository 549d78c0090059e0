"""One decoder layer as the calculators see it: what its token mixer caches, and what its FFN holds.

A model is a tuple of :class:`LayerSpec` (``ModelConfig.layers``). KV bytes, parameters and decode
reads are sums over that tuple, so models whose layers differ (interleaved sliding-window and
global attention, Mamba/attention hybrids, pruned Nemotron-NAS blocks) are counted layer by layer.

Mixers (``LayerSpec.mixer``):

==================  ==========================================================================
``full``            causal attention over every cached token
``sliding``         attention over the last ``window`` tokens (Mistral v0.1, Gemma-2/3, gpt-oss)
``chunked``         attention inside fixed chunks of ``window`` tokens (Llama-4's local layers);
                    the cache of such a layer never holds more than one chunk
``mla``             multi-head latent attention (DeepSeek-V2/V3): one latent + shared RoPE key
``mamba``           Mamba-1 / Mamba-2 state-space mixer: a fixed-size state, no KV cache
``linear_attention`` linear-attention mixers (Gated DeltaNet in Qwen3-Next): fixed state, no KV
``linear``          attention replaced by one hidden x hidden matrix (Nemotron-NAS): no KV
``none``            no token mixer in this layer (Nemotron-NAS no-op, Nemotron-H MLP blocks)
==================  ==========================================================================

FFNs (``LayerSpec.ffn``): ``dense``, ``moe``, ``linear`` (one hidden x hidden matrix), ``none``.
"""

from __future__ import annotations

from dataclasses import dataclass

ATTENTION_MIXERS = ("full", "sliding", "chunked", "mla")
STATE_MIXERS = ("mamba", "linear_attention")
MIXERS = ATTENTION_MIXERS + STATE_MIXERS + ("linear", "none")
FFNS = ("dense", "moe", "linear", "none")


@dataclass(frozen=True)
class LayerSpec:
    """One layer: ``mixer`` and ``ffn`` (see the module docstring) and what the KV cache holds.

    ``window``: tokens a ``sliding`` layer sees, or the chunk of a ``chunked`` layer (None
    otherwise). ``kv_heads``, ``k_head_dim``, ``v_head_dim``: KV heads cached and the per-head
    sizes of K and V (0 for layers that cache nothing); an ``mla`` layer caches one latent of
    ``k_head_dim`` = kv_lora_rank + qk_rope_head_dim elements per token (``kv_heads`` 1,
    ``v_head_dim`` 0). ``ffn_width``: intermediate size of the dense FFN, or of one expert.
    ``index_bytes``: bytes per token cached besides K and V, whatever the cache dtype (DeepSeek sparse
    attention's indexer key, :func:`dsa_index_key_bytes`; 0 elsewhere).
    """

    index: int
    mixer: str
    window: int | None
    kv_heads: int
    k_head_dim: int
    v_head_dim: int
    ffn: str
    ffn_width: int
    index_bytes: int = 0

    @property
    def caches_kv(self) -> bool:
        return self.mixer in ATTENTION_MIXERS

    def held_tokens(self, tokens: int) -> int:
        """Tokens of one sequence this layer keeps in its cache at a context of ``tokens`` (int).

        ``sliding``: min(tokens, window). ``chunked``: at most one chunk, min(tokens, window),
        which is the peak over a sequence that grows to ``tokens`` (vLLM sizes the local
        layers of Llama-4 by the chunk). Layers without KV hold 0.
        """
        if not self.caches_kv:
            return 0
        if self.mixer in ("sliding", "chunked"):
            return min(tokens, self.window)
        return tokens


def dsa_index_key_bytes(index_head_dim: int) -> int:
    """Bytes per token and layer of DeepSeek sparse attention's indexer-key cache (int).

    The lightning indexer keeps one key of ``index_head_dim`` per token in FP8 (1 B each) with one
    fp32 scale per 128-element block: 128 + 4 = 132 B for DeepSeek-V3.2's ``index_head_dim`` 128
    (``k_cache`` and ``k_scale_cache`` of the Indexer in DeepSeek-V3.2-Exp's inference/model.py).
    """
    return index_head_dim + 4 * -(-index_head_dim // 128)


@dataclass(frozen=True)
class MambaSpec:
    """Sizes of a model's Mamba mixers, for their parameter count (they cache no KV).

    ``version`` 1: Mamba (Gu & Dao 2023), as in Jamba: in_proj (hidden -> 2 d_inner), a depthwise
    conv1d of ``d_conv`` taps, x_proj (d_inner -> dt_rank + 2 d_state), dt_proj (dt_rank -> d_inner,
    with bias), A_log (d_inner x d_state), D, out_proj; ``inner_norms`` adds Jamba's dt/B/C RMSNorms.
    ``version`` 2: Mamba-2 (Dao & Gu 2024), as in Nemotron-H: in_proj (hidden -> 2 d_inner +
    2 n_groups d_state + num_heads), conv1d over d_inner + 2 n_groups d_state channels, dt_bias,
    A_log and D per head, a gated RMSNorm over d_inner, out_proj. Module layouts follow
    transformers' modeling_jamba.py and modeling_nemotron_h.py.
    """

    version: int
    d_inner: int
    d_state: int
    d_conv: int
    dt_rank: int = 0
    num_heads: int = 0
    n_groups: int = 1
    conv_bias: bool = True
    proj_bias: bool = False
    inner_norms: bool = False

    def params(self, hidden: int) -> int:
        """Parameters of one mixer for a model of width ``hidden`` (int)."""
        d, n = self.d_inner, self.d_state
        bias = 2 if self.proj_bias else 0
        if self.version == 1:
            in_proj = hidden * 2 * d + (2 * d if self.proj_bias else 0)
            conv = d * self.d_conv + (d if self.conv_bias else 0)
            ssm = d * (self.dt_rank + 2 * n) + self.dt_rank * d + d + d * n + d
            norms = self.dt_rank + 2 * n if self.inner_norms else 0
            return in_proj + conv + ssm + norms + d * hidden + (hidden if self.proj_bias else 0)
        proj_out = 2 * d + 2 * self.n_groups * n + self.num_heads
        conv_dim = d + 2 * self.n_groups * n
        in_proj = hidden * proj_out + (proj_out if bias else 0)
        conv = conv_dim * self.d_conv + (conv_dim if self.conv_bias else 0)
        return in_proj + conv + 3 * self.num_heads + d + d * hidden + (hidden if bias else 0)
