"""A training step as a timeline: compute and communication streams per rank, and what is exposed.

The simulator (:func:`simulate`) is a deterministic discrete-event simulation: every :class:`Task`
sits on one *stream* of one rank, a stream runs its tasks one at a time in the order they were
submitted (as a CUDA stream does), and a task starts at the later of "its stream is free" and "every
task it depends on has ended". Start and end times follow from that rule alone (no randomness, no
tie-breaking by chance).

Builders turn a model's per-layer costs (:class:`LayerCost`) into tasks:

* :func:`ddp_step`: forward, then backward in reverse layer order; gradients go into buckets as
  torch DDP forms them (``bucket_cap_mb``, 25 MiB by default, the first bucket 1 MiB), and each bucket's
  all_reduce is launched on the one NCCL stream as soon as the backward has produced its last gradient.
* :func:`fsdp_step`: FULL_SHARD units; each unit's parameters are all-gathered before its forward
  (and again before its backward when resharded after forward); with prefetch the next unit's
  all_gather is issued while the current unit computes; each unit's gradients are reduce-scattered
  after its backward.
* ``tp=`` :class:`TensorParallel` on either builder: Megatron-LM's two collectives per layer in the
  forward and two in the backward, on the critical path (the next compute waits for them).
* :func:`pipeline_step`: GPipe, 1F1B, interleaved 1F1B or ZB-H1 over ``stages`` ranks with activation
  send/recv between neighbouring stages (op order from :mod:`ringlab.calc.pipeline`).

Exposed communication (:meth:`Timeline.exposed`): a communication task's time during which its
rank's compute streams run nothing. On one rank the total is the measure of
``union(comm intervals) - union(compute intervals)``; with one compute stream and no other source of
idleness (no pipeline), step time = compute time + exposed communication exactly.

Modelling assumptions (each one is a simplification a real run departs from):

1. Compute and communication do not slow each other: NCCL kernels take no SMs or HBM bandwidth from
   the compute kernels, and vice versa (in practice overlapped NCCL kernels slow GEMMs by a few percent).
2. Communication streams do not slow each other either: two streams of one rank that share a link
   each get its full bandwidth. Collectives that share a link belong on one stream (DDP's buckets;
   FSDP's gathers and reduce-scatters by default); TP and DP get their own, as they usually run on
   different links (NVLink inside the node, the NICs across nodes).
3. Collective times come from ringlab's cost model: ring algorithms, alpha-beta
   (:func:`ringlab.collectives.cost.alpha_beta_time`) on a :class:`~ringlab.collectives.cost.Link`, or
   NCCL-style rings routed on a :class:`ringlab.topology.Cluster` (:func:`ringlab.topology.timing.ring_link`).
   A send/recv is one message, ``alpha + bytes / bandwidth`` (the two-rank broadcast).
4. Ranks that run the same program (DP, TP and FSDP ranks) are simulated once: they are identical, so
   every collective starts on all of them at the same moment. Stragglers and skew are not modelled.
5. Kernel launch and CPU overhead are zero; the CPU is always ahead of the GPU, so a task is ready as
   soon as its dependencies end (no launch gaps, no Python hook latency).
6. A layer's backward produces all its gradients when it ends (buckets and reduce-scatters wait for
   the whole layer); buckets are formed from whole layers, not from single tensors.
7. Durations are exact: no jitter, no variation between micro-batches.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ringlab.calc.hardware import peak_flops
from ringlab.calc.models import get_model
from ringlab.calc.params import count_params, layer_param_count, norm_param_count
from ringlab.calc.pipeline import BACKWARD, FORWARD, WEIGHT, check_pipeline_setup, op_dependency, stage_op_orders
from ringlab.validation import check_number
from ringlab.calc.units import dtype_bytes
from ringlab.collectives.cost import alpha_beta_time, busiest_bytes, get_link
from ringlab.topology.cluster import Cluster
from ringlab.topology.timing import group_cluster, ring_link

from .flops import layer_flops, lm_head_flops

COMPUTE = "compute"
COMM_COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv")
MiB = 2**20


# ---------------------------------------------------------------------------------------------- core

@dataclass(frozen=True)
class Task:
    """One piece of work on one stream of one rank.

    ``name``: unique within a simulation. ``stream``: the stream it runs on (``"compute"`` for
    kernels, any other name for a communication stream). ``duration``: seconds >= 0.
    ``deps``: names of tasks that must end before this one starts. ``collective``: None for compute,
    else one of :data:`COMM_COLLECTIVES`. ``message_bytes``: the collective's buffer (nccl-tests' S)
    or the bytes sent. ``label``: the group it is reported under (e.g. ``"dp all_reduce"``).
    ``peers``: the ranks whose exposure it counts on instead of its own (a send counts on its receiver,
    the rank that waits for it; the sender goes on computing).
    ``group_size``: ranks taking part in the collective (2 for a send/recv).
    """

    name: str
    rank: int
    stream: str
    duration: float
    deps: tuple[str, ...] = ()
    collective: str | None = None
    message_bytes: int = 0
    label: str = ""
    peers: tuple[int, ...] = ()
    group_size: int = 1

    @property
    def is_comm(self) -> bool:
        return self.collective is not None

    @property
    def counted_on(self) -> tuple[int, ...]:
        """Ranks whose exposed communication includes this task: ``peers`` if given, else its own rank."""
        return self.peers or (self.rank,)


def _merge(intervals) -> list[tuple[float, float]]:
    """Disjoint sorted union of ``(start, end)`` intervals (touching ones are joined)."""
    out: list[list[float]] = []
    for s, e in sorted((float(s), float(e)) for s, e in intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _gaps(merged: list[tuple[float, float]], s: float, e: float) -> list[tuple[float, float]]:
    """The parts of ``[s, e]`` outside the disjoint sorted intervals ``merged``."""
    out, cursor = [], s
    first = max(0, bisect.bisect_right(merged, (s, math.inf)) - 1)  # the last interval starting at or before s
    for a, b in merged[first:]:
        if a >= e:
            break
        if b <= cursor:
            continue
        if a > cursor:
            out.append((cursor, a))
        cursor = b
    if cursor < e:
        out.append((cursor, e))
    return out


def _measure(merged) -> float:
    return sum(e - s for s, e in merged)


@dataclass(frozen=True)
class Timeline:
    """The simulated step: ``tasks`` with their ``start`` and ``end`` (float64 arrays, seconds, same order).

    Exposure is per rank (see the module docstring); a task counts on :attr:`Task.counted_on`.
    """

    tasks: tuple[Task, ...]
    start: np.ndarray
    end: np.ndarray
    notes: tuple[str, ...] = field(default=())

    @property
    def step_time(self) -> float:
        """Seconds from 0 to the last task's end (0 for an empty timeline)."""
        return float(self.end.max()) if len(self.tasks) else 0.0

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(sorted({t.rank for t in self.tasks}))

    def streams(self, rank: int = 0) -> tuple[str, ...]:
        """The rank's streams in order of first use, compute first."""
        names = list(dict.fromkeys(t.stream for t in self.tasks if t.rank == rank))
        return tuple(sorted(names, key=lambda s: s != COMPUTE))

    def _on(self, rank: int, comm: bool) -> list[int]:
        return [i for i, t in enumerate(self.tasks)
                if t.is_comm == comm and rank in (t.counted_on if comm else (t.rank,))]

    def task(self, name: str) -> tuple[float, float]:
        """``(start, end)`` of the task called ``name``; KeyError otherwise."""
        for i, t in enumerate(self.tasks):
            if t.name == name:
                return float(self.start[i]), float(self.end[i])
        raise KeyError(f"no task named {name!r}")

    def compute_time(self, rank: int = 0) -> float:
        """Busy seconds of the rank's compute streams (their union)."""
        return _measure(_merge((self.start[i], self.end[i]) for i in self._on(rank, False)))

    def comm_time(self, rank: int = 0, stream: str | None = None) -> float:
        """Sum of the durations of the communication tasks counted on the rank (on ``stream`` only, if given)."""
        return float(sum(self.tasks[i].duration for i in self._on(rank, True)
                         if stream is None or self.tasks[i].stream == stream))

    def exposed_intervals(self, rank: int = 0) -> dict[str, list[tuple[float, float]]]:
        """Per communication task of ``rank``: the ``(start, end)`` stretches of it during which no compute
        of the rank runs (empty when it is hidden)."""
        busy = _merge((self.start[i], self.end[i]) for i in self._on(rank, False))
        return {self.tasks[i].name: _gaps(busy, float(self.start[i]), float(self.end[i])) for i in self._on(rank, True)}

    def exposed(self, rank: int = 0) -> dict[str, float]:
        """Per communication task of ``rank``: seconds of it during which no compute of the rank runs
        (exactly 0.0 for a task that lies inside the rank's compute)."""
        return {name: sum((b - a for a, b in gaps), 0.0) for name, gaps in self.exposed_intervals(rank).items()}

    def exposed_total(self, rank: int = 0) -> float:
        """Seconds during which some communication of ``rank`` runs and none of its compute does.

        Equals the sum of :meth:`exposed` when the rank's collectives never overlap each other (one
        communication stream); smaller when two exposed collectives run at the same time.
        """
        busy = _merge((self.start[i], self.end[i]) for i in self._on(rank, False))
        comm = _merge((self.start[i], self.end[i]) for i in self._on(rank, True))
        return sum((b - a for s, e in comm for a, b in _gaps(busy, s, e)), 0.0)

    def exposed_by_label(self, rank: int = 0) -> dict[str, float]:
        """:meth:`exposed` summed per task label (e.g. ``{"dp all_reduce": ..., "tp all_reduce": ...}``)."""
        out: dict[str, float] = {}
        per_task = self.exposed(rank)
        for t in self.tasks:
            if t.name in per_task:
                key = t.label or t.collective
                out[key] = out.get(key, 0.0) + per_task[t.name]
        return out

    def bytes_sent(self, rank: int = 0) -> int:
        """Bytes the rank sends in the step: each ring collective's busiest-rank count
        (:func:`ringlab.collectives.cost.busiest_bytes`, 1-byte elements), each send's message."""
        total = 0
        for t in self.tasks:
            if t.is_comm and t.rank == rank:
                total += t.message_bytes if t.collective == "send_recv" else busiest_bytes(
                    t.collective, "ring", t.group_size, t.message_bytes)
        return total

    def idle_time(self, rank: int = 0) -> float:
        """Seconds of the step during which the rank neither computes nor communicates (pipeline bubble)."""
        return self.step_time - self.compute_time(rank) - self.exposed_total(rank)

    def rows(self, rank: int | None = None) -> list[dict]:
        """One dict per task (rank, stream, name, label, collective, bytes, start_s, end_s), by start time."""
        rows = [{"rank": t.rank, "stream": t.stream, "name": t.name, "label": t.label, "collective": t.collective,
                 "message_bytes": t.message_bytes, "start_s": float(self.start[i]), "end_s": float(self.end[i])}
                for i, t in enumerate(self.tasks) if rank is None or t.rank == rank]
        return sorted(rows, key=lambda r: (r["rank"], r["start_s"], r["end_s"]))

    def summary(self, rank: int = 0) -> str:
        """Lines: step time, compute, communication and exposed time per label, in milliseconds."""
        lines = [f"step {self.step_time * 1e3:.3f} ms on rank {rank}: compute {self.compute_time(rank) * 1e3:.3f} ms, "
                 f"communication {self.comm_time(rank) * 1e3:.3f} ms, exposed {self.exposed_total(rank) * 1e3:.3f} ms"]
        totals: dict[str, float] = {}
        for i in self._on(rank, True):
            t = self.tasks[i]
            totals[t.label or t.collective] = totals.get(t.label or t.collective, 0.0) + t.duration
        for label, seconds in self.exposed_by_label(rank).items():
            lines.append(f"  {label}: {totals[label] * 1e3:.3f} ms, exposed {seconds * 1e3:.3f} ms")
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])


