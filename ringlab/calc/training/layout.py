"""The parallel layout of a training job: DP x TP x PP x CP (x EP for MoE layers), and its checks.

Rank order follows Megatron-Core's default ``tp-cp-ep-dp-pp`` (``megatron/core/parallel_state.py``):
tensor-parallel ranks are consecutive, then context-parallel, then data-parallel, then pipeline stages.
So a dimension's group has ``stride`` = product of the degrees inside it: TP stride 1, CP stride tp,
DP stride tp x cp, PP stride tp x cp x dp. That decides which groups fit inside an NVLink domain
(:mod:`ringlab.calc.training.step`).

Expert parallelism (Megatron-Core MoE, "parallel folding"): expert layers use expert-tensor-parallel =
tp and split the ``dp x cp`` ranks of a stage into ``ep`` expert-parallel ranks times
``expert_dp = dp x cp / ep`` expert-data-parallel ranks. Dense parameters are reduced (and ZeRO-sharded)
over the ``dp x cp`` ranks, expert parameters over the ``expert_dp`` ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringlab.calc.kvcache import attention_heads_per_rank
from ringlab.calc.models import ModelConfig
from ringlab.validation import check_bool, check_int

_MAX_DEGREE = 1 << 20
MAX_WORLD_SIZE = 1 << 22  # GPUs (dp x tp x pp x cp): 4.2 M, ten times the largest clusters built (2025)


@dataclass(frozen=True)
class ParallelLayout:
    """Degrees of each parallel dimension (ints >= 1) and the per-layer options.

    ``dp``: data-parallel replicas; ``tp``: tensor parallel (Shoeybi et al. 2019); ``pp``: pipeline
    stages; ``cp``: context parallel (ring attention over sequence chunks); ``ep``: expert parallel
    (MoE layers only; must divide dp x cp); ``virtual_stages``: model chunks per pipeline stage
    (interleaved 1F1B, Narayanan et al. 2021 sec. 2.2.2); ``sequence_parallel``: Korthikanti et al.
    2022's sequence parallelism over the TP group (norms and dropout on 1/tp of the tokens).

    Raises TypeError/ValueError naming the field for non-integers, degrees < 1, ep not dividing dp x cp,
    virtual stages without a pipeline, or sequence parallelism without tensor parallelism.
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    virtual_stages: int = 1
    sequence_parallel: bool = False

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "cp", "ep", "virtual_stages"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, min=1, max=_MAX_DEGREE))
        object.__setattr__(self, "sequence_parallel", check_bool(self.sequence_parallel, "sequence_parallel"))
        if self.world_size > MAX_WORLD_SIZE:
            raise ValueError(f"dp x tp x pp x cp = {self.dp:,} x {self.tp:,} x {self.pp:,} x {self.cp:,} = "
                             f"{self.world_size:,} GPUs, above {MAX_WORLD_SIZE:,}: check the degrees")
        if (self.dp * self.cp) % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide dp x cp = {self.dp} x {self.cp} = {self.dp * self.cp}: "
                             "expert-parallel ranks are carved out of the data- and context-parallel ranks")
        if self.virtual_stages > 1 and self.pp == 1:
            raise ValueError(f"virtual_stages={self.virtual_stages} needs pp > 1 (interleaving splits pipeline stages)")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("sequence_parallel needs tp > 1: it shards over the tensor-parallel group")

    @property
    def world_size(self) -> int:
        """GPUs in the job: dp x tp x pp x cp (EP reuses the dp x cp ranks)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def expert_dp(self) -> int:
        """Expert-data-parallel ranks: dp x cp / ep (the group expert gradients are reduced over)."""
        return self.dp * self.cp // self.ep

    @property
    def grad_group(self) -> int:
        """Ranks dense gradients are reduced over: dp x cp (Megatron includes CP in the DP group)."""
        return self.dp * self.cp

    def stride(self, dim: str) -> int:
        """Distance between consecutive ranks of a ``dim`` group (``tp``, ``cp``, ``ep``, ``dp``, ``pp``)."""
        order = {"tp": 1, "cp": self.tp, "ep": self.tp * self.cp, "dp": self.tp * self.cp, "pp": self.tp * self.cp * self.dp}
        if dim not in order:
            raise ValueError(f"dim must be one of {', '.join(order)}, got {dim!r}")
        return order[dim]

    def size(self, dim: str) -> int:
        """Ranks in one ``dim`` group (``ep`` groups are stride tp x cp, like dp)."""
        self.stride(dim)
        return getattr(self, dim)

    def describe(self) -> str:
        text = f"DP{self.dp} x TP{self.tp} x PP{self.pp} x CP{self.cp}"
        if self.ep > 1:
            text += f" (EP{self.ep} in MoE layers, expert DP {self.expert_dp})"
        if self.virtual_stages > 1:
            text += f", {self.virtual_stages} virtual stages"
        return text + (", sequence parallel" if self.sequence_parallel else "") + f" = {self.world_size} GPUs"


@dataclass(frozen=True)
class Batch:
    """Sequence length and batch sizes of one optimizer step (ints).

    ``micro_batch``: sequences per micro-batch per data-parallel replica; ``global_batch``: sequences per
    optimizer step over all replicas; ``num_microbatches`` = global_batch / (micro_batch x dp).
    """

    seq_len: int
    micro_batch: int
    global_batch: int
    num_microbatches: int


def check_layout(model: ModelConfig, layout: ParallelLayout, seq_len: int, micro_batch: int,
                 global_batch: int) -> Batch:
    """Check that ``layout`` can run ``model`` on this batch; return the :class:`Batch`.

    Rules (Megatron-LM's argument checks, ``megatron/training/arguments.py``): the tensor-parallel rule
    of :func:`ringlab.calc.kvcache.attention_heads_per_rank` (tp divides num_attention_heads; each
    attention layer's KV heads divide or are divided by tp; MLA has no KV-head condition); a learned
    position table is at least seq_len long (:func:`check_positions`); pp x virtual_stages model chunks at most num_hidden_layers (uneven splits: see
    :func:`chunk_layer_counts`); cp > 1 needs seq_len divisible
    by 2 cp (load-balanced causal chunks), sequence parallelism needs seq_len / cp divisible by tp;
    micro_batch x dp divides global_batch; interleaving needs the number of micro-batches divisible by pp;
    ep divides the routed experts (and ep > 1 needs an MoE model). ValueError names the argument.
    """
    s = check_int(seq_len, "seq_len", min=1)
    b = check_int(micro_batch, "micro_batch", min=1)
    gb = check_int(global_batch, "global_batch", min=1)
    t = layout.tp
    attention_heads_per_rank(model, t)
    check_positions(model, s)
    chunks = layout.pp * layout.virtual_stages
    if model.num_hidden_layers < chunks:
        raise ValueError(f"pp x virtual_stages = {layout.pp} x {layout.virtual_stages} = {chunks} model chunks "
                         f"exceed num_hidden_layers={model.num_hidden_layers} of {model.name}")
    if layout.cp > 1 and s % (2 * layout.cp):
        raise ValueError(f"seq_len={s} must be divisible by 2 x cp = {2 * layout.cp} (causal load balancing)")
    if layout.sequence_parallel and (s // layout.cp) % t:
        raise ValueError(f"sequence_parallel: seq_len / cp = {s // layout.cp} must be divisible by tp={t}")
    if gb % (b * layout.dp):
        raise ValueError(f"global_batch={gb} must be a multiple of micro_batch x dp = {b} x {layout.dp}")
    m = gb // (b * layout.dp)
    if layout.virtual_stages > 1 and m % layout.pp:
        raise ValueError(f"interleaved pipeline: the number of micro-batches ({m}) must be a multiple of pp={layout.pp}")
    if layout.ep > 1 and not model.is_moe:
        raise ValueError(f"ep={layout.ep} needs an MoE model; {model.name} has no experts")
    if model.is_moe and model.num_experts % layout.ep:
        raise ValueError(f"ep={layout.ep} must divide the {model.num_experts} routed experts of {model.name}")
    return Batch(s, b, gb, m)


def check_positions(model: ModelConfig, seq_len: int) -> str | None:
    """Whether ``model`` has positions for ``seq_len`` tokens: None when it has, a note when it may extrapolate.

    Learned absolute positions (GPT-2's ``n_positions``, OPT's ``max_position_embeddings``; the table is
    ``model.position_embeddings`` rows) have no row past ``max_position_embeddings``: ValueError naming
    both numbers, as Megatron-LM asserts ``max_position_embeddings >= seq_length`` (``validate_args``).
    Rotary and other relative schemes have no table, so a longer sequence is accepted with a note
    (RoPE scaling or long-context training extend them; memory and traffic do not depend on it).
    """
    limit = model.max_position_embeddings
    if model.position_embeddings:
        limit = limit or model.position_embeddings
        if seq_len > limit:
            raise ValueError(f"seq_len={seq_len:,} exceeds max_position_embeddings={limit:,} of {model.name}: its "
                             f"learned position table has no row past position {limit:,}")
        return None
    if limit is not None and seq_len > limit:
        return (f"seq_len {seq_len:,} is above max_position_embeddings {limit:,} of {model.name}: its positions "
                "are not a learned table (RoPE or relative), so they extrapolate, as under RoPE scaling or "
                "long-context training; memory and traffic do not depend on it")
    return None


def chunk_layer_counts(num_layers: int, chunks: int) -> tuple[int, ...]:
    """Layers in each of ``chunks`` model chunks (pipeline order), summing to ``num_layers``.

    Every chunk gets ceil(L / chunks) layers, and the excess is taken one layer at a time from the ends
    inwards (first chunk, last chunk, second, second to last, ...): the first stage also holds the
    embedding and the last the LM head and loss. Llama 3 405B's 126 layers on 16 stages are 7 + 14 x 8 + 7
    (Grattafiori et al. 2024, "The Llama 3 Herd of Models", sec. 3.3.2: one layer fewer on the first and
    the last stage). Raises ValueError when chunks exceed layers.
    """
    if not 1 <= chunks <= num_layers:
        raise ValueError(f"{chunks} model chunks for {num_layers} layers: need 1 <= chunks <= layers")
    per = -(-num_layers // chunks)
    counts = [per] * chunks
    ends = [i for pair in zip(range(chunks), range(chunks - 1, -1, -1)) for i in pair]
    for i in ends[:per * chunks - num_layers]:
        counts[i] -= 1
    return tuple(counts)


def stage_layers(model: ModelConfig, layout: ParallelLayout) -> tuple[tuple[int, ...], ...]:
    """Layer indices held by each pipeline stage (tuple of ``pp`` tuples).

    The model is cut into pp x v chunks of :func:`chunk_layer_counts` layers; stage i holds chunks i,
    i + pp, i + 2 pp, ... (Megatron's interleaved assignment; v = 1 gives contiguous blocks).
    """
    chunks = layout.pp * layout.virtual_stages
    counts = chunk_layer_counts(model.num_hidden_layers, chunks)
    starts = [sum(counts[:c]) for c in range(chunks)]
    return tuple(tuple(i for c in range(stage, chunks, layout.pp) for i in range(starts[c], starts[c] + counts[c]))
                 for stage in range(layout.pp))
