"""Model-state memory per GPU (parameters, gradients, optimizer states) under DP x TP x PP x CP x EP and ZeRO/FSDP.

Which parameters a GPU holds (Megatron-LM's layout, Shoeybi et al. 2019; Narayanan et al. 2021):

- attention: Q and O split by heads over tp; K and V split by KV heads, replicated when tp exceeds them
  (``ringlab.calc.kvcache.kv_heads_per_rank``); the O bias is replicated (row-parallel);
  MLA: down-projections (q_a, kv_a) replicated, up-projections and O split by heads;
- dense FFN: the intermediate width split over tp (column-parallel FC1, row-parallel FC2, FC2 bias replicated);
- MoE layer: the router replicated; ``num_experts / ep`` routed experts per GPU, each split over tp
  (expert tensor parallel = tp); shared experts split over tp like a dense FFN;
- norms replicated; embeddings split over tp by vocabulary rows (VocabParallelEmbedding) on the first
  stage, the LM head (and the final norm) on the last stage; a tied embedding with pp > 1 is held on both
  (Megatron keeps a copy on the last stage and all-reduces its gradient), learned positions on the first.
  Mamba and ``linear`` mixers are split over tp.

Parameter counts per piece are :mod:`ringlab.calc.params`' functions applied to the per-GPU shapes, so
the unsharded total equals ``ModelConfig.param_count()`` (tested).

Sharding of model states over the data-parallel group: :func:`ringlab.calc.comm.grad_comm_bytes`'s
``memory`` (ZeRO paper, Rajbhandari et al. 2020, sec. 5; ``ddp`` / ZeRO-0, ``zero1``, ``zero2``,
``fsdp_shard_grad_op``, ``fsdp_full_shard`` = ``zero3``). Dense parameters are sharded over dp x cp,
expert parameters over the expert-data-parallel group (:class:`~ringlab.calc.training.layout.ParallelLayout`).

Gradient accumulation (:func:`resolve_no_sync`): the strategies that shard gradients (zero2, zero3 and the
FSDP ones) reduce-scatter them in every micro-batch, so each GPU accumulates only its shard and the ZeRO
paper's Figure 1 holds for any number of micro-batches: stage 3 keeps (2 + 2 + 12) Psi / N. FSDP's
``no_sync`` is a separate choice (whole gradients until the last micro-batch, one reduce-scatter per step);
DeepSpeed refuses it with stages 2 and 3.

Bytes per parameter (mixed-precision Adam; ZeRO paper sec. 3.1: 2 + 2 + 12 = 16):
``param_dtype`` weights (bf16: 2), ``grad_dtype`` gradients (bf16: 2), fp32 master weights (4, unless
``master_weights=False``, e.g. pure-bf16 training), Adam's two moments in ``optimizer_dtype`` (fp32: 4 + 4).
``fp32_grad_accum=True`` adds a 4-byte gradient accumulation buffer sharded like the gradients (Nanotron /
Megatron ``main_grad``: the Ultra-Scale Playbook's 20 B/param).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import lru_cache

from ringlab.calc.comm import ModelStates, canonical_strategy, grad_comm_bytes
from ringlab.calc.kvcache import attention_heads_per_rank, kv_heads_per_rank
from ringlab.calc.layers import LayerSpec
from ringlab.calc.models import ModelConfig
from ringlab.calc.params import mixer_param_count, mlp_param_count, norm_param_count
from ringlab.validation import check_bool
from ringlab.calc.training.layout import ParallelLayout, stage_layers
from ringlab.calc.units import canonical_dtype, dtype_bytes


@dataclass(frozen=True)
class StageParams:
    """Parameters one GPU of a pipeline stage holds (ints): ``dense`` (reduced over dp x cp) and
    ``expert`` (routed experts, reduced over the expert-data-parallel group)."""

    stage: int
    dense: int
    expert: int

    @property
    def total(self) -> int:
        return self.dense + self.expert


def _tp_attention_params(model: ModelConfig, layer: LayerSpec, tp: int) -> int:
    heads = attention_heads_per_rank(model, tp)
    if layer.mixer == "mla":  # no KV heads to split: the shard is the model with its heads per rank
        return mixer_param_count(dataclasses.replace(model, num_attention_heads=heads, num_key_value_heads=heads), layer)
    kv = kv_heads_per_rank(model, tp) if layer.kv_heads == model.num_key_value_heads else max(1, layer.kv_heads // tp)
    shard = dataclasses.replace(model, num_attention_heads=heads, num_key_value_heads=kv)
    return mixer_param_count(shard, dataclasses.replace(layer, kv_heads=kv))


def layer_params_per_gpu(model: ModelConfig, layer: LayerSpec, layout: ParallelLayout) -> tuple[int, int]:
    """``(dense, expert)`` parameters of ``layer`` on one GPU of ``layout`` (module docstring for the split).

    Depends on the layout's ``tp`` and ``ep`` only, and is cached on them: a layout search asks for the same
    layers under thousands of layouts."""
    return _layer_params_per_gpu(model, layer, layout.tp, layout.ep)


@lru_cache(maxsize=1 << 16)
def _layer_params_per_gpu(model: ModelConfig, layer: LayerSpec, tp: int, ep: int) -> tuple[int, int]:
    t, h = tp, model.hidden_size
    if layer.mixer in ("full", "sliding", "chunked", "mla"):
        mixer = _tp_attention_params(model, layer, t)
    else:
        mixer = math.ceil(mixer_param_count(model, layer) / t)
    parts = (layer.mixer != "none") + (layer.ffn != "none")
    norms = (model.norms_per_layer if parts == 2 else parts) * norm_param_count(model, h)
    dense, expert = mixer + norms, 0
    if layer.ffn == "dense":
        dense += mlp_param_count(model, math.ceil(layer.ffn_width / t), model.mlp_bias)
    elif layer.ffn == "linear":
        dense += math.ceil(h * h / t)
    elif layer.ffn == "moe":
        experts = model.num_experts
        dense += h * experts + (experts if model.router_bias else 0)
        one = mlp_param_count(model, math.ceil(layer.ffn_width / t), model.expert_bias)
        expert = experts // ep * one
        dense += (model.n_shared_experts or 0) * one
        if model.shared_expert_intermediate_size:
            dense += mlp_param_count(model, math.ceil(model.shared_expert_intermediate_size / t), model.mlp_bias)
            dense += h if model.shared_expert_gate else 0
    return dense, expert


@lru_cache(maxsize=1024)
def stage_params(model: ModelConfig, layout: ParallelLayout) -> tuple[StageParams, ...]:
    """Parameters one GPU of each pipeline stage holds (tuple of ``pp`` :class:`StageParams`).

    Assumes ``check_layout`` passed. Raises ValueError for layouts whose parameters ``params.py`` does not model.
    Cached per (model, layout): the traffic of every stage and the memory ask for it again.
    """
    if model.params_unsupported:
        raise ValueError(f"{model.name}: parameter count not modelled for {model.params_unsupported}")
    t, h = layout.tp, model.hidden_size
    vocab_rows = math.ceil(model.vocab_size / t) * h
    out = []
    for stage, indices in enumerate(stage_layers(model, layout)):
        dense = expert = 0
        for i in indices:
            d, e = layer_params_per_gpu(model, model.layers[i], layout)
            dense, expert = dense + d, expert + e
        first, last = stage == 0, stage == layout.pp - 1
        if first:
            dense += vocab_rows + model.position_embeddings * h
        if last:
            dense += norm_param_count(model, h)
            if not model.tie_word_embeddings or layout.pp > 1:
                dense += vocab_rows
            if model.lm_head_bias:
                dense += math.ceil(model.vocab_size / t)
        out.append(StageParams(stage, dense, expert))
    return tuple(out)


@dataclass(frozen=True)
class Precision:
    """Dtypes of training state (module docstring): weights, gradients, master weights, Adam moments."""

    param_dtype: str = "bf16"
    grad_dtype: str = "bf16"
    master_weights: bool = True
    optimizer_dtype: str = "fp32"
    fp32_grad_accum: bool = False

    def __post_init__(self) -> None:
        for name in ("param_dtype", "grad_dtype", "optimizer_dtype"):
            dt = canonical_dtype(getattr(self, name))
            if dtype_bytes(dt) != int(dtype_bytes(dt)):
                raise ValueError(f"{name} {getattr(self, name)!r} is sub-byte; training state is kept in fp32, "
                                 "fp16, bf16 or fp8")
            object.__setattr__(self, name, dt)
        for name in ("master_weights", "fp32_grad_accum"):
            object.__setattr__(self, name, check_bool(getattr(self, name), name))

    @property
    def optimizer_bytes_per_param(self) -> int:
        """fp32 master copy (4 if kept) + Adam's m and v (2 x optimizer_dtype)."""
        return (4 if self.master_weights else 0) + 2 * int(dtype_bytes(self.optimizer_dtype))