def _check_task(t) -> None:
    if not isinstance(t, Task):
        raise TypeError(f"tasks must be Task objects, got {type(t).__name__}")
    check_number(f"rank of task {t.name!r}", t.rank, integer=True)
    check_number(f"duration of task {t.name!r}", t.duration)
    if t.collective is not None and t.collective not in COMM_COLLECTIVES:
        raise ValueError(f"task {t.name!r}: collective must be None (compute) or one of "
                         f"{', '.join(COMM_COLLECTIVES)}, got {t.collective!r}")
    if t.is_comm == (t.stream == COMPUTE):
        raise ValueError(f"task {t.name!r}: compute tasks run on stream {COMPUTE!r} and communication on any "
                         f"other stream, got stream {t.stream!r} with collective {t.collective!r}")


def simulate(tasks: Sequence[Task], notes: Sequence[str] = ()) -> Timeline:
    """Start and end of every task under the stream rule (module docstring). Returns a :class:`Timeline`.

    A stream is ``(rank, stream)``; its tasks run in the order they appear in ``tasks``. Raises
    TypeError / ValueError for a non-Task, a negative or non-finite duration, a duplicate name, an
    unknown dependency, or a set of tasks that can never start (a dependency cycle, or a task waiting
    on one queued behind it on its own stream), naming the tasks involved.
    """
    tasks = tuple(tasks)
    index: dict[str, int] = {}
    for i, t in enumerate(tasks):
        _check_task(t)
        if t.name in index:
            raise ValueError(f"task name {t.name!r} is used twice")
        index[t.name] = i
    for t in tasks:
        for d in t.deps:
            if d not in index:
                raise ValueError(f"task {t.name!r} depends on unknown task {d!r}")
    queues: dict[tuple[int, str], list[int]] = {}
    for i, t in enumerate(tasks):
        queues.setdefault((t.rank, t.stream), []).append(i)
    start, end = np.zeros(len(tasks)), np.zeros(len(tasks))
    done = np.zeros(len(tasks), dtype=bool)
    cursor = {key: 0 for key in queues}
    free = {key: 0.0 for key in queues}
    remaining = len(tasks)
    while remaining:
        progressed = False
        for key, queue in queues.items():
            while cursor[key] < len(queue):
                i = queue[cursor[key]]
                deps = [index[d] for d in tasks[i].deps]
                if not all(done[j] for j in deps):
                    break
                start[i] = max([free[key]] + [end[j] for j in deps])
                end[i] = free[key] = start[i] + tasks[i].duration
                done[i] = True
                cursor[key] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            blocked = [tasks[q[cursor[k]]].name for k, q in queues.items() if cursor[k] < len(q)]
            raise ValueError(f"tasks can never start (a dependency cycle, or a dependency queued behind the task "
                             f"on its own stream): {', '.join(blocked[:8])}")
    return Timeline(tasks, start, end, tuple(notes))


