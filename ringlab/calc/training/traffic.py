"""Bytes each GPU sends per optimizer step, per parallel dimension and collective.

Counts are per GPU of one pipeline stage, for one optimizer step of ``m`` micro-batches. Message sizes use
``a = b x (s / cp) x h x bytes(act_dtype)``, one micro-batch's hidden states on one GPU. Bytes per call are
the busiest rank's bytes of a ring (``ringlab.calc.comm.ring_bytes_per_rank``) or of the pairwise
all-to-all (``ringlab.collectives.pairwise_all_to_all_bytes``): the counts ringlab's own schedules move.

TP (Shoeybi et al. 2019 sec. 3; Korthikanti et al. 2022 sec. 4.2.2), per block (attention, MLP/MoE) per
micro-batch, message ``a``:

- without sequence parallelism: one all_reduce in forward (the g operator after the row-parallel matmul)
  and one in backward (f before the column-parallel one): 4 all-reduces per layer, not 2;
- with sequence parallelism: forward all_gather + reduce_scatter; backward reduce_scatter + all_gather (their
  conjugates) and one more all_gather, because Megatron stores the sequence-sharded input and gathers it
  again for the weight gradient (``megatron/core/tensor_parallel/layers.py``,
  ``LinearWithGradAccumulationAndAsyncCommunication.backward``);
- full recomputation repeats each forward collective in backward; the first stage's vocab-parallel
  embedding adds one forward all_reduce, the last stage's LM head one backward all_reduce (of its input
  gradient). With SP each of these has its sequence-parallel pair: the embedding reduce-scatters its output
  into sequence shards in forward and all-gathers that gradient in backward (Megatron-Core's
  ``reduce_scatter_to_sequence_parallel_region``, whose backward is an all-gather); the LM head, a
  column-parallel linear, all-gathers its input in forward, reduce-scatters the input gradient in backward
  and all-gathers the input once more for its weight gradient (the same
  ``LinearWithGradAccumulationAndAsyncCommunication.backward``). Two more backward all-gathers per
  micro-batch than the blocks alone.

PP (Narayanan et al. 2021 sec. 2.2): per micro-batch a stage sends its output forward and its input
gradient backward, ``a`` each (``a / tp`` with SP: Megatron sends the sequence shard); with ``v`` virtual
stages every chunk boundary does so, v times the messages (the first stage sends no gradient, the last no
activation, except between its own chunks).

CP (ring attention; Liu et al. 2023; Megatron-Core with Transformer Engine's P2P ring): per attention layer
per micro-batch each GPU passes the K and V chunk it holds (``b s/cp x kv_heads_per_rank x (d_k + d_v)``
elements) to the next rank cp - 1 times in forward; in backward K/V go round again and the partial dK/dV
as well, 2(cp - 1) sends; full recompute adds the forward cp - 1. The cp - 1 forward sends are exactly a
ring all_gather of the cp chunks.

EP (Lepikhin et al. 2021, GShard; Megatron-Core's all-to-all token dispatcher): per MoE layer per
micro-batch, dispatch and combine all-to-all in forward and both again in backward (4, not 1), each of
``tokens x top_k x h`` elements, tokens = ``b s / cp`` (/ tp with SP). A rank keeps 1/ep of it, so
``(ep-1)/ep`` leaves it under uniform routing; ``load_imbalance`` (tokens at the busiest expert rank over
the mean) scales the busiest rank's bytes.

DP: :func:`ringlab.calc.comm.grad_comm_bytes` of the stage's dense parameters over dp x cp and of its
expert parameters over the expert-data-parallel group, with ``m`` micro-batches (``grad_accum_steps``) and
:func:`~ringlab.calc.training.memory.resolve_no_sync` (zero2, zero3 and FSDP reduce-scatter in every micro-batch);
gradients travel in ``grad_dtype``, parameter all-gathers in ``param_dtype`` (ring bytes scale with the element size).
"""

from __future__ import annotations

from dataclasses import dataclass

