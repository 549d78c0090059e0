"""The search space of training layouts: a job, the candidates it admits, and why the others are refused.

A **job** (:class:`TrainJob`) is a model, a number of GPUs on a ``ringlab.topology`` preset, a sequence
length and a global batch, with a memory margin. A **shape** is the degrees ``(dp, tp, pp, cp, ep)``; a
**configuration** (:class:`Candidate`) adds the knobs: ZeRO stage / FSDP, recompute, micro-batch size
and virtual pipeline stages. The ranking keeps each shape's best configuration.

What is searched (each a stated choice of the space, not a pruning; :class:`Space` holds them):

- every degree divides the GPU count, and ``dp x tp x pp x cp`` uses all of them;
- ``tp`` splits the attention heads (:func:`ringlab.calc.kvcache.attention_heads_per_rank`);
- ``pp`` at most the layers; ``virtual_stages`` up to :data:`MAX_VIRTUAL_STAGES` with at most one layer
  per model chunk, and the micro-batches a multiple of ``pp`` (Megatron's interleaving rule);
- ``cp`` with ``seq_len`` divisible by ``2 cp`` and at least :data:`MIN_CP_TOKENS` tokens per CP rank
  (shorter chunks leave ring attention with nothing to hide its K/V passes behind);
- ``ep`` dividing the routed experts and ``dp x cp`` (MoE models only);
- ``micro_batch`` dividing the sequences of one replica, up to :data:`MAX_MICRO_BATCH`;
- ZeRO ``zero1``, ``zero2``, ``zero3`` (FSDP full shard); recompute ``none`` and ``full``. Left out by
  default because another choice beats them on both memory and time in these calculators: ``ddp``
  (ZeRO-0) all-reduces the same bytes ZeRO-1 reduce-scatters and all-gathers, and keeps the whole
  optimizer state; ``selective`` recompute re-runs the attention so as not to store its score matrices,
  which FlashAttention (assumed, as in ``train_plan``) never stores, so it only adds FLOPs.
  ``Space(zero=ZERO, recompute=RECOMPUTE)`` searches them too;
- sequence parallelism whenever ``tp > 1`` and the tokens per CP rank divide by ``tp``, as Megatron-LM
  runs TP (Korthikanti et al. 2022, arXiv:2205.05198): it shards the activations TP leaves whole.

Every rule above is the one :func:`ringlab.calc.training.layout.check_layout` enforces; ``check_layout``
is still called on every configuration the search evaluates.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

from ringlab.calc.hardware import Hardware, get_hardware
from ringlab.calc.kvcache import attention_heads_per_rank
from ringlab.calc.models import ModelConfig, get_model
from ringlab.validation import check_int, check_real
from ringlab.calc.training.flops import RECOMPUTE
from ringlab.calc.training.layout import MAX_WORLD_SIZE, ParallelLayout, check_positions
from ringlab.calc.training.step import MIN_EFFICIENCY, PRESET_HARDWARE
from ringlab.topology import get_cluster

MAX_MICRO_BATCH = 8
MAX_VIRTUAL_STAGES = 8
MIN_CP_TOKENS = 1024
ZERO = ("ddp", "zero1", "zero2", "zero3")
ZERO_STAGE = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3}
MARGIN = 0.10
"""Default share of HBM left free: the CUDA context, NCCL's buffers and the allocator's fragmentation, which
:class:`ringlab.calc.training.plan.StageMemory` does not count (PyTorch reserves 1-5 GB above the tensors)."""


@dataclass(frozen=True)
class TrainJob:
    """A training job to lay out.

    ``model``: preset name, config.json path or ModelConfig; ``gpus``: GPUs in the job (whole nodes of the
    topology when more than one node); ``topology``: a preset of :data:`ringlab.calc.training.step.PRESET_HARDWARE`
    (its GPU gives the peak FLOP/s and the HBM); ``seq_len`` tokens per sequence; ``global_batch`` sequences
    per optimizer step; ``margin``: share of HBM kept free (:data:`MARGIN`); ``compute_efficiency``: share
    of the dense peak the matmuls reach (``train_plan``'s assumption, default 0.75).
    Raises ValueError/TypeError naming the argument and the accepted values.
    """

    model: ModelConfig
    gpus: int
    topology: str
    seq_len: int
    global_batch: int
    margin: float = MARGIN
    compute_efficiency: float = 0.75

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", get_model(self.model))
        object.__setattr__(self, "gpus", check_int(self.gpus, "gpus", min=1, max=MAX_WORLD_SIZE))
        if not isinstance(self.topology, str) or self.topology not in PRESET_HARDWARE:
            raise ValueError(f"topology must be one of {', '.join(PRESET_HARDWARE)}, got {self.topology!r}")
        object.__setattr__(self, "seq_len", check_int(self.seq_len, "seq_len", min=1, max=10**8))
        object.__setattr__(self, "global_batch", check_int(self.global_batch, "global_batch", min=1, max=10**9))
        object.__setattr__(self, "margin", check_real(self.margin, "margin", min=0.0, max=0.9))
        object.__setattr__(self, "compute_efficiency",
                           check_real(self.compute_efficiency, "compute_efficiency", min=MIN_EFFICIENCY, max=1.0))
        g = self.gpus_per_node
        if self.gpus > g and self.gpus % g:
            raise ValueError(f"gpus={self.gpus:,} do not fill whole {g}-GPU nodes of {self.topology}")
        check_positions(self.model, self.seq_len)

    @property
    def gpus_per_node(self) -> int:
        """GPUs in one NVLink domain of the topology (8 on DGX/HGX, 72 on GB200 NVL72)."""
        return get_cluster(self.topology).gpus_per_node

    @property
    def hardware(self) -> Hardware:
        return get_hardware(PRESET_HARDWARE[self.topology])

    @property
    def usable_memory(self) -> int:
        """Bytes per GPU a layout may use: HBM less the margin."""
        return math.floor(self.hardware.memory * (1 - self.margin))

    def describe(self) -> str:
        return (f"{self.model.name} on {self.gpus:,} GPUs of {self.topology} ({self.hardware.name}), seq {self.seq_len:,}, "
                f"{self.global_batch:,} sequences per step ({self.seq_len * self.global_batch:,} tokens)")


class Candidate(NamedTuple):
    """One configuration: degrees and knobs (a NamedTuple: the search holds hundreds of thousands)."""

    dp: int
    tp: int
    pp: int
    cp: int
    ep: int
    virtual_stages: int
    sequence_parallel: bool
    zero: str
    recompute: str
    micro_batch: int

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return self.dp, self.tp, self.pp, self.cp, self.ep

    def layout(self) -> ParallelLayout:
        return ParallelLayout(self.dp, self.tp, self.pp, self.cp, self.ep, self.virtual_stages, self.sequence_parallel)

    def describe(self) -> str:
        text = f"dp={self.dp} tp={self.tp} pp={self.pp}"
        text += f" cp={self.cp}" if self.cp > 1 else ""
        text += f" ep={self.ep}" if self.ep > 1 else ""
        text += f" vp={self.virtual_stages}" if self.virtual_stages > 1 else ""
        return text + f" zero={ZERO_STAGE[self.zero]} recompute={self.recompute} mb={self.micro_batch}"


@dataclass(frozen=True)
class Space:
    """The knobs searched (module docstring). Narrow them to ask "the best layout with ZeRO-1 only"."""

    zero: tuple[str, ...] = ("zero1", "zero2", "zero3")
    recompute: tuple[str, ...] = ("none", "full")
    max_micro_batch: int = MAX_MICRO_BATCH
    max_virtual_stages: int = MAX_VIRTUAL_STAGES
    min_cp_tokens: int = MIN_CP_TOKENS

    def __post_init__(self) -> None:
        for name, allowed in (("zero", ZERO), ("recompute", RECOMPUTE)):
            values = tuple(getattr(self, name))
            bad = [v for v in values if v not in allowed]
            if bad or not values:
                raise ValueError(f"{name} must be a non-empty choice of {', '.join(allowed)}, got {values!r}")
            object.__setattr__(self, name, values)
        for name in ("max_micro_batch", "max_virtual_stages", "min_cp_tokens"):
            object.__setattr__(self, name, check_int(getattr(self, name), name, min=1, max=1 << 20))


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass
class Refusals:
    """Shapes and configurations left out of the space, counted per reason (ints)."""

    shapes: Counter = field(default_factory=Counter)
    configurations: Counter = field(default_factory=Counter)


def shapes(job: TrainJob, space: Space, refused: Refusals) -> Iterator[tuple[int, int, int, int, int]]:
    """Every shape ``(dp, tp, pp, cp, ep)`` of the space in a fixed order; the refused are counted in ``refused``."""
    model, n = job.model, job.gpus
    layers = model.num_hidden_layers
    for tp in divisors(n):
        try:
            attention_heads_per_rank(model, tp)
        except ValueError:
            refused.shapes["tp does not split the attention heads"] += 1
            continue
        for pp in divisors(n // tp):
            if pp > layers:
                refused.shapes["more pipeline stages than layers"] += 1
                continue
            for cp in divisors(n // (tp * pp)):
                if cp > 1 and job.seq_len % (2 * cp):
                    refused.shapes["seq_len not divisible by 2 x cp"] += 1
                    continue
                if cp > 1 and job.seq_len // cp < space.min_cp_tokens:
                    refused.shapes[f"under {space.min_cp_tokens} tokens per CP rank"] += 1
                    continue
                dp = n // (tp * pp * cp)
                if job.global_batch % dp:
                    refused.shapes["dp does not divide the global batch"] += 1
                    continue
                if not model.is_moe:
                    yield dp, tp, pp, cp, 1
                    continue
                for ep in divisors(dp * cp):
                    if model.num_experts % ep:
                        refused.shapes["ep does not divide the routed experts"] += 1
                        continue
                    yield dp, tp, pp, cp, ep


def configurations(job: TrainJob, space: Space, shape: tuple[int, int, int, int, int],
                   refused: Refusals) -> Iterator[Candidate]:
    """Every configuration of ``shape`` in a fixed order; refused ones counted in ``refused.configurations``."""
    dp, tp, pp, cp, ep = shape
    per_replica = job.global_batch // dp
    sp = tp > 1 and (job.seq_len // cp) % tp == 0
    knobs = len(space.zero) * len(space.recompute)
    for mb in divisors(per_replica):
        if mb > space.max_micro_batch:
            break
        m = per_replica // mb
        for v in range(1, (space.max_virtual_stages if pp > 1 else 1) + 1):
            if pp * v > job.model.num_hidden_layers:
                refused.configurations["more model chunks than layers"] += knobs
                continue
            if v > 1 and m % pp:
                refused.configurations["micro-batches not a multiple of pp (interleaving)"] += knobs
                continue
            for zero in space.zero:
                for recompute in space.recompute:
                    yield Candidate(dp, tp, pp, cp, ep, v, sp, zero, recompute, mb)


def enumerate_space(job: TrainJob, space: Space = Space()) -> tuple[list[Candidate], Refusals]:
    """Every configuration of the space (the brute-force list) and the refusals."""
    refused = Refusals()
    out = [c for shape in shapes(job, space, refused) for c in configurations(job, space, shape, refused)]
    return out, refused