# ------------------------------------------------------------------------------------- costs

def collective_time(collective: str, message_bytes: int, group_size: int, fabric) -> float:
    """Seconds of one ring ``collective`` of ``message_bytes`` (nccl-tests' S) over ``group_size`` ranks.

    ``fabric``: a :class:`ringlab.collectives.cost.Link` or preset name (alpha-beta,
    :func:`~ringlab.collectives.cost.alpha_beta_time`), or a :class:`ringlab.topology.Cluster` whose first
    ``group_size`` GPUs run NCCL-style rings (:func:`~ringlab.topology.timing.ring_link` on
    :func:`~ringlab.topology.timing.group_cluster`). ``"send_recv"`` is one message between two ranks
    (on a Cluster: two GPUs of one node; pass a Link for a send across nodes). 0 for one rank.
    Raises ValueError / TypeError for unknown collectives, fabrics or negative sizes.
    """
    check_number("message_bytes", message_bytes)
    check_number("group_size", group_size, 1, integer=True)
    if collective == "send_recv":
        return alpha_beta_time("broadcast", "binomial_tree", 2, int(message_bytes), _link(fabric, "all_gather", 2))
    if collective not in COMM_COLLECTIVES:
        raise ValueError(f"collective must be one of {', '.join(COMM_COLLECTIVES)}, got {collective!r}")
    if group_size == 1:
        return 0.0
    return alpha_beta_time(collective, "ring", group_size, int(message_bytes), _link(fabric, collective, group_size))