from ringlab.calc.comm import grad_comm_bytes, ring_bytes_per_rank
from ringlab.calc.kvcache import kv_heads_per_rank
from ringlab.calc.models import ModelConfig
from ringlab.calc.training.activations import activation_bytes_per_value
from ringlab.calc.training.flops import check_recompute
from ringlab.calc.training.layout import Batch, ParallelLayout, stage_layers
from ringlab.calc.training.memory import Precision, resolve_no_sync, stage_params
from ringlab.calc.units import dtype_bytes
from ringlab.collectives import pairwise_all_to_all_bytes

DIMENSIONS = ("tp", "cp", "ep", "pp", "dp", "edp")


@dataclass(frozen=True)
class TrafficItem:
    """``count`` calls of ``collective`` (all_reduce, reduce_scatter, all_gather, all_to_all, send_recv) in
    ``phase`` (forward, backward, recompute, step) over ``group_size`` ranks of dimension ``dim``; each call
    on ``message_bytes`` (the whole tensor; for send_recv the one message); ``bytes_sent``: the busiest
    rank's bytes over all calls (int). ``what`` says which tensor moves."""

    dim: str
    collective: str
    phase: str
    group_size: int
    count: int
    message_bytes: int
    bytes_sent: int
    what: str

    @property
    def bytes_per_call(self) -> int:
        return self.bytes_sent // self.count


def _ring(dim: str, collective: str, phase: str, n: int, count: int, numel: int, itemsize: int,
          what: str) -> TrafficItem | None:
    if count == 0 or n == 1:
        return None
    per_call = ring_bytes_per_rank(collective, numel, n, itemsize)
    return TrafficItem(dim, collective, phase, n, count, numel * itemsize, count * per_call, what)