_SHARDED_GRADIENTS = ("zero2", "fsdp_shard_grad_op", "fsdp_full_shard")


def resolve_no_sync(strategy: str, no_sync: bool | None = None) -> bool:
    """Whether the data-parallel gradient collective runs only in the last micro-batch of a step (bool).

    ``no_sync=None`` (default) picks what each strategy does: ddp and zero1 reduce once per step (DDP's
    ``no_sync``, Megatron's distributed optimizer; their gradients are whole either way); zero2, zero3 and
    the FSDP strategies reduce-scatter in every micro-batch, which is what keeps their gradients sharded
    (ZeRO paper sec. 5.2; DeepSpeed reduces at every micro-step). ``True`` with an FSDP strategy is torch's
    ``no_sync()`` / ``set_requires_gradient_sync(False)``: whole gradients until the last micro-batch.
    ``True`` with zero2 or zero3 (the DeepSpeed names) raises ValueError: DeepSpeed refuses it
    (``deepspeed/runtime/engine.py``, ``DeepSpeedEngine.no_sync`` asserts that gradients are not
    partitioned). ``False`` with ddp all-reduces in every micro-batch; zero1 reduces once either way.
    """
    canonical = canonical_strategy(strategy)
    if no_sync is None:
        return canonical not in _SHARDED_GRADIENTS
    no_sync = check_bool(no_sync, "no_sync")
    deepspeed_name = strategy.strip().lower().replace("-", "_").startswith("zero")
    if no_sync and canonical in _SHARDED_GRADIENTS and deepspeed_name:
        raise ValueError(f"no_sync with {strategy}: DeepSpeed ZeRO stages 2 and 3 partition gradients and reduce "
                         "them in every micro-batch (DeepSpeedEngine.no_sync refuses); FSDP's no_sync keeps whole "
                         "gradients instead: use fsdp_shard_grad_op or fsdp_full_shard")
    return no_sync