def _link(fabric, collective: str, group_size: int):
    if isinstance(fabric, Cluster):
        return ring_link(group_cluster(fabric, group_size), collective)
    return get_link(fabric)


@dataclass(frozen=True)
class LayerCost:
    """One layer on one rank: ``forward_s`` and ``backward_s`` compute seconds (per micro-batch) and
    ``grad_bytes``, the bytes of its gradients this rank reduces (its parameters after TP/PP sharding, in
    the gradient dtype; it is also what FSDP all-gathers, in the same dtype)."""

    name: str
    forward_s: float
    backward_s: float
    grad_bytes: int

    def __post_init__(self) -> None:
        check_number(f"{self.name}: forward_s", self.forward_s)
        check_number(f"{self.name}: backward_s", self.backward_s)
        check_number(f"{self.name}: grad_bytes", self.grad_bytes, integer=True)


def model_layer_costs(model, seq_len: int, micro_batch: int = 1, hardware="h100-sxm", efficiency: float = 0.5,
                      tp: int = 1, dtype: str = "bf16", grad_dtype: str = "bf16",
                      causal: bool = False) -> tuple[LayerCost, ...]:
    """Per-layer :class:`LayerCost` of a model preset (or config.json / ModelConfig) on one GPU.

    Layers, in forward order: ``embed`` (no FLOPs; the input embedding's gradient, and the shared
    matrix when embeddings are tied), the decoder layers, ``lm_head`` (its matrix when untied, the final
    norm). FLOPs: :func:`ringlab.calc.training.flops.layer_flops` (backward = 2 x forward) and
    :func:`~ringlab.calc.training.flops.lm_head_flops`, divided by ``tp`` and run at ``efficiency`` x
    the chip's dense peak in ``dtype`` (:func:`ringlab.calc.peak_flops`; ``efficiency`` is an assumption,
    the share of peak the kernels reach). Gradient bytes: the layer's total parameters
    (:mod:`ringlab.calc.params`; all experts of an MoE layer) / ``tp`` in ``grad_dtype``.
    Raises ValueError for sizes < 1, ``efficiency`` outside (0, 1], unknown presets or dtypes.
    """
    m = get_model(model)
    check_number("efficiency", efficiency, strict=True)
    if efficiency > 1:
        raise ValueError(f"efficiency must be in (0, 1] (a share of the peak), got {efficiency}")
    check_number("tp", tp, 1, integer=True)
    rate = peak_flops(hardware, dtype) * efficiency * tp
    item = dtype_bytes(grad_dtype)
    layer_params = [layer_param_count(m, layer, False) for layer in m.layers]
    head = 0 if m.tie_word_embeddings else m.vocab_size * m.hidden_size  # the untied output matrix
    rest = count_params(m, active=False, include_mtp=False) - sum(layer_params)  # embeddings, head, final norm
    embed = rest - head - norm_param_count(m, m.hidden_size)

    def grad_bytes(n: int) -> int:
        return math.ceil(n * item / tp)

    costs = [LayerCost("embed", 0.0, 0.0, grad_bytes(embed))]
    for layer, n in zip(m.layers, layer_params):
        f = layer_flops(m, layer, seq_len, micro_batch, causal)
        costs.append(LayerCost(f"layer {layer.index}", f.forward / rate, f.backward / rate, grad_bytes(n)))
    head_f = lm_head_flops(m, seq_len, micro_batch)
    costs.append(LayerCost("lm_head", head_f / rate, 2 * head_f / rate, grad_bytes(rest - embed)))
    return tuple(costs)


