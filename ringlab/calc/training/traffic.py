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


def stage_traffic(model: ModelConfig, layout: ParallelLayout, batch: Batch, stage: int = 0,
                  strategy: str = "ddp", precision: Precision = Precision(), recompute: str = "none",
                  load_imbalance: float = 1.0, act_dtype: str = "bf16",
                  no_sync: bool | None = None) -> tuple[TrafficItem, ...]:
    """Every collective one GPU of pipeline ``stage`` runs in one optimizer step (module docstring).

    ``no_sync``: gradient accumulation (:func:`~ringlab.calc.training.memory.resolve_no_sync`).
    Raises ValueError for a stage outside 0..pp-1, ``load_imbalance`` < 1 or above ep, an unknown recompute,
    or no_sync with zero2 / zero3.
    """
    check_recompute(recompute)
    no_sync = resolve_no_sync(strategy, no_sync)
    if not 0 <= stage < layout.pp:
        raise ValueError(f"stage must be in 0..{layout.pp - 1}, got {stage}")
    if not 1.0 <= load_imbalance <= max(1, layout.ep):
        raise ValueError(f"load_imbalance must be between 1 (uniform) and ep={layout.ep} (all tokens on one rank), "
                         f"got {load_imbalance}")
    t, cp, ep, p, v, m = layout.tp, layout.cp, layout.ep, layout.pp, layout.virtual_stages, batch.num_microbatches
    sp = layout.sequence_parallel
    e = activation_bytes_per_value(act_dtype)
    tokens = batch.micro_batch * (batch.seq_len // cp)
    hidden = tokens * model.hidden_size  # elements of one micro-batch's hidden states
    layers = [model.layers[i] for i in stage_layers(model, layout)[stage]]
    blocks = sum((layer.mixer != "none") + (layer.ffn != "none") for layer in layers)
    attention = [layer for layer in layers if layer.mixer in ("full", "sliding", "chunked", "mla")]
    moe_layers = sum(layer.ffn == "moe" for layer in layers)
    again = 1 if recompute == "full" else 0
    items: list[TrafficItem | None] = []

    if sp:
        items += [_ring("tp", "all_gather", "forward", t, m * blocks, hidden, e, "block input (sequence shards)"),
                  _ring("tp", "reduce_scatter", "forward", t, m * blocks, hidden, e, "block output partial sums"),
                  _ring("tp", "reduce_scatter", "backward", t, m * blocks, hidden, e, "input gradient partial sums"),
                  _ring("tp", "all_gather", "backward", t, 2 * m * blocks, hidden, e,
                        "output gradient, and the input again for the weight gradient"),
                  _ring("tp", "all_gather", "recompute", t, again * m * blocks, hidden, e, "recomputed forward"),
                  _ring("tp", "reduce_scatter", "recompute", t, again * m * blocks, hidden, e, "recomputed forward")]
    else:
        items += [_ring("tp", "all_reduce", "forward", t, m * blocks, hidden, e, "block output partial sums"),
                  _ring("tp", "all_reduce", "backward", t, m * blocks, hidden, e, "input gradient partial sums"),
                  _ring("tp", "all_reduce", "recompute", t, again * m * blocks, hidden, e, "recomputed forward")]
    if stage == 0:
        items.append(_ring("tp", "reduce_scatter" if sp else "all_reduce", "forward", t, m, hidden, e,
                           "vocab-parallel embedding output"))
        if sp:
            items.append(_ring("tp", "all_gather", "backward", t, m, hidden, e, "embedding output gradient"))
    if stage == p - 1:
        if sp:
            items.append(_ring("tp", "all_gather", "forward", t, m, hidden, e, "LM head input"))
            items.append(_ring("tp", "all_gather", "backward", t, m, hidden, e,
                               "LM head input again, for its weight gradient"))
        items.append(_ring("tp", "reduce_scatter" if sp else "all_reduce", "backward", t, m, hidden, e,
                           "LM head input gradient"))

    if p > 1:
        message = hidden * e // (t if sp else 1)
        sends = {"forward": m * (v if stage < p - 1 else v - 1), "backward": m * (v if stage > 0 else v - 1)}
        for phase, count in sends.items():
            if count:
                what = "activations to the next stage" if phase == "forward" else "gradients to the previous stage"
                items.append(TrafficItem("pp", "send_recv", phase, 2, count, message, count * message, what))

    if cp > 1 and attention:
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
        for phase, passes, what in (("forward", 1, "K/V chunks round the ring"),
                                    ("backward", 2, "K/V and dK/dV round the ring"),
                                    ("recompute", again, "K/V again for the recomputed forward")):
            for width, n_layers in widths.items():
                chunk = tokens * width * e
                count = passes * (cp - 1) * m * n_layers
                if count:
                    items.append(TrafficItem("cp", "send_recv", phase, cp, count, chunk, count * chunk, what))

    if ep > 1 and moe_layers:
        routed = tokens // (t if sp else 1) * model.num_experts_per_tok * model.hidden_size
        per_call = int(pairwise_all_to_all_bytes(ep, routed, e)[0])
        busiest = round(per_call * load_imbalance)
        for phase, calls in (("forward", 2), ("backward", 2), ("recompute", 2 * again)):
            if calls:
                count = calls * m * moe_layers
                items.append(TrafficItem("ep", "all_to_all", phase, ep, count, routed * e, count * busiest,
                                         "token dispatch and combine"))

    held = stage_params(model, layout)[stage]
    for dim, n_params, group in (("dp", held.dense, layout.grad_group), ("edp", held.expert, layout.expert_dp)):
        if n_params == 0 or group == 1:
            continue
        g_size, p_size = int(dtype_bytes(precision.grad_dtype)), int(dtype_bytes(precision.param_dtype))
        result = grad_comm_bytes(strategy, n_params, group, precision.grad_dtype, grad_accum_steps=m, no_sync=no_sync)
        for call in result.breakdown:
            scale = (p_size, g_size) if call.collective == "all_gather" else (1, 1)
            what = "parameters" if call.collective == "all_gather" else "gradients"
            items.append(TrafficItem(dim, call.collective, call.phase, call.group_size, call.count,
                                     call.message_bytes * scale[0] // scale[1], call.bytes_sent * scale[0] // scale[1],
                                     what + (" (experts)" if dim == "edp" else "")))
    return tuple(item for item in items if item is not None)


def bytes_by_dimension(items: tuple[TrafficItem, ...]) -> dict[str, int]:
    """Bytes sent per dimension (``DIMENSIONS`` order, zeros included)."""
    totals = dict.fromkeys(DIMENSIONS, 0)
    for item in items:
        totals[item.dim] += item.bytes_sent
    return totals
