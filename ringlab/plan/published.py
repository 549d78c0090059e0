"""Layouts published for real training runs, and where :func:`~ringlab.plan.train.plan_train` ranks them.

Each entry is the job as its paper states it (model, GPUs, sequence length, global batch) and the degrees it
ran with; ``tests/fixtures/published_layouts.json`` records the same numbers with the passages they come
from. :func:`rank_published` runs the search on the job and says where the published shape lands. When it is
not in the top N, it names the term of the step breakdown that ranks it lower than the best layout and the
assumption of the calculators behind that term (:data:`ASSUMPTIONS`): the published teams had reasons the
calculators do not model, and saying which one is the point.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringlab.calc.models import ModelConfig, get_model
from ringlab.plan.space import Space, TrainJob, configurations, Refusals
from ringlab.plan.train import TERMS, RankedLayout, TrainSearch, evaluate, peak_memory, plan_train, ranked


def gpt_model(name: str, hidden: int, layers: int, heads: int, seq_len: int = 2048, vocab: int = 51200) -> ModelConfig:
    """A GPT-2-style model as Megatron-LM builds it (learned positions, LayerNorm, biases, 4h GeLU MLP, tied
    embeddings), from the width, depth and heads a paper gives; vocabulary 51,200 (Narayanan et al. 2021)."""
    cfg = dict(model_type="gpt2", n_embd=hidden, n_layer=layers, n_head=heads, n_positions=seq_len, vocab_size=vocab)
    return ModelConfig.from_hf_config(cfg, name=name, source="Narayanan et al. 2021, Table 1 (arXiv:2104.04473)")


@dataclass(frozen=True)
class Published:
    """One published run: the job (``model``, ``gpus`` on ``topology``, ``seq_len``, ``global_batch``) and the
    degrees it used; ``source``: paper and table; ``notes``: what the job here assumes that the paper does not say."""

    name: str
    model: ModelConfig
    gpus: int
    topology: str
    seq_len: int
    global_batch: int
    dp: int
    tp: int
    pp: int
    cp: int
    ep: int
    source: str
    notes: str = ""

    @property
    def shape(self) -> tuple[int, int, int, int, int]:
        return self.dp, self.tp, self.pp, self.cp, self.ep

    def job(self) -> TrainJob:
        return TrainJob(self.model, self.gpus, self.topology, self.seq_len, self.global_batch)


PUBLISHED: dict[str, Published] = {p.name: p for p in (
    Published("llama-3-405b", get_model("llama-3.1-405b"), 16384, "dgx-h100", 8192, 2048, 128, 8, 16, 1, 1,
              "Grattafiori et al. 2024, The Llama 3 Herd of Models (arXiv:2407.21783), Table 4: 16,384 GPUs, "
              "TP 8, CP 1, PP 16, DP 128, seq 8,192, 16M tokens per batch"),
    Published("megatron-1t", gpt_model("gpt-1t", 25600, 128, 160), 3072, "dgx-a100", 2048, 3072, 6, 8, 64, 1, 1,
              "Narayanan et al. 2021, Efficient Large-Scale Language Model Training on GPU Clusters Using "
              "Megatron-LM (arXiv:2104.04473), Table 1, last row: 1,008B, TP 8, PP 64, 3,072 A100s, batch 3,072"),
    Published("mt-nlg-530b", gpt_model("mt-nlg-530b", 20480, 105, 128), 2520, "dgx-a100", 2048, 2520, 9, 8, 35, 1, 1,
              "Narayanan et al. 2021 (arXiv:2104.04473), Table 1: 529.6B, TP 8, PP 35, 2,520 A100s, batch 2,520; "
              "the layout of MT-NLG 530B (Smith et al. 2022, arXiv:2201.11990, sec. 2.3: 8-way tensor and "
              "35-way pipeline slicing)"),
    Published("deepseek-v3", get_model("deepseek-v3"), 2048, "dgx-h100", 4096, 15360, 128, 1, 16, 1, 64,
              "DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv:2412.19437), sec. 3.2: 2,048 H800 GPUs, "
              "16-way pipeline, 64-way expert parallelism over 8 nodes, ZeRO-1 data parallelism, no tensor "
              "parallelism; sec. 4.2: sequence length 4K, batch size up to 15,360",
              "on dgx-h100: the H800 is an H100 with NVLink cut to 400 GB/s; DualPipe and its "
              "overlap of the all-to-all are not modelled (1F1B, EP traffic exposed)"),
)}

# the term of the step breakdown that costs a published layout its rank -> the assumption behind it
ASSUMPTIONS = {
    "compute": "every layout's matmuls run at the same share of peak (compute_efficiency); larger GEMMs per GPU "
               "(less TP) are not faster here",
    "recompute": "recomputation is charged in full; real runs recompute selected cheap ops only",
    "memory_bound": "memory-bound kernels are charged at HBM speed and not fused",
    "bubble": "the pipeline runs 1F1B (interleaved with virtual stages), the bubble (p - 1) / (v m) of "
              "equal micro-batches; schedules that fill it (zero-bubble, DualPipe) are not modelled",
    "tp": "TP collectives are on the critical path, never overlapped with the matmuls",
    "ep": "the EP all-to-all is on the critical path, never overlapped with compute (DualPipe overlaps it)",
    "dp": "DP traffic hides only behind the last micro-batch's backward (ZeRO-1) or every backward (ZeRO-2/3)",
    "pp": "pipeline sends on the fill and drain are exposed",
    "cp": "ring-attention passes hide only behind the attention of the same step",
    "memory": "the peak must fit the usable HBM (the margin left for the CUDA context, NCCL and fragmentation)",
}


@dataclass(frozen=True)
class PublishedRank:
    """Where ``published`` lands: ``rank`` (1-based among shapes, None below the top N searched), ``row`` (its
    best configuration, None when none fits), ``best`` (the search's #1), ``term`` (the breakdown term that
    costs it most against the best) and ``explanation`` (in words, with the assumption behind the term)."""

    published: Published
    search: TrainSearch
    rank: int | None
    row: RankedLayout | None
    term: str
    explanation: str


def best_configuration(job: TrainJob, shape: tuple[int, int, int, int, int],
                       space: Space = Space()) -> tuple[RankedLayout | None, int]:
    """The fastest configuration of one shape that fits (None if none does) and the peak bytes of the
    smallest-memory configuration tried (to say by how much it misses)."""
    best, least = None, None
    for c in configurations(job, space, shape, Refusals()):
        try:
            plan = evaluate(job, c)
        except ValueError:
            continue
        mem = peak_memory(plan)
        least = mem if least is None else min(least, mem)
        if mem > job.usable_memory:
            continue
        row = ranked(job, c, plan)
        if best is None or row.step_seconds < best.step_seconds:
            best = row
    return best, least or 0


def published_for(job: TrainJob) -> Published | None:
    """The published run whose job is ``job`` (same model, GPUs, topology, sequence length and batch), if any."""
    return next((p for p in PUBLISHED.values() if (p.model, p.gpus, p.topology, p.seq_len, p.global_batch)
                 == (job.model, job.gpus, job.topology, job.seq_len, job.global_batch)), None)


def rank_published(name: str, top: int = 5, search: TrainSearch | None = None) -> PublishedRank:
    """Run :func:`plan_train` on the published job (or reuse ``search``, a search of the same job) and place the
    published shape."""
    pub = PUBLISHED[name]
    job = pub.job()
    search = search or plan_train(job, top)
    for row in search.layouts:
        if row.candidate.shape == pub.shape:
            return PublishedRank(pub, search, row.rank, row, "", f"#{row.rank} of the search's top {search.top}")
    row, least = best_configuration(job, pub.shape, search.space)
    best = search.best
    if row is None:
        return PublishedRank(pub, search, None, None, "memory",
                             f"does not fit: its smallest peak is {least / 1e9:.1f} GB per GPU, above the "
                             f"{job.usable_memory / 1e9:.1f} GB usable; assumes {ASSUMPTIONS['memory']}")
    a, b = best.terms(), row.terms()
    term = max(b, key=lambda k: b[k] - a[k])
    text = (f"below the top {search.top}: {row.step_seconds:.2f} s per step ({row.mfu:.0%} MFU) against "
            f"{best.step_seconds:.2f} s for #1 ({best.candidate.describe()}); it loses most on {TERMS[term]} "
            f"({a[term]:.2f} -> {b[term]:.2f} s) because the calculators assume {ASSUMPTIONS[term]}")
    if row.candidate.recompute == "full":
        text += (f"; its fastest configuration that fits the {job.usable_memory / 1e9:.0f} GB usable needs full "
                 f"recomputation ({row.candidate.describe()}), which the layouts above avoid")
    if pub.notes:
        text += f"; also: {pub.notes}"
    return PublishedRank(pub, search, None, row, term, text)