@dataclass(frozen=True)
class TensorParallel:
    """Megatron-LM tensor parallelism (Shoeybi et al. 2019, sec. 3): ``size`` ranks, and per layer two
    all_reduces of the activations in the forward (after attention and after the MLP) and two in the
    backward, each of ``message_bytes`` (micro_batch x seq x hidden x activation bytes). With
    ``sequence_parallel`` (Korthikanti et al. 2022, sec. 4.2.2) each all_reduce becomes a reduce_scatter
    and an all_gather of the same buffer. The layer's compute is split evenly around them, and the next
    compute waits for each one: TP collectives sit on the critical path (no async TP)."""

    size: int
    message_bytes: int
    fabric: object = "nvlink4"
    sequence_parallel: bool = False

    def __post_init__(self) -> None:
        check_number("TensorParallel size", self.size, 1, integer=True)
        check_number("TensorParallel message_bytes", self.message_bytes, integer=True)

    def collectives(self) -> tuple[tuple[str, float], ...]:
        """``(collective, seconds)`` of one of the two TP points of a pass."""
        names = ("reduce_scatter", "all_gather") if self.sequence_parallel else ("all_reduce",)
        return tuple((c, collective_time(c, self.message_bytes, self.size, self.fabric)) for c in names)


# ---------------------------------------------------------------------------------------- builders

class _Builder:
    """Appends tasks to one rank's streams. ``tail``: what the next layer pass waits for (the previous pass's
    compute, or its last TP collective); ``last_compute``: the last compute task (gradients ready)."""

    def __init__(self, rank: int = 0):
        self.rank, self.tasks, self.last_compute, self.tail = rank, [], None, None

    def add(self, name, stream, duration, deps=(), collective=None, message_bytes=0, label="", group_size=1):
        self.tasks.append(Task(name, self.rank, stream, float(duration), tuple(d for d in deps if d),
                               collective, int(message_bytes), label, (), group_size))
        return name

    def compute(self, name, duration, deps=()):
        phase = {"F": "forward", "B": "backward"}.get(name[:1], name)
        self.last_compute = self.add(name, COMPUTE, duration, deps, label=phase)
        return name

    def layer_pass(self, layer: str, duration: float, tp: TensorParallel | None, deps=(), tp_stream="tp"):
        """A layer's forward or backward: compute halves, each followed by the TP collectives it waits on.
        Returns the task the next pass must wait for (the last TP collective, or the compute)."""
        deps = tuple(deps) + (self.tail,)
        if tp is None or tp.size == 1:
            self.tail = self.compute(layer, duration, deps)
            return self.tail
        points = tp.collectives()
        waits = tuple(deps)
        for half in (0, 1):
            c = self.compute(f"{layer}.{half}", duration / 2, waits)
            waits = (c,)
            for collective, seconds in points:
                waits = (self.add(f"{layer}.{half}.tp {collective}", tp_stream, seconds, waits, collective,
                                  tp.message_bytes, f"tp {collective}", tp.size),)
        self.tail = waits[0]
        return self.tail


def _check_layers(layers) -> tuple[LayerCost, ...]:
    layers = tuple(layers)
    if not layers or not all(isinstance(x, LayerCost) for x in layers):
        raise TypeError("layers must be a non-empty sequence of LayerCost")
    return layers


