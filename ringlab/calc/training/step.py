"""Step time and MFU of a training layout on a ``ringlab.topology`` cluster: a closed-form estimate.

Placement: ranks are numbered tp-fastest (``ParallelLayout.stride``) and laid on the cluster block-wise
(rank r on node r // G, G GPUs per node, as torchrun numbers them). A group of n ranks at stride st
therefore runs

- inside one NVLink domain when st x n <= G: ``ringlab.topology.timing.group_cluster`` of n GPUs;
- on n nodes, one GPU each, when st >= G: every GPU of a node is in its own group at once, so each gets
  its share of the node's NICs (``rail_cluster``, the rail it is wired to);
- otherwise on st x n / G nodes holding G / st members each, the node's NICs shared by st groups.

Dense gradients go over the dp x cp ranks (Megatron's DP group includes CP), which sit at stride tp; expert
gradients over the expert-DP ranks at stride tp x ep.

Ring collectives are timed with ``ringlab.topology.timing.ring_link`` on that sub-cluster (NCCL-style
rings: ``steps x alpha + bytes / bandwidth``, as ``ringlab.calc.comm.GradComm.time_on_cluster`` does);
send/recv (PP, CP) at the GPU's NVLink port or NIC share; all-to-all (EP) as the larger of its NVLink
and NIC parts.

Time of one step on the busiest pipeline stage (every term in seconds):

- compute (the matmuls): the stage's forward + backward (+ recompute) FLOPs per micro-batch on one GPU
  (layers / (tp x cp), LM head / tp) at ``compute_efficiency`` x the dense peak, times m micro-batches;
- memory-bound kernels: norms, softmax, dropout, residual adds, activation functions, rotary embeddings
  and the loss move the bytes of :mod:`ringlab.calc.training.kernels` per micro-batch (forward, backward and
  what recomputation re-runs), and the optimizer step its bytes per parameter this GPU updates; their time
  is bytes / HBM bandwidth (:func:`ringlab.calc.roofline.roofline`: a few FLOPs per byte is far below any
  GPU's ridge point). They run between the matmuls, so no efficiency factor hides them;
- pipeline bubble: ``ringlab.calc.pipeline.bubble_fraction`` x the micro-batches' matmul and memory-bound
  time (1F1B; interleaved with v > 1);
- TP and EP collectives: on the critical path, not overlapped (Megatron runs them between the matmuls
  that need them);
- CP: each K/V pass hides behind the attention compute of the same ring step; the excess is exposed;
- PP: messages overlap with other micro-batches' compute, except along the fill and drain, where one
  message per boundary each way is on the critical path: 2 (p - 1) / v messages, on every stage's step (the
  first and last stages send one way only, but wait for the other hops all the same);
- DP: gradient reduction and parameter gathers hide behind one micro-batch's compute (DDP / ZeRO: the last
  backward and the next forward), or every micro-batch's (FSDP, prefetching per unit); the excess is exposed.

:meth:`StepTime.breakdown` sums these as matmul, memory-bound, exposed communication and bubble.

MFU = model FLOPs (6ND + attention, :func:`ringlab.calc.training.flops.step_flops`) / (step time x GPUs x
peak); HFU counts recomputation too (Chowdhery et al. 2022, app. B). ``compute_efficiency`` (default
0.75) is an assumption: the fraction of the datasheet's dense peak large bf16 GEMMs reach (cuBLAS on
H100 SXM sustains roughly 700-750 of 989 TFLOP/s on large shapes); it is not measured here. Checked against
Narayanan et al. 2021, Table 1 (GPT 18B-1T on DGX A100 clusters, ``dgx-a100``): the paper's percent of peak,
which counts the recomputed forward, is ringlab's HFU (tests/calc/training/test_errata_30_step.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

from ringlab.calc.comm import canonical_strategy
from ringlab.calc.hardware import Hardware, get_hardware, peak_flops
from ringlab.calc.models import ModelConfig
from ringlab.calc.pipeline import bubble_fraction
from ringlab.calc.roofline import roofline
from ringlab.calc.training.flops import lm_head_flops, model_layer_flops, step_flops
from ringlab.calc.training.kernels import kernel_bytes, layer_kernels, optimizer_bytes_per_param, output_kernels
from ringlab.calc.training.layout import Batch, ParallelLayout, stage_layers
from ringlab.calc.training.memory import Precision, model_state_memory
from ringlab.calc.training.traffic import TrafficItem
from ringlab.collectives.registry import get_algorithm
from ringlab.topology import Cluster, get_cluster
from ringlab.topology.presets import custom_cluster
from ringlab.topology.timing import group_cluster, rail_cluster, ring_link
from ringlab.validation import check_real

MIN_EFFICIENCY = 0.01  # of dense peak: below 1% a step time is hours and MFU rounds to nothing (a typo, 1e-320)

# Topology preset -> the GPU it is built from (the presets' datasheets, ringlab.topology.presets).
PRESET_HARDWARE = {"dgx-h100": "h100-sxm", "dgx-a100": "a100-sxm-80gb", "hgx-h200": "h200", "dgx-b200": "b200",
                   "gb200-nvl72": "gb200", "gb300-nvl72": "gb300", "mi300x-platform": "mi300x", "pcie-8gpu": "l40s", "aws-p5": "h100-sxm"}

_RING = ("all_reduce", "reduce_scatter", "all_gather")


def group_subcluster(cluster, size: int, stride: int):
    """The part of ``cluster`` one group of ``size`` ranks at ``stride`` runs on (module docstring).

    Returns a :class:`ringlab.topology.Cluster`. Raises ValueError when the group does not tile the
    nodes (a stride or size that splits a node unevenly).
    """
    g = cluster.gpus_per_node
    if stride * size <= g:
        if g % (stride * size):
            raise ValueError(f"a group of {size} ranks at stride {stride} does not tile a {g}-GPU node")
        return group_cluster(cluster, size)
    if stride >= g:
        if stride % g:
            raise ValueError(f"stride {stride} splits {g}-GPU nodes unevenly")
        return rail_cluster(cluster.with_nodes(size))
    if g % stride:
        raise ValueError(f"stride {stride} splits {g}-GPU nodes unevenly")
    per_node = g // stride
    share_gbps = cluster.node_network_bandwidth / g * 8 / 1e9
    return custom_cluster(size // per_node, per_node, cluster.gpu_bandwidth, nics_per_node=per_node,
                          nic_gbps=share_gbps, fabric=cluster.fabric, gpu_latency=cluster.gpu_latency,
                          nic_latency=cluster.nic_latency, pcie_bandwidth=cluster.pcie_bandwidth,
                          name=f"{cluster.name} {per_node}-per-node groups")


def dimension_placement(layout: ParallelLayout, cluster) -> dict[str, str]:
    """Where each parallel dimension's groups run on ``cluster`` (module docstring), in words:
    ``{"tp": "NVLink, 8 GPUs in one node", "dp": "network: 16 nodes, 1 GPU each on its rail", ...}``
    for the dimensions of degree > 1 (``ep`` groups sit at the dp stride)."""
    g = cluster.gpus_per_node
    out = {}
    for dim in ("tp", "cp", "ep", "dp", "pp"):
        n, stride = layout.size(dim), layout.stride(dim)
        if n == 1:
            continue
        if stride * n <= g:
            out[dim] = f"NVLink, {n} GPUs in one node"
        elif stride >= g:
            out[dim] = f"network: {n} nodes, 1 GPU each on its rail"
        else:
            out[dim] = f"network: {n * stride // g} nodes, {g // stride} GPUs each"
    return out


def _p2p_link(cluster, same_node: bool) -> tuple[float, float]:
    """(latency s, bandwidth B/s per direction) of one GPU's point-to-point path."""
    if same_node:
        return cluster.gpu_latency, cluster.gpu_bandwidth
    return cluster.nic_latency, cluster.node_network_bandwidth / cluster.gpus_per_node