def sharded_state_bytes(n_params: int, group_size: int, strategy: str, precision: Precision,
                        microbatches: int = 1, no_sync: bool | None = None) -> tuple[int, int, int]:
    """``(params, grads, optimizer)`` bytes per GPU for ``n_params`` sharded over ``group_size`` ranks.

    The sharding is ``grad_comm_bytes(strategy, ...).memory`` (ceil(n / N) elements per shard); gradients
    are rescaled to ``grad_dtype`` and the fp32 accumulation buffer follows the gradients' sharding.
    ``microbatches`` and ``no_sync``: gradient accumulation (:func:`resolve_no_sync`).
    ZeRO paper fig. 1 (7.5e9 params, N = 64, 2 + 2 + 12): 120 GB, 31.4 GB, 16.6 GB, 1.9 GB for
    ddp, zero1, zero2, zero3, at any number of micro-batches. Returns zeros for ``n_params == 0``.
    """
    sync = resolve_no_sync(strategy, no_sync)
    if n_params == 0:
        return 0, 0, 0
    mem = grad_comm_bytes(strategy, n_params, group_size, precision.param_dtype, grad_accum_steps=microbatches,
                          no_sync=sync, optimizer_bytes_per_param=precision.optimizer_bytes_per_param).memory
    p_size = int(dtype_bytes(precision.param_dtype))
    grad_elems = mem.grads // p_size
    grads = grad_elems * int(dtype_bytes(precision.grad_dtype)) + (4 * grad_elems if precision.fp32_grad_accum else 0)
    return mem.params, grads, mem.optimizer_states


def model_state_memory(model: ModelConfig, layout: ParallelLayout, strategy: str = "ddp",
                       precision: Precision = Precision(), microbatches: int = 1,
                       no_sync: bool | None = None) -> tuple[ModelStates, ...]:
    """Model-state bytes per GPU for every pipeline stage (tuple of ``pp`` :class:`ModelStates`).

    Dense parameters are sharded over dp x cp, expert parameters over expert-dp (:func:`sharded_state_bytes`).
    ``microbatches`` and ``no_sync``: gradient accumulation (:func:`resolve_no_sync`; only FSDP's no_sync
    keeps whole gradients across micro-batches). Raises ValueError for an unknown strategy (accepted:
    ``ringlab.calc.comm.STRATEGIES``) or no_sync with zero2 / zero3.
    """
    no_sync = resolve_no_sync(strategy, no_sync)
    strategy = canonical_strategy(strategy)
    if strategy == "hybrid_shard":
        raise ValueError("strategy hybrid_shard is not modelled with tp/pp/cp; use ddp, zero1, zero2, "
                         "fsdp_shard_grad_op or fsdp_full_shard (zero3)")
    out = []
    for sp in stage_params(model, layout):
        d = sharded_state_bytes(sp.dense, layout.grad_group, strategy, precision, microbatches, no_sync)
        e = sharded_state_bytes(sp.expert, layout.expert_dp, strategy, precision, microbatches, no_sync)
        out.append(ModelStates(d[0] + e[0], d[1] + e[1], d[2] + e[2], n_params=sp.total, stage=sp.stage))
    return tuple(out)