def ddp_buckets(layers: Sequence[LayerCost], bucket_cap_mb: float = 25,
                first_bucket_mb: float | None = 1) -> list[list[int]]:
    """Layer indices of each DDP gradient bucket, in launch order (reverse layer order).

    torch ``DistributedDataParallel`` passes the parameters in reverse order to
    ``_compute_bucket_assignment_by_size`` with the limits ``[_DEFAULT_FIRST_BUCKET_BYTES (1 MiB),
    bucket_cap_mb x 2**20]``: a bucket is closed once it holds at least its limit, so it can exceed it
    by one layer, and a layer larger than the cap fills a bucket alone. ``first_bucket_mb=None`` uses
    the cap for the first bucket too. Layers without gradients (``grad_bytes`` 0) join the open bucket
    (and, in :func:`ddp_step`, the bucket waits for their backward too: a simplification).
    Raises ValueError for a cap <= 0.
    """
    layers = _check_layers(layers)
    check_number("bucket_cap_mb", bucket_cap_mb, strict=True)
    if first_bucket_mb is not None:
        check_number("first_bucket_mb", first_bucket_mb, strict=True)
    caps = [first_bucket_mb if first_bucket_mb is not None else bucket_cap_mb, bucket_cap_mb]
    buckets, current, size = [], [], 0
    for i in reversed(range(len(layers))):
        current.append(i)
        size += layers[i].grad_bytes
        if size >= caps[min(len(buckets), 1)] * MiB:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def ddp_step(layers: Sequence[LayerCost], world_size: int, fabric="ib-ndr", bucket_cap_mb: float = 25,
             first_bucket_mb: float | None = 1, optimizer_s: float = 0.0, tp: TensorParallel | None = None,
             buckets: Sequence[Sequence[int]] | None = None) -> Timeline:
    """One DDP step on one rank: forward, backward with bucketed all_reduce, optimizer step.

    Forward runs layers 0..L-1, backward L-1..0 on the compute stream. Bucket b (from
    :func:`ddp_buckets`, or ``buckets`` given as lists of layer indices in launch order) is all-reduced
    over ``world_size`` ranks on the ``"dp"`` stream once the backward of every layer in it has ended;
    buckets go out in order (torch DDP launches them in bucket order: ``Reducer::mark_bucket_ready``).
    The optimizer step (``optimizer_s`` seconds of compute) waits for every bucket. TP collectives, when
    ``tp`` is given, run on a ``"tp"`` stream. Assumptions: module docstring. Units: seconds, bytes.
    """
    layers = _check_layers(layers)
    check_number("world_size", world_size, 1, integer=True)
    check_number("optimizer_s", optimizer_s)
    if buckets is None:
        buckets = ddp_buckets(layers, bucket_cap_mb, first_bucket_mb)
    buckets = [list(b) for b in buckets]
    if sorted(i for b in buckets for i in b) != list(range(len(layers))):
        raise ValueError(f"buckets must hold every layer index 0..{len(layers) - 1} exactly once, got {buckets}")
    job = _Builder()
    for i, layer in enumerate(layers):
        job.layer_pass(f"F{i}", layer.forward_s, tp)
    backward = {}
    for i in reversed(range(len(layers))):
        job.layer_pass(f"B{i}", layers[i].backward_s, tp)
        backward[i] = job.last_compute
    reduces = []
    for b, members in enumerate(buckets if world_size > 1 else ()):  # one rank has nothing to reduce
        nbytes = sum(layers[i].grad_bytes for i in members)
        reduces.append(job.add(f"bucket {b}", "dp", collective_time("all_reduce", nbytes, world_size, fabric),
                               [backward[i] for i in members], "all_reduce", nbytes, "dp all_reduce", world_size))
    job.compute("optimizer", optimizer_s, [job.tail] + reduces)
    return simulate(job.tasks, (f"{len(buckets)} bucket(s) over {world_size} ranks",))


def bucket_step(backward_s: Sequence[float], allreduce_s: Sequence[float], forward_s: float = 0.0) -> Timeline:
    """DDP's overlap reduced to its buckets: ``forward_s`` of forward, then for each bucket i (launch order)
    ``backward_s[i]`` of backward compute that produces it, and its all_reduce of ``allreduce_s[i]``
    seconds on the one NCCL stream, launched when that compute ends. Compute never waits; the step ends
    when the last all_reduce does. :func:`ddp_step` builds the same timeline from layers and bytes.
    Raises ValueError for lists of different or zero length, or negative or non-finite times.
    """
    backward_s, allreduce_s = list(backward_s), list(allreduce_s)
    if not backward_s or len(backward_s) != len(allreduce_s):
        raise ValueError(f"backward_s and allreduce_s need one entry per bucket (>= 1), got {len(backward_s)} "
                         f"and {len(allreduce_s)}")
    job = _Builder()
    job.compute("forward", check_number("forward_s", forward_s))
    for i, (c, a) in enumerate(zip(backward_s, allreduce_s)):
        ready = job.compute(f"B{i}", check_number(f"backward_s[{i}]", c), (job.last_compute,))
        job.add(f"bucket {i}", "dp", check_number(f"allreduce_s[{i}]", a), (ready,), "all_reduce", 0, "dp all_reduce")
    return simulate(job.tasks, (f"{len(backward_s)} bucket(s)",))