@lru_cache(maxsize=1024)
def _group_ring_link(cluster, size: int, stride: int, collective: str):
    """``ring_link`` of one group's part of ``cluster``: a layout search asks for the same few groups ~10^5 times,
    and building the part (a validated Cluster) costs more than the rest of :func:`item_seconds`."""
    return ring_link(group_subcluster(cluster, size, stride), collective)


def item_seconds(item: TrafficItem, layout: ParallelLayout, cluster) -> float:
    """Seconds ``item`` keeps the GPU's links busy on ``cluster`` (all its calls, no overlap)."""
    g = cluster.gpus_per_node
    dim = "dp" if item.dim == "edp" else item.dim
    stride = layout.stride(dim)
    if item.dim == "edp":  # expert-DP ranks: stride tp x ep inside the dp x cp ranks
        stride = layout.tp * layout.ep
    elif item.dim == "dp":  # dense gradients go over the dp x cp ranks (layout.grad_group), at stride tp
        stride = layout.tp
    n = item.group_size
    if item.collective in _RING:
        link = _group_ring_link(cluster, n, stride, item.collective)
        steps = get_algorithm(item.collective, "ring").num_steps(n)
        return item.count * steps * link.alpha + item.bytes_sent / link.bandwidth
    if item.collective == "send_recv":
        latency, bandwidth = _p2p_link(cluster, stride * n <= g)
        return item.count * latency + item.bytes_sent / bandwidth
    # all_to_all: members sharing the node go over NVLink, the rest over the GPU's NIC share
    local = min(n, max(1, g // stride)) if stride < g else 1
    outside = item.bytes_sent * (n - local) // max(1, n - 1)
    inside = item.bytes_sent - outside
    lat_in, bw_in = _p2p_link(cluster, True)
    lat_out, bw_out = _p2p_link(cluster, False)
    latency = lat_out if outside else lat_in
    return item.count * (n - 1) * latency + max(inside / bw_in, outside / bw_out if outside else 0.0)


@dataclass(frozen=True)
class StepTime:
    """Seconds of one optimizer step on the busiest stage, by term (module docstring), and utilisation.

    ``compute``: the matmuls; ``memory_bound``: the memory-bound kernels and the optimizer step, moving
    ``memory_bound_bytes`` at ``hbm_bandwidth`` (B/s) of ``hardware``.
    """

    stage: int
    compute: float
    memory_bound: float
    bubble: float
    tp: float
    ep: float
    cp_exposed: float
    pp_exposed: float
    dp_exposed: float
    model_flops: int
    hardware_flops: int
    world_size: int
    peak_flops: float
    hardware: str
    hbm_bandwidth: float
    memory_bound_bytes: int

    @property
    def exposed_communication(self) -> float:
        """Seconds the GPU waits on communication: TP and EP in full, the exposed parts of CP, PP and DP."""
        return self.tp + self.ep + self.cp_exposed + self.pp_exposed + self.dp_exposed

    def breakdown(self) -> dict[str, float]:
        """The step in four parts (seconds): ``matmul``, ``memory_bound``, ``exposed_communication``, ``bubble``."""
        return {"matmul": self.compute, "memory_bound": self.memory_bound,
                "exposed_communication": self.exposed_communication, "bubble": self.bubble}

    @property
    def step_time(self) -> float:
        return self.compute + self.memory_bound + self.bubble + self.exposed_communication

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.step_time * self.world_size * self.peak_flops)

    @property
    def hfu(self) -> float:
        return self.hardware_flops / (self.step_time * self.world_size * self.peak_flops)

    @property
    def tflops_per_gpu(self) -> float:
        """Model TFLOP/s per GPU (what Llama 3's Table 4 and Megatron's tables print, without recompute)."""
        return self.model_flops / self.step_time / self.world_size / 1e12


def _memory_seconds(nbytes: int, hw: Hardware) -> float:
    """Seconds ``nbytes`` of memory-bound traffic take on ``hw``: the roofline with their FLOPs left out."""
    return roofline(0, nbytes, hw).memory_time_s if nbytes else 0.0


def resolve_cluster(topology, world_size: int):
    """A :class:`ringlab.topology.Cluster` of ``world_size`` GPUs from a preset name or a Cluster: the part of one
    node (with the NICs its GPUs are wired to) or whole nodes, as ``ringlab.topology.timing.group_cluster``
    places a group. Raises ValueError when ``world_size`` does not fill whole nodes."""
    cluster = topology if isinstance(topology, Cluster) else get_cluster(topology)
    g = cluster.gpus_per_node
    if world_size % g and world_size > g:
        raise ValueError(f"{world_size} GPUs do not fill whole {g}-GPU nodes of {cluster.name}")
    return group_cluster(cluster.with_nodes(max(cluster.nodes, -(-world_size // g))), world_size)


def step_time(model: ModelConfig, layout: ParallelLayout, batch: Batch, traffic_by_stage, topology,
              hardware: str | Hardware | None = None, recompute: str = "none", strategy: str = "ddp",
              compute_efficiency: float = 0.75, dtype: str = "bf16", causal: bool = False,
              dropout: bool = False, flash_attention: bool = True, act_dtype: str = "bf16",
              precision: Precision = Precision()) -> StepTime:
    """Estimate one step (module docstring) from the per-stage traffic (``stage_traffic`` of every stage).

    ``topology``: a ``ringlab.topology`` preset name or Cluster; ``hardware``: its GPU (default from
    :data:`PRESET_HARDWARE`); ``dtype``: of the matmuls (peak FLOP/s). ``dropout``, ``flash_attention``,
    ``act_dtype`` and ``precision`` size the memory-bound kernels and the optimizer step
    (:mod:`ringlab.calc.training.kernels`), as ``train_plan`` passes them. Raises ValueError for a topology
    whose GPU is unknown (pass ``hardware``), an efficiency outside [:data:`MIN_EFFICIENCY`, 1], or a layout
    that does not tile the cluster's nodes.
    """
    eff = check_real(compute_efficiency, "compute_efficiency", min=MIN_EFFICIENCY, max=1)
    cluster = resolve_cluster(topology, layout.world_size)
    if hardware is None:
        base = cluster.name.split(" ")[0]
        if base not in PRESET_HARDWARE:
            raise ValueError(f"topology {cluster.name!r}: name its GPU with hardware=")
        hardware = PRESET_HARDWARE[base]
    hw = get_hardware(hardware)
    peak = peak_flops(hw, dtype)
    rate = peak * eff
    t, cp, p, v, m = layout.tp, layout.cp, layout.pp, layout.virtual_stages, batch.num_microbatches
    per_layer = model_layer_flops(model, batch.seq_len, batch.micro_batch, causal)
    head = lm_head_flops(model, batch.seq_len, batch.micro_batch)
    bubble_frac = bubble_fraction(p, m, "interleaved-1f1b" if v > 1 else "1f1b", v) if p > 1 else 0.0
    canonical_strategy(strategy)  # an unknown name raises; how DP overlaps is read from the traffic below
    states = model_state_memory(model, layout, strategy, precision, m)
    best = None
    for stage, indices in enumerate(stage_layers(model, layout)):
        layers = [per_layer[i] for i in indices]
        fwd = sum(x.forward for x in layers) / (t * cp) + (head / t / cp if stage == p - 1 else 0)
        recomputed = sum(x.recompute(recompute) for x in layers) / (t * cp)
        kernels = tuple(k for i in indices for k in layer_kernels(model, model.layers[i], batch.seq_len,
                                                                  batch.micro_batch, layout, dropout,
                                                                  flash_attention, act_dtype))
        mb_bytes = kernel_bytes(kernels, recompute)  # recomputation re-runs layers, not the loss
        if stage == p - 1:
            mb_bytes += kernel_bytes(output_kernels(model, batch.seq_len, batch.micro_batch, layout, act_dtype))
        updated = states[stage].optimizer_states // precision.optimizer_bytes_per_param  # this GPU's parameter shard
        opt_bytes = updated * optimizer_bytes_per_param(precision)
        t_matmul = (3 * fwd + recomputed) / rate
        t_kernels = _memory_seconds(mb_bytes, hw)
        t_mb = t_matmul + t_kernels
        t_attention = m * sum(3 * x.attention for x in layers) / (t * cp) / rate
        times = {"tp": 0.0, "ep": 0.0, "cp": 0.0, "pp": 0.0, "dp": 0.0}
        for item in traffic_by_stage[stage]:
            seconds = item_seconds(item, layout, cluster)
            if item.dim == "pp":
                # fill and drain cross every boundary once each way, whichever stage is the busiest: the first and
                # last stages send one way only, but their step waits for the other hops all the same
                times["pp"] = 2 * (p - 1) / v * seconds / item.count
                continue
            times["dp" if item.dim == "edp" else item.dim] += seconds
        # DP collectives that run in every micro-batch's backward (zero2, zero3 / FSDP) hide behind all m of
        # them; one reduce per step (ddp, zero1, no_sync) only behind the last backward
        per_micro = any(i.dim in ("dp", "edp") and i.phase == "backward" and i.count >= m
                        for i in traffic_by_stage[stage])
        window = t_mb * (m if per_micro else 1)
        memory_bound = m * t_kernels + _memory_seconds(opt_bytes, hw)
        result = StepTime(stage, m * t_matmul, memory_bound, bubble_frac * m * t_mb, times["tp"], times["ep"],
                          max(0.0, times["cp"] - t_attention), times["pp"], max(0.0, times["dp"] - window),
                          0, 0, layout.world_size, peak, hw.name, hw.hbm_bandwidth, m * mb_bytes + opt_bytes)
        if best is None or result.step_time > best.step_time:
            best = result
    flops = step_flops(model, batch.seq_len, batch.global_batch, recompute, causal)
    return dataclasses.replace(best, model_flops=flops.model_flops, hardware_flops=flops.hardware_flops)