@dataclass(frozen=True)
class StageShape:
    """What the traffic of one pipeline stage depends on, shared by the per-dimension functions.

    ``microbatches`` (m); ``tokens``: one micro-batch's tokens on one GPU, ``b x s / cp``; ``hidden``:
    elements of its hidden states, ``tokens x h``; ``itemsize``: bytes per activation value; ``layers``: the
    stage's layers; ``recompute_passes``: 1 under full recomputation, else 0.
    """

    model: ModelConfig
    layout: ParallelLayout
    stage: int
    microbatches: int
    tokens: int
    hidden: int
    itemsize: int
    layers: tuple
    recompute_passes: int

    @classmethod
    def of(cls, model: ModelConfig, layout: ParallelLayout, batch: Batch, stage: int = 0, recompute: str = "none",
           act_dtype: str = "bf16") -> StageShape:
        """The shape of ``stage`` (0..pp-1, else ValueError); ``recompute`` as :func:`stage_traffic` takes it."""
        check_recompute(recompute)
        if not 0 <= stage < layout.pp:
            raise ValueError(f"stage must be in 0..{layout.pp - 1}, got {stage}")
        tokens = batch.micro_batch * (batch.seq_len // layout.cp)
        layers = tuple(model.layers[i] for i in stage_layers(model, layout)[stage])
        return cls(model, layout, stage, batch.num_microbatches, tokens, tokens * model.hidden_size,
                   activation_bytes_per_value(act_dtype), layers, 1 if recompute == "full" else 0)


def tp_traffic(s: StageShape) -> list[TrafficItem]:
    """TP collectives of the stage's blocks, plus the embedding's (first stage) and the LM head's (last stage)."""
    t, m, hidden, e, again, sp = (s.layout.tp, s.microbatches, s.hidden, s.itemsize, s.recompute_passes,
                                  s.layout.sequence_parallel)
    blocks = sum((layer.mixer != "none") + (layer.ffn != "none") for layer in s.layers)
    if sp:
        items = [_ring("tp", "all_gather", "forward", t, m * blocks, hidden, e, "block input (sequence shards)"),
                 _ring("tp", "reduce_scatter", "forward", t, m * blocks, hidden, e, "block output partial sums"),
                 _ring("tp", "reduce_scatter", "backward", t, m * blocks, hidden, e, "input gradient partial sums"),
                 _ring("tp", "all_gather", "backward", t, 2 * m * blocks, hidden, e,
                       "output gradient, and the input again for the weight gradient"),
                 _ring("tp", "all_gather", "recompute", t, again * m * blocks, hidden, e, "recomputed forward"),
                 _ring("tp", "reduce_scatter", "recompute", t, again * m * blocks, hidden, e, "recomputed forward")]
    else:
        items = [_ring("tp", "all_reduce", "forward", t, m * blocks, hidden, e, "block output partial sums"),
                 _ring("tp", "all_reduce", "backward", t, m * blocks, hidden, e, "input gradient partial sums"),
                 _ring("tp", "all_reduce", "recompute", t, again * m * blocks, hidden, e, "recomputed forward")]
    if s.stage == 0:
        items.append(_ring("tp", "reduce_scatter" if sp else "all_reduce", "forward", t, m, hidden, e,
                           "vocab-parallel embedding output"))
        if sp:
            items.append(_ring("tp", "all_gather", "backward", t, m, hidden, e, "embedding output gradient"))
    if s.stage == s.layout.pp - 1:
        if sp:
            items.append(_ring("tp", "all_gather", "forward", t, m, hidden, e, "LM head input"))
            items.append(_ring("tp", "all_gather", "backward", t, m, hidden, e,
                               "LM head input again, for its weight gradient"))
        items.append(_ring("tp", "reduce_scatter" if sp else "all_reduce", "backward", t, m, hidden, e,
                           "LM head input gradient"))
    return [item for item in items if item is not None]


def pp_traffic(s: StageShape) -> list[TrafficItem]:
    """PP sends of the stage: activations forward, input gradients backward, v times per micro-batch."""
    p, v, m = s.layout.pp, s.layout.virtual_stages, s.microbatches
    if p == 1:
        return []
    message = s.hidden * s.itemsize // (s.layout.tp if s.layout.sequence_parallel else 1)
    sends = {"forward": m * (v if s.stage < p - 1 else v - 1), "backward": m * (v if s.stage > 0 else v - 1)}
    return [TrafficItem("pp", "send_recv", phase, 2, count, message, count * message,
                        "activations to the next stage" if phase == "forward" else "gradients to the previous stage")
            for phase, count in sends.items() if count]


def cp_traffic(s: StageShape) -> list[TrafficItem]:
    """CP ring-attention sends of the stage's attention layers, grouped by K+V width per token."""
    model, t, cp = s.model, s.layout.tp, s.layout.cp
    attention = [layer for layer in s.layers if layer.mixer in ("full", "sliding", "chunked", "mla")]
    if cp == 1 or not attention:
        return []
    widths: dict[int, int] = {}  # K+V elements per token on this GPU -> attention layers with that width
    for layer in attention:
        if layer.mixer == "mla":  # decompressed per-head K and V
            width = model.num_attention_heads // t * (model.qk_nope_head_dim + model.qk_rope_head_dim
                                                      + model.v_head_dim)
        else:
            kv = (kv_heads_per_rank(model, t) if layer.kv_heads == model.num_key_value_heads
                  else max(1, layer.kv_heads // t))
            width = kv * (layer.k_head_dim + layer.v_head_dim)
        widths[width] = widths.get(width, 0) + 1
    items = []
    for phase, passes, what in (("forward", 1, "K/V chunks round the ring"),
                                ("backward", 2, "K/V and dK/dV round the ring"),
                                ("recompute", s.recompute_passes, "K/V again for the recomputed forward")):
        for width, n_layers in widths.items():
            chunk = s.tokens * width * s.itemsize
            count = passes * (cp - 1) * s.microbatches * n_layers
            if count:
                items.append(TrafficItem("cp", "send_recv", phase, cp, count, chunk, count * chunk, what))
    return items


def ep_traffic(s: StageShape, load_imbalance: float = 1.0) -> list[TrafficItem]:
    """EP all-to-alls of the stage's MoE layers (dispatch and combine); ``load_imbalance`` in [1, ep] scales
    the busiest rank's bytes (ValueError outside)."""
    t, ep, model = s.layout.tp, s.layout.ep, s.model
    if not 1.0 <= load_imbalance <= max(1, ep):
        raise ValueError(f"load_imbalance must be between 1 (uniform) and ep={ep} (all tokens on one rank), "
                         f"got {load_imbalance}")
    moe_layers = sum(layer.ffn == "moe" for layer in s.layers)
    if ep == 1 or not moe_layers:
        return []
    routed = s.tokens // (t if s.layout.sequence_parallel else 1) * model.num_experts_per_tok * model.hidden_size
    busiest = round(int(pairwise_all_to_all_bytes(ep, routed, s.itemsize)[0]) * load_imbalance)
    return [TrafficItem("ep", "all_to_all", phase, ep, calls * s.microbatches * moe_layers, routed * s.itemsize,
                        calls * s.microbatches * moe_layers * busiest, "token dispatch and combine")
            for phase, calls in (("forward", 2), ("backward", 2), ("recompute", 2 * s.recompute_passes)) if calls]


def dp_traffic(s: StageShape, strategy: str = "ddp", precision: Precision = Precision(),
               no_sync: bool | None = None) -> list[TrafficItem]:
    """DP gradient (and parameter) collectives of the stage's dense parameters over dp x cp ("dp") and of its
    expert parameters over expert-dp ("edp"): :func:`ringlab.calc.comm.grad_comm_bytes`, gradients in
    ``grad_dtype``, parameter all-gathers in ``param_dtype``."""
    no_sync = resolve_no_sync(strategy, no_sync)
    held = stage_params(s.model, s.layout)[s.stage]
    g_size, p_size = int(dtype_bytes(precision.grad_dtype)), int(dtype_bytes(precision.param_dtype))
    items = []
    for dim, n_params, group in (("dp", held.dense, s.layout.grad_group), ("edp", held.expert, s.layout.expert_dp)):
        if n_params == 0 or group == 1:
            continue
        result = grad_comm_bytes(strategy, n_params, group, precision.grad_dtype, grad_accum_steps=s.microbatches,
                                 no_sync=no_sync)
        for call in result.breakdown:
            num, den = (p_size, g_size) if call.collective == "all_gather" else (1, 1)
            what = "parameters" if call.collective == "all_gather" else "gradients"
            items.append(TrafficItem(dim, call.collective, call.phase, call.group_size, call.count,
                                     call.message_bytes * num // den, call.bytes_sent * num // den,
                                     what + (" (experts)" if dim == "edp" else "")))
    return items


def stage_traffic(model: ModelConfig, layout: ParallelLayout, batch: Batch, stage: int = 0,
                  strategy: str = "ddp", precision: Precision = Precision(), recompute: str = "none",
                  load_imbalance: float = 1.0, act_dtype: str = "bf16",
                  no_sync: bool | None = None) -> tuple[TrafficItem, ...]:
    """Every collective one GPU of pipeline ``stage`` runs in one optimizer step (module docstring), in the
    order tp, pp, cp, ep, dp: :func:`tp_traffic`, :func:`pp_traffic`, :func:`cp_traffic`, :func:`ep_traffic`,
    :func:`dp_traffic` of the stage's :class:`StageShape`.

    ``no_sync``: gradient accumulation (:func:`~ringlab.calc.training.memory.resolve_no_sync`).
    Raises ValueError for a stage outside 0..pp-1, ``load_imbalance`` < 1 or above ep, an unknown recompute,
    or no_sync with zero2 / zero3.
    """
    check_recompute(recompute)
    resolve_no_sync(strategy, no_sync)
    shape = StageShape.of(model, layout, batch, stage, recompute, act_dtype)
    ep = ep_traffic(shape, load_imbalance)
    return tuple(tp_traffic(shape) + pp_traffic(shape) + cp_traffic(shape) + ep
                 + dp_traffic(shape, strategy, precision, no_sync))


def bytes_by_dimension(items: tuple[TrafficItem, ...]) -> dict[str, int]:
    """Bytes sent per dimension (``DIMENSIONS`` order, zeros included)."""
    totals = dict.fromkeys(DIMENSIONS, 0)
    for item in items:
        totals[item.dim] += item.bytes_sent
    return totals