def fsdp_step(layers: Sequence[LayerCost], world_size: int, fabric="ib-ndr",
              units: Sequence[Sequence[int]] | None = None,
              forward_prefetch: bool = True, backward_prefetch: bool = True, reshard_after_forward: bool = True,
              streams: str = "one", optimizer_s: float = 0.0, tp: TensorParallel | None = None) -> Timeline:
    """One FSDP step on one rank: all_gather per unit before its forward and backward, reduce_scatter after
    its backward (FULL_SHARD; ``reshard_after_forward=False`` is SHARD_GRAD_OP: no backward all_gather).

    ``units``: lists of consecutive layer indices (default: one unit per layer), each one FSDP-wrapped
    module whose parameters are gathered together (``grad_bytes`` of its layers, full size: nccl-tests'
    S). Prefetch, one unit ahead as FSDP limits it (two units unsharded at once):

    * forward: without prefetch unit u+1's all_gather waits for unit u's forward to end; with it, it waits
      only for unit u-1's forward (whose memory it reuses), so it runs while unit u computes;
    * backward (BACKWARD_PRE): the all_gather for unit u-1 is issued before unit u's backward (waits for
      unit u+1's backward); without prefetch it waits for unit u's backward to end.

    ``streams``: ``"one"`` (default) queues all_gathers and reduce_scatters on one NCCL stream in issue
    order, which is what sharing one link amounts to; ``"two"`` gives each its own stream, as FSDP2 does
    (all_gather and reduce_scatter streams), and by assumption 2 both then run at the link's full rate: an
    optimistic bound unless they use different links. The optimizer step waits for every reduce_scatter.
    Assumptions: module docstring.
    """
    layers = _check_layers(layers)
    check_number("world_size", world_size, 1, integer=True)
    check_number("optimizer_s", optimizer_s)
    if streams not in ("one", "two"):
        raise ValueError(f"streams must be 'one' or 'two', got {streams!r}")
    units = [list(u) for u in (units if units is not None else [[i] for i in range(len(layers))])]
    if [i for u in units for i in u] != list(range(len(layers))) or any(not u for u in units):
        raise ValueError(f"units must be non-empty runs of consecutive layer indices covering 0..{len(layers) - 1} "
                         f"in order, got {units}")
    ag_stream, rs_stream = ("all_gather", "reduce_scatter") if streams == "two" else ("dp", "dp")
    nbytes = [sum(layers[i].grad_bytes for i in u) for u in units]
    ag = [collective_time("all_gather", n, world_size, fabric) for n in nbytes]
    rs = [collective_time("reduce_scatter", n, world_size, fabric) for n in nbytes]
    job, n_units = _Builder(), len(units)
    fwd_end: dict[int, str] = {}
    gathered: dict[int, str] = {}

    def gather(u: int, phase: str, after: str | None) -> None:
        if world_size == 1:  # nothing is sharded
            gathered[u] = None
            return
        gathered[u] = job.add(f"AG{phase}{u}", ag_stream, ag[u], (after,), "all_gather", nbytes[u], "fsdp all_gather",
                              world_size)

    gather(0, "f", None)
    for u, members in enumerate(units):
        if u + 1 < n_units and forward_prefetch:
            gather(u + 1, "f", fwd_end.get(u - 1))
        for i in members:
            job.layer_pass(f"F{i}", layers[i].forward_s, tp, (gathered[u],))
        fwd_end[u] = job.last_compute
        if u + 1 < n_units and not forward_prefetch:
            gather(u + 1, "f", fwd_end[u])
    bwd_end: dict[int, str] = {}
    if reshard_after_forward:
        gather(n_units - 1, "b", fwd_end[n_units - 1])
    reduces = []
    for u in reversed(range(n_units)):
        if reshard_after_forward and u > 0 and backward_prefetch:
            gather(u - 1, "b", bwd_end.get(u + 1, fwd_end[n_units - 1]))
        for i in reversed(units[u]):
            job.layer_pass(f"B{i}", layers[i].backward_s, tp, (gathered[u],))
        bwd_end[u] = job.last_compute
        if reshard_after_forward and u > 0 and not backward_prefetch:
            gather(u - 1, "b", bwd_end[u])
        if world_size > 1:
            reduces.append(job.add(f"RS{u}", rs_stream, rs[u], (bwd_end[u],), "reduce_scatter", nbytes[u],
                                   "fsdp reduce_scatter", world_size))
    job.compute("optimizer", optimizer_s, [job.tail] + reduces)
    return simulate(job.tasks, (f"{n_units} FSDP unit(s) over {world_size} ranks, {streams} stream(s)",))


