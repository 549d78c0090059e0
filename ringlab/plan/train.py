"""``plan_train``: the fastest training layouts of a job, why each is limited, and why the next one loses.

Every number is :func:`ringlab.calc.training.plan.train_plan`'s (memory per GPU, step time, MFU); this
module only decides which configurations to ask it about. Brute force asks about all of them (about
100,000 for Llama 3 405B on 16,384 GPUs, tens of milliseconds each); the search asks about a few hundred
and still returns the same ranking, because everything it skips is skipped by a bound that cannot be wrong:

1. **The space** (:mod:`ringlab.plan.space`) refuses shapes and configurations that break a rule of
   ``check_layout`` (counted per reason).
2. **A floor under the step time.** ``step_time`` charges the busiest stage its matmuls and memory-bound
   kernels times (1 + bubble fraction), plus its TP and EP collectives in full (never overlapped), plus
   other terms >= 0. The busiest stage is at least the average one, whose matmuls are the step's hardware
   FLOPs (6ND + attention + recompute, :func:`~ringlab.calc.training.flops.step_flops`) over
   GPUs x peak x efficiency, and whose kernels and TP/EP collectives are 1/pp of those of the whole
   model (:meth:`_Floors._whole_model`). So ``floor = (1 + bubble) x (matmuls + m x kernels / pp) +
   (TP + EP) / pp`` (:func:`~ringlab.calc.pipeline.bubble_fraction`), shared by every configuration
   with the same TP, CP, EP, micro-batch and recompute. Configurations are visited in its order.
3. **Memory.** Model states plus activations of the busiest stage (``model_state_memory``,
   ``stage_activation_bytes``, without ``train_plan``'s temporary buffers, so never more than the total)
   over the usable HBM: it does not fit.

A configuration is skipped when its floor exceeds the step time of the N-th best shape found so far:
it can neither enter the top N nor improve a shape in it. What is left is evaluated with ``train_plan``,
and kept when its peak memory fits. ``tests/plan`` checks the result against brute force.

The **binding constraint** of a layout is memory when it uses more than :data:`MEMORY_BINDS` of the
usable HBM, else the largest of its losses against pure matmul time: the pipeline bubble, exposed TP
traffic (named "TP leaves the NVLink domain" when the TP group spans nodes), exposed DP, EP, PP or CP
traffic, the recomputed forward, and the memory-bound kernels. "Why the next one loses": the term of
the step breakdown by which it is slower than the layout above it.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from dataclasses import dataclass, field

from ringlab.calc.hardware import peak_flops
from ringlab.calc.pipeline import bubble_fraction
from ringlab.calc.training.activations import stage_activation_bytes
from ringlab.calc.training.flops import step_flops
from ringlab.calc.roofline import roofline
from ringlab.calc.training.kernels import kernel_bytes, layer_kernels, output_kernels
from ringlab.calc.training.layout import ParallelLayout, check_layout
from ringlab.calc.training.memory import Precision, model_state_memory
from ringlab.calc.training.plan import TrainPlan, train_plan
from ringlab.calc.training.step import item_seconds, resolve_cluster
from ringlab.calc.training.traffic import stage_traffic
from ringlab.plan.space import (ZERO_STAGE, Candidate, Refusals, Space, TrainJob, configurations, enumerate_space,
                                shapes)

MEMORY_BINDS = 0.95
_SLACK = 1 - 1e-9  # floors are sums of the same floats in another order: keep them strictly below

# term of the step -> words (StepTime fields; "recompute" is the recomputed share of the matmuls)
TERMS = {"compute": "matmuls", "recompute": "recomputed forward", "memory_bound": "memory-bound kernels",
         "bubble": "pipeline bubble", "tp": "exposed TP traffic", "ep": "exposed EP all-to-all",
         "dp": "exposed DP traffic", "pp": "exposed PP sends", "cp": "exposed CP (ring attention) passes"}


@dataclass(frozen=True)
class RankedLayout:
    """One evaluated configuration: its ``train_plan`` (``plan``), step seconds, MFU, peak bytes per GPU,
    binding constraint (``binding`` key, ``binding_text`` in words) and, filled in by the ranking, ``rank``
    (1 = fastest) and ``loses`` (why it is slower than the layout ranked above it)."""

    candidate: Candidate
    plan: TrainPlan
    step_seconds: float
    mfu: float
    memory_bytes: int
    binding: str
    binding_text: str
    rank: int = 0
    loses: str = ""

    def terms(self) -> dict[str, float]:
        """The step in seconds by :data:`TERMS` (they add up to ``step_seconds``)."""
        st = self.plan.time
        recompute = st.compute * (st.hardware_flops - st.model_flops) / st.hardware_flops
        return {"compute": st.compute - recompute, "recompute": recompute, "memory_bound": st.memory_bound,
                "bubble": st.bubble, "tp": st.tp, "ep": st.ep, "dp": st.dp_exposed, "pp": st.pp_exposed,
                "cp": st.cp_exposed}

    def as_dict(self) -> dict:
        c = self.candidate
        return {"rank": self.rank, "dp": c.dp, "tp": c.tp, "pp": c.pp, "cp": c.cp, "ep": c.ep,
                "zero": ZERO_STAGE[c.zero], "strategy": self.plan.strategy, "recompute": c.recompute,
                "micro_batch": c.micro_batch, "virtual_stages": c.virtual_stages,
                "sequence_parallel": c.sequence_parallel, "num_microbatches": self.plan.batch.num_microbatches,
                "step_seconds": self.step_seconds, "mfu": self.mfu, "memory_bytes": self.memory_bytes,
                "binding": self.binding, "binding_text": self.binding_text, "loses": self.loses,
                "breakdown_seconds": self.terms()}


@dataclass
class TrainSearch:
    """What :func:`plan_train` found: ``layouts`` (the top N shapes, fastest first), the refusals of the
    space, ``pruned`` (configurations skipped, per reason), ``configurations`` (the size of the space,
    what brute force would evaluate) and ``evaluated`` (``train_plan`` calls)."""

    job: TrainJob
    space: Space
    top: int
    layouts: list[RankedLayout]
    refused: Refusals
    pruned: Counter = field(default_factory=Counter)
    configurations: int = 0
    evaluated: int = 0

    @property
    def best(self) -> RankedLayout | None:
        return self.layouts[0] if self.layouts else None


def evaluate(job: TrainJob, c: Candidate) -> TrainPlan:
    """``train_plan`` of configuration ``c`` on ``job`` (Llama-style training: no dropout, FlashAttention, bf16)."""
    return train_plan(job.model, c.layout(), job.seq_len, c.micro_batch, job.global_batch, c.zero, c.recompute,
                      topology=job.topology, compute_efficiency=job.compute_efficiency)


def peak_memory(plan: TrainPlan) -> int:
    """Bytes per GPU of the busiest pipeline stage (int)."""
    return plan.memory[plan.busiest].total


def binding_constraint(job: TrainJob, c: Candidate, plan: TrainPlan) -> tuple[str, str]:
    """``(key, words)``: what limits this configuration (module docstring)."""
    used, usable = peak_memory(plan), job.usable_memory
    if used > MEMORY_BINDS * usable:
        return "memory", f"memory: {used / 1e9:.1f} of {usable / 1e9:.1f} GB usable"
    st = plan.time
    recompute = st.compute * (st.hardware_flops - st.model_flops) / st.hardware_flops
    losses = {"bubble": st.bubble, "tp": st.tp, "ep": st.ep, "dp": st.dp_exposed, "pp": st.pp_exposed,
              "cp": st.cp_exposed, "recompute": recompute, "memory_bound": st.memory_bound}
    key = max(losses, key=lambda k: losses[k])
    share = f"{losses[key]:.2f} s, {losses[key] / st.step_time:.0%} of the step"
    g = job.gpus_per_node
    if key == "tp" and c.tp > g:
        return "tp_outside_nvlink", f"TP {c.tp} leaves the {g}-GPU NVLink domain: {share}"
    if key == "bubble":
        v = f", {c.virtual_stages} virtual stages" if c.virtual_stages > 1 else ""
        return key, f"pipeline bubble (PP {c.pp}, {plan.batch.num_microbatches} micro-batches{v}): {share}"
    return key, f"{TERMS[key]}: {share}"


def ranked(job: TrainJob, c: Candidate, plan: TrainPlan) -> RankedLayout:
    key, text = binding_constraint(job, c, plan)
    return RankedLayout(c, plan, plan.time.step_time, plan.time.mfu, peak_memory(plan), key, text)


def order(layouts) -> list[RankedLayout]:
    """Fastest first; ties by less memory, then by shape (a fixed order on every machine)."""
    return sorted(layouts, key=lambda r: (r.step_seconds, r.memory_bytes, r.candidate.shape))


def why_next_loses(above: RankedLayout, below: RankedLayout) -> str:
    """The breakdown term by which ``below`` is slower than ``above``, in words."""
    if below.step_seconds - above.step_seconds <= 1e-9 * above.step_seconds:
        return (f"ties #{above.rank} on step time; listed after it for using more memory or, at equal memory, "
                f"by its degrees ({below.memory_bytes / 1e9:.1f} GB against {above.memory_bytes / 1e9:.1f} GB)")
    a, b = above.terms(), below.terms()
    key = max(b, key=lambda k: b[k] - a[k])
    return (f"+{below.step_seconds - above.step_seconds:.3f} s behind #{above.rank}: {TERMS[key]} "
            f"{a[key]:.2f} -> {b[key]:.2f} s")


def with_ranks(layouts: list[RankedLayout]) -> list[RankedLayout]:
    """``layouts`` in order with ``rank`` and ``loses`` filled in."""
    out: list[RankedLayout] = []
    for i, row in enumerate(order(layouts)):
        row = dataclasses.replace(row, rank=i + 1)
        if out:
            row = dataclasses.replace(row, loses=why_next_loses(out[-1], row))
        out.append(row)
    return out


class _Floors:
    """The lower bound of the module docstring, its shared pieces computed once per key."""

    def __init__(self, job: TrainJob):
        self.job = job
        rate = peak_flops(job.hardware, "bf16") * job.compute_efficiency
        self.matmuls = {r: step_flops(job.model, job.seq_len, job.global_batch, r).hardware_flops / (job.gpus * rate)
                        for r in ("none", "selective", "full")}
        self.bubbles: dict = {}
        self.whole: dict = {}
        self.states: dict = {}
        self.activations: dict = {}
        self.cluster = resolve_cluster(job.topology, job.gpus)
        # equal layers (all but their index) have equal kernels: count each kind once, times its layers
        self.layer_kinds = Counter(dataclasses.replace(layer, index=0) for layer in job.model.layers)

    def microbatches(self, c: Candidate) -> int:
        return self.job.global_batch // (c.dp * c.micro_batch)

    def step(self, c: Candidate) -> float:
        """Seconds no configuration ``c`` can beat: (1 + bubble) x (matmuls + memory-bound kernels of the
        average stage) + its TP and EP seconds."""
        key = (c.pp, self.microbatches(c), c.virtual_stages)
        if key not in self.bubbles:
            p, m, v = key
            self.bubbles[key] = bubble_fraction(p, m, "interleaved-1f1b" if v > 1 else "1f1b", v) if p > 1 else 0.0
        kernels, exposed = self._whole_model(c)
        per_stage = self.microbatches(c) * kernels / c.pp
        return ((self.matmuls[c.recompute] + per_stage) * (1 + self.bubbles[key]) + exposed / c.pp) * _SLACK

    def _whole_model(self, c: Candidate) -> tuple[float, float]:
        """(memory-bound seconds of one micro-batch, TP + EP seconds of the step) summed over the stages.

        Summed over the pipeline stages, the layers, their kernels and their TP and EP collectives are those of
        one stage holding every layer (the embedding's on the first stage, the LM head's on the last), with the
        same TP, CP and EP groups and micro-batches: the layout with ``pp = 1``. Kernel and collective seconds
        are linear in their bytes and calls (``roofline``, ``item_seconds``), so one call on the sum gives it.
        """
        key = (c.dp, c.tp, c.cp, c.ep, c.sequence_parallel, c.micro_batch, c.recompute)
        if key not in self.whole:
            model, s = self.job.model, self.job.seq_len
            whole = ParallelLayout(c.dp, c.tp, 1, c.cp, c.ep, 1, c.sequence_parallel)
            batch = check_layout(model, whole, s, c.micro_batch, self.job.global_batch)
            nbytes = sum(n * kernel_bytes(layer_kernels(model, layer, s, c.micro_batch, whole, False, True, "bf16"),
                                          c.recompute) for layer, n in self.layer_kinds.items())
            nbytes += kernel_bytes(output_kernels(model, s, c.micro_batch, whole))
            items = stage_traffic(model, whole, batch, 0, "zero1", Precision(), c.recompute)
            exposed = sum(item_seconds(i, whole, self.cluster) for i in items if i.dim in ("tp", "ep"))
            self.whole[key] = (roofline(0, nbytes, self.job.hardware).memory_time_s, exposed)
        return self.whole[key]

    def memory(self, c: Candidate) -> int:
        """Model states + activations of the busiest stage: ``train_plan``'s total less its temporary buffers."""
        layout = c.layout()
        m = self.microbatches(c)
        key_s, key_a = (layout, c.zero, m), (layout, c.micro_batch, c.recompute)
        if key_s not in self.states:
            self.states[key_s] = [s.total for s in model_state_memory(self.job.model, layout, c.zero, Precision(), m)]
        if key_a not in self.activations:
            batch = check_layout(self.job.model, layout, self.job.seq_len, c.micro_batch, self.job.global_batch)
            acts = stage_activation_bytes(self.job.model, layout, batch, c.recompute, False, "bf16", 1.0, True)
            self.activations[key_a] = [a.total for a in acts]
        return max(s + a for s, a in zip(self.states[key_s], self.activations[key_a]))


