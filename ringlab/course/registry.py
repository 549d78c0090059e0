"""The topic registry: one entry per topic, and every artifact of a topic found from its number.

A topic ``NN`` with slug ``slug`` has, by rule rather than by listing:

==================  ================================================
notebook            ``notebooks/NN_slug.ipynb``
exercises           ``exercises/NN_slug.py`` (one function per exercise ``NNa``, ``NNb``, ...)
worked solution     ``solutions/NN_slug.py``
practice card       ``ringlab/check/cards/NN.md`` (card id ``NN``)
grader module       ``ringlab.check.graders.slug`` (its ``EXERCISES`` tuple)
pytest marker       ``slug`` (``pytest -m kv_cache`` runs the topic's tests)
==================  ================================================

What cannot follow from the number is data below: the title (the notebook's first heading), what it
teaches, the exercises (id, function, the old ``exNN`` id), the modules that implement and draw it,
its test files, prerequisites, a time estimate, and the optional dependencies it needs. Old ids
(``ex08`` for an exercise, ``P5`` for a card) resolve through :func:`resolve_exercise` and
:func:`resolve_card`, which say the new id.

This module is pure data and imports nothing of ringlab, so every layer may read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class ExerciseRef:
    """One exercise of a topic: ``id`` ("05a"), the ``function`` the learner writes, the ``old_id`` ("ex08").

    An exercise in another language than Python (19b, in Go) names its own files, relative to the repository
    root: ``file``, the learner's, generated from ``solution_file``, the worked one; both are empty for an
    exercise written in the topic's ``exercises/NN_slug.py``.
    """

    id: str
    function: str
    old_id: str = ""
    file: str = ""
    solution_file: str = ""


@dataclass(frozen=True)
class Topic:
    """One topic. ``id`` is the two-digit number; the file paths are properties (see the module docstring).

    ``minutes`` is the estimated time for a first pass through the notebook and its exercises;
    ``needs`` names the optional Python modules beyond numpy (``torch``, ``triton``, ``httpx``); ``tests`` are
    paths relative to the repository root (files or folders); ``old_card`` is the problem-set id
    the card had before topics were numbered (``P5``), empty for cards born under this scheme.
    """

    id: str
    slug: str
    title: str
    teaches: str
    exercises: tuple[ExerciseRef, ...]
    implements: tuple[str, ...]
    draws: tuple[str, ...]
    tests: tuple[str, ...]
    prerequisites: tuple[str, ...] = ()
    minutes: int = 30
    needs: tuple[str, ...] = ()
    old_card: str = ""

    @property
    def stem(self) -> str:
        return f"{self.id}_{self.slug}"

    @property
    def notebook(self) -> str:
        return f"notebooks/{self.stem}.ipynb"

    @property
    def exercise_file(self) -> str:
        return f"exercises/{self.stem}.py"

    @property
    def solution_file(self) -> str:
        return f"solutions/{self.stem}.py"

    @property
    def card(self) -> str:
        return self.id

    @property
    def card_file(self) -> str:
        return f"ringlab/check/cards/{self.id}.md"

    @property
    def grader_module(self) -> str:
        return f"ringlab.check.graders.{self.slug}"

    @property
    def marker(self) -> str:
        return self.slug


def _ex(topic: str, *pairs: tuple[str, str]) -> tuple[ExerciseRef, ...]:
    """Exercises ``topic``a, ``topic``b, ... from (function, old id) pairs, lettered in order."""
    return tuple(ExerciseRef(f"{topic}{chr(ord('a') + i)}", fn, old) for i, (fn, old) in enumerate(pairs))


TOPICS: tuple[Topic, ...] = (
    Topic("01", "ring_allreduce", "Ring all-reduce",
          "Ring all-reduce as a schedule: reduce-scatter then all-gather, checked against a direct sum, "
          "2(N-1)/N x M bytes per rank.",
          _ex("01", ("ring_allreduce", "ex01"), ("ring_chunk_to_send", "ex02"), ("ring_reduce_scatter_rank", "ex03")),
          ("ringlab.collectives.ring", "ringlab.collectives.schedule", "ringlab.sim.api", "ringlab.sim.verify"),
          ("ringlab.viz.ring",),
          ("tests/sim/test_sim_ring_allreduce.py", "tests/collectives/test_ring_schedule.py",
           "tests/sim/test_verify.py", "tests/collectives/test_schedule_arrays.py", "tests/sim/test_executor.py",
           "tests/sim/test_executor_random_schedules.py", "tests/sim/test_memory_guard.py"),
          minutes=45, old_card="P1"),
    Topic("02", "collectives_and_costs", "Collectives and their costs: ring vs tree vs halving-doubling",
          "The collective primitives and their bytes per rank; ring against tree in the alpha-beta model.",
          _ex("02", ("recursive_doubling_all_gather", "ex04"), ("collective_traffic", "ex05")),
          ("ringlab.collectives.registry", "ringlab.collectives.tree", "ringlab.collectives.halving_doubling",
           "ringlab.collectives.direct", "ringlab.collectives.alltoall", "ringlab.collectives.cost",
           "ringlab.sim.runner"),
          ("ringlab.viz.collectives",),
          ("tests/collectives/test_collectives_algorithms.py", "tests/collectives/test_collectives_tree.py",
           "tests/collectives/test_cost.py", "tests/check/graders/test_collectives_graders.py",
           "tests/sim/test_verify_collectives.py", "tests/viz/test_viz_collectives.py",
           "tests/commands/test_cli_cost.py"),
          prerequisites=("01",), minutes=45, old_card="P12"),
    Topic("03", "ring_reduce_scatter_torch", "Ring reduce-scatter with torch.distributed",
          "Ring reduce-scatter over real processes with torch.distributed send/recv, and why the widely "
          "copied version is wrong for N > 2.",
          _ex("03", ("ring_reduce_scatter_p2p", "ex06")),
          ("ringlab.dist.executor", "ringlab.dist.launch", "ringlab.dist.bench", "ringlab.dist.demos"),
          ("ringlab.viz.ring",),
          ("tests/dist", "tests/sim/test_sim_torch.py"),
          prerequisites=("01",), minutes=40, needs=("torch",), old_card="P9"),
    Topic("04", "ddp_vs_fsdp_traffic", "Gradient traffic: DDP vs FSDP",
          "Gradient traffic of DDP against FSDP FULL_SHARD (1.5x DDP) and the memory that sharding saves.",
          _ex("04", ("fsdp_traffic_breakdown", "ex07")),
          ("ringlab.calc.comm",), ("ringlab.viz.comm",),
          ("tests/calc/test_comm.py", "tests/check/graders/test_calc_graders.py"),
          prerequisites=("01", "02"), minutes=30, old_card="P2"),
    Topic("05", "kv_cache", "KV-cache memory",
          "KV-cache bytes per token and per batch: grouped KV heads, MQA, MLA, sliding windows, tensor "
          "parallelism, GB against GiB.",
          _ex("05", ("kv_cache_bytes", "ex08")),
          ("ringlab.calc.kvcache", "ringlab.calc.hf_config", "ringlab.calc.models", "ringlab.calc.layers"),
          ("ringlab.viz.kvcache",),
          ("tests/calc/test_kvcache.py", "tests/calc/test_hf_config.py", "tests/calc/test_hf_fixtures.py",
           "tests/calc/test_models.py", "tests/check/graders/test_calc_graders.py"),
          minutes=30, old_card="P5"),
    Topic("06", "roofline", "The roofline: memory-bound or compute-bound?",
          "Roofline: arithmetic intensity against the ridge point, dense against sparse TFLOP/s, fusion.",
          _ex("06", ("roofline_bound", "ex09")),
          ("ringlab.calc.roofline", "ringlab.calc.hardware"), ("ringlab.viz.roofline",),
          ("tests/calc/test_roofline.py", "tests/calc/test_hardware.py", "tests/viz/test_viz_perf.py"),
          minutes=30, old_card="P3"),
    Topic("07", "decode_batching", "Decode batching under a latency SLA",
          "Decode step time against batch size: flat while memory-bound, and the largest batch under a "
          "latency SLA.",
          _ex("07", ("decode_step_time", "ex10")),
          ("ringlab.calc.decode",), ("ringlab.viz.decode",),
          ("tests/calc/test_decode.py", "tests/calc/test_cli_calc_perf.py"),
          prerequisites=("05", "06"), minutes=30, old_card="P8"),
    Topic("08", "pipeline_bubbles", "Pipeline bubbles",
          "Pipeline bubbles: (P-1)/M of the ideal time, GPipe against 1F1B memory, interleaved schedules.",
          _ex("08", ("pipeline_bubble", "ex11")),
          ("ringlab.calc.pipeline",), ("ringlab.viz.pipeline",),
          ("tests/calc/test_pipeline.py", "tests/calc/test_pipeline_guard.py"),
          minutes=30, old_card="P10"),
    Topic("09", "gpu_monitor", "A GPU monitor that survives the driver",
          "A GPU monitor logging utilization and memory to CSV that survives vanished GPUs, [N/A] values "
          "and a failing nvidia-smi.",
          _ex("09", ("parse_smi_row", "ex12")),
          ("ringlab.labs.gpumon.rows", "ringlab.labs.gpumon.samplers", "ringlab.labs.gpumon.log",
           "ringlab.labs.gpumon.loop"), ("ringlab.viz.gpumon",),
          ("tests/labs/test_gpumon.py", "tests/labs/test_gpumon_faults.py"),
          minutes=30, old_card="P4"),
    Topic("10", "collective_mismatch", "Mismatched collectives",
          "Mismatched collectives: the hang, TORCH_DISTRIBUTED_DEBUG=DETAIL, and a guard naming the ranks "
          "and fields that differ.",
          _ex("10", ("diff_fingerprints", "ex13")),
          ("ringlab.labs.mismatch.fingerprint", "ringlab.labs.mismatch.guard", "ringlab.labs.mismatch.scenarios"), (),
          ("tests/labs/test_mismatch.py",),
          prerequisites=("03",), minutes=30, needs=("torch",), old_card="P6"),
    Topic("11", "grad_accumulation", "Gradient accumulation with DDP",
          "Gradient accumulation with DDP no_sync: one all-reduce per step instead of K, gradients equal "
          "to the full batch.",
          _ex("11", ("accumulate_gradients", "ex14")),
          ("ringlab.labs.grad_accum",), (),
          ("tests/labs/test_grad_accum.py",),
          prerequisites=("03", "04"), minutes=30, needs=("torch",), old_card="P7"),
    Topic("12", "triton_layernorm", "A fused LayerNorm forward in Triton",
          "A fused LayerNorm forward in Triton (its interpreter on CPU): one pass per row, masks, loops "
          "over wide rows.",
          _ex("12", ("layer_norm_row", "ex15")),
          ("ringlab.labs.layernorm", "ringlab.labs.layernorm_ref"), (),
          ("tests/labs/test_layernorm.py",),
          prerequisites=("06",), minutes=45, needs=("torch", "triton"), old_card="P11"),
    Topic("13", "nvlink_and_fabric", "NVLink domains and the scale-out fabric",
          "NVLink domains against the scale-out fabric: NICs on rails, NCCL's channels, bytes per link, the "
          "line-rate ceiling against published nccl-tests runs.",
          _ex("13", ("ring_bottleneck", "ex16")),
          ("ringlab.topology.cluster", "ringlab.topology.presets", "ringlab.topology.timing",
           "ringlab.topology.traffic", "ringlab.topology.published", "ringlab.sim.on_cluster"),
          ("ringlab.viz.topology",),
          ("tests/topology",),
          prerequisites=("02",), minutes=45),
    Topic("14", "paged_kv_blocks", "Paged KV-cache blocks: prefix sharing and copy-on-write",
          "Paged KV-cache blocks: block tables, prefix sharing by chained hashes of full blocks, copy-on-write "
          "after a fork, and what a 60 GiB pool holds.",
          _ex("14", ("BlockAllocator", "ex17")),
          ("ringlab.serving.blocks",), ("ringlab.viz.serving",),
          ("tests/serving/test_serving_blocks.py",),
          prerequisites=("05",), minutes=45, old_card="P13"),
    Topic("15", "continuous_batching", "Continuous batching: admit, step, preempt, and where it livelocks",
          "Continuous batching: admit, step, preempt; TTFT and TPOT against load, and the livelock that "
          "reserving decode room and preempting the newest break.",
          _ex("15", ("plan_step", "ex18")),
          ("ringlab.serving.scheduler", "ringlab.serving.requests", "ringlab.serving.trace", "ringlab.serving.cost"),
          ("ringlab.viz.serving",),
          ("tests/serving/test_serving_scheduler.py", "tests/serving/test_cli_serve_sim.py",
           "tests/serving/test_viz_serving.py"),
          prerequisites=("07", "14"), minutes=45, old_card="P14"),
    Topic("16", "reading_nccl", "Reading NCCL: nccl-tests output and NCCL_DEBUG=INFO",
          "Reading NCCL: every column of nccl-tests output, algbw against busbw, what NCCL_DEBUG=INFO says about "
          "transports and channels, and whether a real run is healthy.",
          _ex("16", ("diagnose", "ex19")),
          ("ringlab.nccl.reader", "ringlab.nccl.table", "ringlab.nccl.debuglog", "ringlab.nccl.findings",
           "ringlab.nccl.ceiling", "ringlab.nccl.tuning"),
          ("ringlab.viz.nccl", "ringlab.viz.nccl_tuning"),
          ("tests/nccl", "tests/viz/test_viz_nccl_tuning.py"),
          prerequisites=("02", "13"), minutes=40, old_card="P16"),
    Topic("17", "train_memory_4d", "Memory and traffic of DP x TP x PP x CP x EP training with ZeRO",
          "Training at scale: parameters, gradients, optimizer states and activations per GPU (Korthikanti et al. "
          "2022) under DP x TP x PP x CP x EP with ZeRO, the traffic of each parallel dimension, 6ND FLOPs and MFU.",
          _ex("17", ("memory_per_gpu", ""), ("layer_traffic", "")),
          ("ringlab.calc.training.layout", "ringlab.calc.training.memory", "ringlab.calc.training.activations",
           "ringlab.calc.training.traffic", "ringlab.calc.training.flops", "ringlab.calc.training.step",
           "ringlab.calc.training.plan"),
          ("ringlab.viz.training",),
          ("tests/calc/training/test_activations.py", "tests/calc/training/test_activations_torch.py",
           "tests/calc/training/test_cli_train.py", "tests/calc/training/test_cli_train_fuzz.py",
           "tests/calc/training/test_errata.py", "tests/calc/training/test_flops.py",
           "tests/calc/training/test_layout.py", "tests/calc/training/test_memory.py",
           "tests/calc/training/test_published_training.py", "tests/calc/training/test_step.py",
           "tests/calc/training/test_traffic.py", "tests/calc/training/test_train_memory_grader.py",
           "tests/calc/training/test_viz_training.py"),
          prerequisites=("04", "08", "13"), minutes=60),
    Topic("18", "overlap_timeline", "Overlap: the step timeline and exposed communication",
          "The step timeline: DDP buckets all-reduced while backward runs, FSDP prefetch, TP on the critical path, "
          "pipeline sends; exposed communication, and why the strategy with more bytes can finish first.",
          _ex("18", ("exposed_comm", "")),
          ("ringlab.calc.training.timeline",), ("ringlab.viz.timeline",),
          ("tests/calc/training/test_timeline.py", "tests/calc/training/test_timeline_strategies.py",
           "tests/calc/training/test_timeline_grader.py", "tests/calc/training/test_timeline_viz.py"),
          prerequisites=("04", "08"), minutes=45),
    Topic("19", "shard_download", "Downloading a sharded checkpoint: concurrency, timeouts, retries, cancellation",
          "Fetching a Hugging Face sharded checkpoint with asyncio and httpx against a fault-injecting server: a "
          "concurrency limit, connect and read timeouts under one deadline, retries with backoff that honour "
          "Retry-After and never a 4xx, resume with Range, sha256 against X-Linked-Etag, clean cancellation; why "
          "more connections are not faster, and 810 GB onto 1,024 nodes. 19b is the same downloader in Go (stdlib, "
          "Go 1.19 or newer).",
          (*_ex("19", ("download_shards", "")), ExerciseRef("19b", "Download", file="go/shards/exercise/download.go",
                                                         solution_file="go/shards/solution/download.go")),
          ("ringlab.shards.checkpoint", "ringlab.shards.faults", "ringlab.shards.server", "ringlab.shards.records",
           "ringlab.shards.fetch", "ringlab.calc.download"),
          ("ringlab.viz.shards",),
          ("tests/shards", "tests/check/graders/test_shard_download_grader.py",
           "tests/check/graders/test_shard_download_go.py", "tests/check/cards/test_card_19.py",
           "tests/calc/test_download.py", "tests/viz/test_viz_shards.py", "tests/go"),
          prerequisites=("02", "13"), minutes=60, needs=("httpx", "safetensors")),
    Topic("20", "plan_the_job", "Plan the job: every training layout searched, ranked, and why each wins or loses",
          "The inverse of the calculators: for a model on a cluster, search DP x TP x PP x CP x EP with ZeRO, "
          "recompute, micro-batch and virtual stages; prune by memory and by a floor on the step time; rank by "
          "step time and MFU, with the constraint that binds each layout; published layouts (Llama 3 405B, "
          "Megatron's 1T, MT-NLG 530B, DeepSeek-V3) placed in the ranking; the serving search; the design interview.",
          _ex("20", ("choose_tp", "")),
          ("ringlab.plan.space", "ringlab.plan.train", "ringlab.plan.published", "ringlab.plan.serve",
           "ringlab.plan.design"),
          ("ringlab.viz.plan",),
          ("tests/plan", "tests/viz/test_viz_plan.py"),
          prerequisites=("17", "18"), minutes=45),
    Topic("21", "serving_real_traffic",
          "Serving real traffic: production traces, prefix-cache hits, goodput and prefill/decode disaggregation",
          "Real traffic: Azure and Mooncake production traces replayed; the prefix-cache hit rate a pool of N "
          "blocks keeps under vLLM v1's LRU against the infinite-cache ceiling; goodput under TTFT and TPOT "
          "targets; prefill/decode disaggregation and the KV transfer between nodes.",
          _ex("21", ("prefix_hit_rate", "")),
          ("ringlab.serving.traces", "ringlab.serving.prefix_hits", "ringlab.serving.blocks",
           "ringlab.serving.goodput", "ringlab.serving.disagg"),
          ("ringlab.viz.traffic",),
          ("tests/serving/test_traces.py", "tests/serving/test_prefix_hits.py",
           "tests/serving/test_prefix_policy_v1.py", "tests/serving/test_goodput.py", "tests/serving/test_disagg.py",
           "tests/check/graders/test_serving_real_traffic_grader.py", "tests/check/cards/test_card_21.py"),
          prerequisites=("14", "15"), minutes=45),
)

# A first pass for a newcomer: the ring and its costs, the calculators interviews ask about, then
# the topics that need real processes, serving and the fabric. Prerequisites always come first.
RECOMMENDED_ORDER: tuple[str, ...] = ("01", "02", "04", "05", "06", "07", "08", "13", "16", "17", "18", "03",
                                      "11", "10", "14", "15", "21", "19", "20", "09", "12")

_BY_ID = {t.id: t for t in TOPICS}
_BY_SLUG = {t.slug: t for t in TOPICS}
_EXERCISE_ID = re.compile(r"^(\d\d)([a-z])$")


def topic_ids() -> list[str]:
    """Every topic number, in number order."""
    return [t.id for t in TOPICS]


def get_topic(key: str) -> Topic:
    """The topic for a number ("05", "5"), a slug ("kv_cache"), an exercise id ("05a") or an old id ("ex08", "P5").

    Raises ValueError naming the accepted forms and the known numbers and slugs.
    """
    text = str(key).strip()
    if text.isdigit() and f"{int(text):02d}" in _BY_ID:
        return _BY_ID[f"{int(text):02d}"]
    if text in _BY_SLUG:
        return _BY_SLUG[text]
    for resolve in (resolve_exercise, resolve_card):
        try:
            new_id, _ = resolve(text)
        except ValueError:
            continue
        return _BY_ID[new_id[:2]]
    raise ValueError(f"unknown topic {key!r}: give a number ({', '.join(_BY_ID)}) or a slug "
                     f"({', '.join(_BY_SLUG)})")


def exercise_refs() -> dict[str, tuple[Topic, ExerciseRef]]:
    """Every exercise id -> (its topic, its entry), in id order."""
    return {ex.id: (t, ex) for t in TOPICS for ex in t.exercises}


def resolve_exercise(key: str) -> tuple[str, str | None]:
    """``(exercise id, note)`` for ``key``: a current id ("05a"), an old one ("ex08", with a note saying the
    new id), or a topic number with exactly one exercise ("05"). Raises ValueError listing the known ids."""
    text = str(key).strip()
    refs = exercise_refs()
    if text in refs:
        return text, None
    for t in TOPICS:
        for ex in t.exercises:
            if ex.old_id and text == ex.old_id:
                return ex.id, f"{text} is now {ex.id} (topic {t.id} {t.slug})"
    if text in _BY_ID and len(_BY_ID[text].exercises) == 1:
        return _BY_ID[text].exercises[0].id, None
    raise ValueError(f"unknown exercise {key!r}; known: {', '.join(refs)} (old ids ex01..ex19 are accepted too)")


def resolve_card(key: str) -> tuple[str, str | None]:
    """``(card id, note)`` for ``key``: a card number ("05", "5") or an old problem-set id ("P5", "P05", with
    a note saying the new id). Raises ValueError listing the known card ids."""
    text = str(key).strip()
    if text.isdigit() and f"{int(text):02d}" in _BY_ID:
        return f"{int(text):02d}", None
    match = re.fullmatch(r"[Pp]0*(\d+)", text)
    if match:
        old = f"P{int(match.group(1))}"
        for t in TOPICS:
            if t.old_card == old:
                return t.id, f"card {text} is now {t.id} (topic {t.id} {t.slug})"
    raise ValueError(f"unknown card {key!r}; known: {', '.join(_BY_ID)} (old ids P1..P16 are accepted too)")


def topic_of_exercise(exercise_id: str) -> Topic:
    """The topic an exercise id ("05a") belongs to. Raises ValueError for an id not of the form NNx."""
    match = _EXERCISE_ID.match(exercise_id)
    if not match or match.group(1) not in _BY_ID:
        raise ValueError(f"exercise id must be a topic number and a letter (e.g. 05a), got {exercise_id!r}")
    return _BY_ID[match.group(1)]
