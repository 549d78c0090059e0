"""``train_plan``: memory per GPU, traffic per dimension, FLOPs and step time of one training configuration.

The pieces live in their own modules (layout, memory, activations, traffic, flops, step); this one checks
the inputs once, runs them for every pipeline stage and reports the busiest stage.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringlab.calc.comm import ModelStates, canonical_strategy
from ringlab.calc.models import ModelConfig, get_model
from ringlab.validation import check_bool, check_real
from ringlab.calc.units import dtype_bytes
from ringlab.calc.training.activations import StageActivations, layer_activation_bytes, stage_activation_bytes
from ringlab.calc.training.flops import StepFlops, check_recompute, step_flops
from ringlab.calc.training.layout import Batch, ParallelLayout, check_layout, check_positions, stage_layers
from ringlab.calc.training.memory import Precision, layer_params_per_gpu, model_state_memory, resolve_no_sync
from ringlab.calc.training.step import StepTime, step_time
from ringlab.calc.training.traffic import TrafficItem, bytes_by_dimension, stage_traffic


@dataclass(frozen=True)
class StageMemory:
    """Peak bytes per GPU of one pipeline stage: model states, activations and temporary buffers (ints).

    ``temporary``: what exists only for a while, at its largest: under full recompute one layer's
    activations rebuilt for its backward; under FSDP full shard (ZeRO-3) two layers' unsharded
    parameters (the one computing and the one prefetched). Allocator fragmentation and the CUDA
    context are not counted.
    """

    states: ModelStates
    activations: StageActivations
    temporary: int

    @property
    def total(self) -> int:
        return self.states.total + self.activations.total + self.temporary


@dataclass(frozen=True)
class TrainPlan:
    """Everything ``ringlab calc train`` prints; ``busiest`` indexes the stage with the most memory;
    ``notes``: what the numbers assume that the reader should know (e.g. positions past the table)."""

    model: ModelConfig
    layout: ParallelLayout
    batch: Batch
    strategy: str
    recompute: str
    precision: Precision
    memory: tuple[StageMemory, ...]
    traffic: tuple[tuple[TrafficItem, ...], ...]
    flops: StepFlops
    time: StepTime | None
    notes: tuple[str, ...] = ()

    @property
    def busiest(self) -> int:
        return max(range(len(self.memory)), key=lambda i: self.memory[i].total)

    def traffic_by_dimension(self, stage: int | None = None) -> dict[str, int]:
        return bytes_by_dimension(self.traffic[self.busiest if stage is None else stage])


def train_plan(model, layout: ParallelLayout, seq_len: int, micro_batch: int, global_batch: int,
               strategy: str = "zero1", recompute: str = "none", precision: Precision = Precision(),
               dropout: bool = False, load_imbalance: float = 1.0, topology=None, hardware=None,
               compute_efficiency: float = 0.75, causal: bool = False, act_dtype: str = "bf16",
               flash_attention: bool = True, no_sync: bool | None = None) -> TrainPlan:
    """Memory, traffic, FLOPs and (with ``topology``) step time of one configuration.

    ``model``: preset name, config.json path or ModelConfig. ``strategy``: ``ringlab.calc.comm`` names
    (ddp, zero1, zero2, fsdp_shard_grad_op, fsdp_full_shard / zero3). ``dropout``: False (Llama-style; the
    Korthikanti et al. GPT runs had it). ``act_dtype``: of activations and their messages (bf16, also
    under fp8 training, where only matmul inputs are cast). ``flash_attention`` (default True): no
    score matrices are stored (``layer_activation_bytes``). ``no_sync``: gradient accumulation
    (:func:`~ringlab.calc.training.memory.resolve_no_sync`: by default zero2, zero3 and FSDP reduce-scatter
    in every micro-batch; True is FSDP's no_sync, refused for zero2 / zero3). A sequence longer than a
    learned position table is refused; past a RoPE model's ``max_position_embeddings`` it is accepted with
    a note (:func:`~ringlab.calc.training.layout.check_positions`). Every error is a ValueError/TypeError
    naming the argument.
    """
    if hardware is not None and topology is None:
        raise ValueError(f"hardware={hardware!r} sets the GPU of the step time, which needs topology= (a cluster "
                         "preset or Cluster); memory, traffic and FLOPs do not depend on it")
    model = get_model(model)
    if not isinstance(layout, ParallelLayout):
        raise TypeError(f"layout must be a ParallelLayout, got {type(layout).__name__}")
    no_sync = resolve_no_sync(strategy, no_sync)  # before canonical_strategy: it tells zero3 from FSDP
    strategy = canonical_strategy(strategy)
    check_recompute(recompute)
    dropout = check_bool(dropout, "dropout")
    load_imbalance = check_real(load_imbalance, "load_imbalance", min=1.0)
    batch = check_layout(model, layout, seq_len, micro_batch, global_batch)
    notes = tuple(n for n in (check_positions(model, batch.seq_len),) if n)
    states = model_state_memory(model, layout, strategy, precision, batch.num_microbatches, no_sync)
    flash_attention = check_bool(flash_attention, "flash_attention")
    acts = stage_activation_bytes(model, layout, batch, recompute, dropout, act_dtype, load_imbalance,
                                  flash_attention)
    memory = []
    for indices, st, act in zip(stage_layers(model, layout), states, acts):
        temporary = 0
        if recompute == "full":
            temporary += max(layer_activation_bytes(model, model.layers[i], seq_len, micro_batch, layout, "none",
                                                    dropout, act_dtype, load_imbalance, flash_attention).total
                             for i in indices)
        if strategy == "fsdp_full_shard":
            biggest = max(sum(layer_params_per_gpu(model, model.layers[i], layout)) for i in indices)
            temporary += 2 * biggest * int(dtype_bytes(precision.param_dtype))
        memory.append(StageMemory(st, act, temporary))
    traffic = tuple(stage_traffic(model, layout, batch, s, strategy, precision, recompute, load_imbalance,
                                  act_dtype, no_sync) for s in range(layout.pp))
    flops = step_flops(model, seq_len, global_batch, recompute, causal)
    time = None
    if topology is not None:
        time = step_time(model, layout, batch, traffic, topology, hardware, recompute, strategy,
                         compute_efficiency, causal=causal, dropout=dropout, flash_attention=flash_attention,
                         act_dtype=act_dtype, precision=precision)
    return TrainPlan(model, layout, batch, strategy, recompute, precision, tuple(memory), traffic, flops, time,
                     notes)