def pipeline_step(stages: int, microbatches: int, schedule: str = "1f1b", t_f: float = 1e-3, t_b: float = 1e-3,
                  t_w: float = 1e-3, activation_bytes: int = 0, fabric="nvlink4", virtual_stages: int = 1,
                  dp_size: int = 1, stage_grad_bytes: int = 0, dp_fabric="ib-ndr") -> Timeline:
    """One pipeline-parallel step: ``stages`` ranks (rank s = stage s), each running its ops in the order
    of :mod:`ringlab.calc.pipeline` (GPipe, 1F1B, interleaved 1F1B, ZB-H1), with activations (forward)
    and activation gradients (backward) of ``activation_bytes`` sent between neighbouring stages.

    Times are seconds per micro-batch per stage (per model chunk when ``virtual_stages`` > 1); a
    backward lasts ``t_b + t_w`` except in ZB-H1, which runs W ops apart. A send runs on the sender's
    stream towards that neighbour (``"p2p->d"``), one message at a time, and the receiver's op waits for
    it; the sender does not wait (asynchronous isend). Exposure of a send counts on the receiver.
    With ``activation_bytes=0`` the ops start exactly when :func:`ringlab.calc.pipeline_schedule` says.

    Data parallelism across pipelines (``dp_size`` > 1): each stage all-reduces its ``stage_grad_bytes``
    of gradients over ``dp_size`` ranks on ``dp_fabric`` (stream ``"dp"``) once its last op has ended, one
    bucket per stage. Later stages finish their backward first, so their all-reduce runs in their
    cool-down bubble; stage 0's comes last and lengthens the step. Errors as
    :func:`ringlab.calc.pipeline_schedule` for the schedule arguments, ValueError for negative sizes.
    """
    p, m, schedule, v = check_pipeline_setup(stages, microbatches, schedule, virtual_stages)
    for name, value in (("t_f", t_f), ("t_b", t_b), ("t_w", t_w)):
        check_number(name, value)
    check_number("activation_bytes", activation_bytes, integer=True)
    check_number("dp_size", dp_size, 1, integer=True)
    check_number("stage_grad_bytes", stage_grad_bytes, integer=True)
    letter = {FORWARD: "F", BACKWARD: "B", WEIGHT: "W"}
    duration = {FORWARD: t_f, BACKWARD: t_b if schedule == "zb-h1" else t_b + t_w, WEIGHT: t_w}
    send_s = collective_time("send_recv", activation_bytes, 2, fabric) if activation_bytes else 0.0

    def op_name(op, s):
        kind, mb, chunk = op
        return f"s{s} {letter[kind]}{mb}" + (f".c{chunk}" if v > 1 else "")

    # Tasks are listed stage by stage; the simulator resolves the cross-stage order itself.
    tasks = []
    for s, ops in enumerate(stage_op_orders(p, m, schedule, v)):
        for op in ops:
            deps = ()
            dep = op_dependency(op, s, p, v)
            if dep is not None:
                src_op, src = dep
                deps = (op_name(src_op, src),)
                if src != s and activation_bytes:
                    what = "activation" if op[0] == FORWARD else "gradient"
                    send = f"send {op_name(src_op, src)} -> s{s}"
                    tasks.append(Task(send, src, f"p2p->{s}", send_s, deps, "send_recv", int(activation_bytes),
                                      f"pp send {what}", (s,), 2))
                    deps = (send,)
            tasks.append(Task(op_name(op, s), s, COMPUTE, float(duration[op[0]]), deps,
                              label={FORWARD: "forward", BACKWARD: "backward", WEIGHT: "weight"}[op[0]]))
        if dp_size > 1:  # one bucket per stage, launched when the stage's last op ends
            seconds = collective_time("all_reduce", stage_grad_bytes, dp_size, dp_fabric)
            tasks.append(Task(f"s{s} dp all_reduce", s, "dp", seconds, (op_name(ops[-1], s),), "all_reduce",
                              int(stage_grad_bytes), "dp all_reduce", (), dp_size))
    # Sends must sit in their stream in the order the sender produces them: by the op they carry.
    position = {t.name: k for k, t in enumerate(tasks) if not t.is_comm}
    tasks.sort(key=lambda t: (position[t.deps[0]] + 0.5) if t.is_comm else position[t.name])
    return simulate(tasks, (f"{schedule}: {p} stages, {m} micro-batches",))