def plan_train(job: TrainJob, top: int = 10, space: Space = Space()) -> TrainSearch:
    """The ``top`` fastest shapes of ``job`` (each with its best configuration) that fit the usable memory.

    Returns a :class:`TrainSearch` whose ``layouts`` are ranked (:func:`with_ranks`) and whose counts say
    what was refused, pruned and evaluated. Raises ValueError naming ``top`` when it is not 1..1000.
    Same ranking as :func:`brute_force` (module docstring; tests/plan).
    """
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= 1000:
        raise ValueError(f"top must be an int from 1 to 1000, got {top!r}")
    refused = Refusals()
    floors = _Floors(job)
    heap = []
    for shape in shapes(job, space, refused):
        for c in configurations(job, space, shape, refused):
            try:
                heap.append((floors.step(c), len(heap), c))
            except ValueError as e:  # a rule of check_layout the space does not spell out
                refused.configurations[f"refused by check_layout: {str(e).split(':')[0]}"] += 1
    result = TrainSearch(job, space, top, [], refused, configurations=len(heap))
    heapq.heapify(heap)
    best: dict[tuple, RankedLayout] = {}
    threshold = float("inf")
    while heap:
        floor, _, c = heapq.heappop(heap)
        if floor > threshold:  # the heap is ordered by floors: all that is left is slower than the N-th shape
            result.pruned[f"slower than #{top}: its floor (matmuls, kernels, bubble, TP/EP) alone"] += 1 + len(heap)
            break
        if floors.memory(c) > job.usable_memory:
            result.pruned["memory: states + activations exceed the usable HBM"] += 1
            continue
        plan = evaluate(job, c)
        result.evaluated += 1
        if peak_memory(plan) > job.usable_memory:
            result.pruned["memory: with the temporary buffers"] += 1
            continue
        row = ranked(job, c, plan)
        known = best.get(c.shape)
        if known is None or order([row, known])[0] is row:
            best[c.shape] = row
            if len(best) >= top:
                threshold = order(best.values())[top - 1].step_seconds
    result.layouts = with_ranks(order(best.values())[:top])
    return result


def brute_force(job: TrainJob, space: Space = Space(), top: int = 10) -> list[RankedLayout]:
    """The naive search: ``train_plan`` of every configuration of the space, each shape's best that fits,
    ranked. The reference :func:`plan_train` is tested against (minutes on a large cluster)."""
    best: dict[tuple, RankedLayout] = {}
    for c in enumerate_space(job, space)[0]:
        plan = evaluate(job, c)
        if peak_memory(plan) > job.usable_memory:
            continue
        row = ranked(job, c, plan)
        known = best.get(c.shape)
        if known is None or order([row, known])[0] is row:
            best[c.shape] = row
    return with_ranks(order(best.values())[:top])
