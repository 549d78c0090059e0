"""Gradient-synchronisation traffic and model-state memory of DDP, ZeRO-1/2/3 and FSDP per GPU.

API
---
``STRATEGIES``               accepted strategy names (``zero3`` is an alias of ``fsdp_full_shard``)
``canonical_strategy(name)``  the STRATEGIES name of a spelling or alias (``"FSDP"`` -> ``"fsdp_full_shard"``)
``grad_comm_bytes(strategy, n_params, world_size, dtype="bf16", gpus_per_node=None,
                  grad_accum_steps=1, reshard_after_forward=None, no_sync=True,
                  optimizer_bytes_per_param=12)``  -> ``GradComm``
``GradComm.bytes_sent_per_rank`` int; ``.breakdown`` tuple of ``CollectiveCall``; ``.memory``
``ModelStates``; ``.time(link, inter_node_link=None)`` seconds; ``.time_on_cluster(cluster)``
seconds on a ``ringlab.topology`` cluster (rings per group, on NVLink and the rails); ``.summary()`` text
``call_counts``, ``shard_group_size``, ``model_states``  the three parts of ``grad_comm_bytes``, each testable
                                  alone: calls per step, ranks that shard the states, bytes per GPU
``ring_bytes_per_rank(collective, numel, world_size, itemsize)``  busiest rank's bytes for one ring collective
``bus_bandwidth(collective, message_bytes, seconds, world_size)``  nccl-tests' busbw for all six
                                  collectives: ``ringlab.collectives.cost.busbw``, re-exported (one definition)

Each strategy is one row of a table (``_STRATEGY_TABLE``): its collectives per step, whom it shards
over, and its flags; :func:`grad_comm_bytes` works out the counts and sums the rows, with no branch
per strategy. Ring bytes and steps come from :mod:`ringlab.collectives` (one home per formula).

Conventions
-----------
- M = ``n_params x bytes(dtype)``, the bytes of one full copy of the parameters (= of the gradients).
- Ring collectives over N ranks (Patarasuk & Yuan 2009; nccl-tests' PERFORMANCE.md): each rank
  sends ``2(N-1)/N x M`` for all_reduce and ``(N-1)/N x M`` for reduce_scatter and all_gather.
  Counts are exact integers. When N does not divide ``n_params`` the message is chunked like
  ``numpy.array_split`` (first ``n % N`` chunks one element longer) and the **busiest rank** is
  reported: reduce_scatter/all_gather send all but one smallest chunk; all_reduce skips two
  cyclically adjacent chunks (ringlab's rotation), the smallest such pair.
- Per optimizer step with ``grad_accum_steps = K`` micro-batches:
  ``ddp``              all_reduce of gradients in backward; once per step with ``no_sync`` (the
                       first K-1 backward passes skip it), K times without.
  ``zero1``            reduce_scatter of gradients + all_gather of updated parameters after the step
                       (ZeRO paper sec. 7.1: same 2(N-1)/N M as DDP); gradients accumulate unsharded.
  ``zero2``            same two collectives, but gradients are partitioned, so the reduce_scatter
                       runs in every micro-batch's backward (DeepSpeed stage 2 reduces each micro-step).
  ``fsdp_shard_grad_op`` all_gather in forward (parameters stay unsharded until after backward) +
                       reduce_scatter in backward: 2(N-1)/N M per micro-batch.
  ``fsdp_full_shard``  all_gather in forward, all_gather again in backward (parameters were
  (= ``zero3``)        resharded after forward), reduce_scatter of gradients: 3(N-1)/N M = 1.5x DDP
                       (ZeRO paper sec. 7.2.2). Parameters are gathered in **every** micro-batch.
  ``hybrid_shard``     FULL_SHARD inside each node of ``gpus_per_node`` = G ranks, replicas across
                       the R = N/G nodes: intra-node AG, AG, RS of M, then an inter-node all_reduce
                       of the M/G gradient shard.
  For the FSDP strategies ``no_sync`` skips the gradient reduce_scatter in the first K-1
  micro-batches, at the memory cost of unsharded gradients. Whether the next micro-batch must
  all-gather its parameters again depends on the FSDP version (``fsdp_api``):

  * ``fsdp1`` (``FullyShardedDataParallel``, ``model.no_sync()``): the post-backward hook frees the
    unsharded parameters only when gradients sync or the strategy reshards after forward
    (torch ``_runtime_utils._should_free_in_backward``). So SHARD_GRAD_OP under ``no_sync`` keeps
    them: one all_gather and one reduce_scatter per step. FULL_SHARD and HYBRID_SHARD reshard after
    every forward and gather in every micro-batch's forward and backward.
  * ``fsdp2`` (``fully_shard``, ``set_requires_gradient_sync(False)``): parameters are resharded after
    every backward unless ``reshard_after_backward=False`` (``set_reshard_after_backward``), so each
    micro-batch's forward gathers again by default.

  Per step: forward all_gathers = 1 + (micro-batches before the last whose backward resharded),
  backward all_gathers = K when resharding after forward, reduce_scatters = 1 with no_sync, else K.
- Memory (ZeRO paper sec. 3 and 5, mixed-precision Adam): 2 B/param parameters, 2 B/param
  gradients (``dtype``), 12 B/param optimizer states (fp32 master weights, momentum, variance;
  ``optimizer_bytes_per_param``). A shard is ``ceil(n_params / N)`` elements (FSDP pads flat
  parameters to a multiple of N). FULL_SHARD's one unsharded unit in flight is not counted.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from ringlab.validation import check_bool
from ringlab.calc.units import canonical_dtype, dtype_bytes, format_bytes
from ringlab.validation import positive_int
from ringlab.collectives.cost import busbw as bus_bandwidth  # noqa: F401  (re-exported: calc's name for it)
from ringlab.collectives.registry import get_algorithm
from ringlab.collectives.ring import ring_busiest_bytes
from ringlab.topology.timing import group_cluster, rail_cluster, ring_link

STRATEGIES = ("ddp", "zero1", "zero2", "fsdp_shard_grad_op", "fsdp_full_shard", "zero3", "hybrid_shard")
_ALIASES = {"zero3": "fsdp_full_shard", "full_shard": "fsdp_full_shard", "shard_grad_op": "fsdp_shard_grad_op",
            "fsdp": "fsdp_full_shard"}


@dataclass(frozen=True)
class _Strategy:
    """One data-parallel strategy as data (module docstring, "Per optimizer step").

    ``calls``: the collectives of one optimizer step in the order they run, each
    ``(collective, phase, how_many, group)``. ``how_many`` names a count :func:`grad_comm_bytes`
    works out: ``once``; ``micro_batches`` (K); ``grad_syncs`` (1 with no_sync, else K);
    ``forward_gathers`` / ``backward_gathers`` (FSDP's parameter all_gathers, module docstring).
    ``group``: ``world`` (N ranks, full message), ``intra-node`` (the G ranks of a node, full
    message), ``inter-node`` (the N/G replicas, a message of one ``ceil(n_params / G)`` shard).
    ``shards_over``: who splits the sharded states: ``nobody`` (DDP), ``world`` or ``node``.
    ``fsdp``: FSDP semantics (no_sync keeps unsharded gradients; ``reshard_after_backward``).
    ``grads_sharded``: gradients are kept as shards. ``reshards_params``: parameters are resharded
    after forward by default, so ``reshard_after_forward`` applies (FULL_SHARD, HYBRID_SHARD).
    """

    calls: tuple[tuple[str, str, str, str], ...]
    shards_over: str
    fsdp: bool = False
    grads_sharded: bool = False
    reshards_params: bool = False


_FSDP_CALLS = (("all_gather", "forward", "forward_gathers", "world"),
               ("all_gather", "backward", "backward_gathers", "world"),
               ("reduce_scatter", "backward", "grad_syncs", "world"))
_STRATEGY_TABLE = {
    "ddp": _Strategy((("all_reduce", "backward", "grad_syncs", "world"),), "nobody"),
    "zero1": _Strategy((("reduce_scatter", "backward", "once", "world"), ("all_gather", "step", "once", "world")),
                       "world"),
    "zero2": _Strategy((("reduce_scatter", "backward", "micro_batches", "world"),
                        ("all_gather", "step", "once", "world")), "world", grads_sharded=True),
    "fsdp_shard_grad_op": _Strategy(_FSDP_CALLS, "world", fsdp=True, grads_sharded=True),
    "fsdp_full_shard": _Strategy(_FSDP_CALLS, "world", fsdp=True, grads_sharded=True, reshards_params=True),
    "hybrid_shard": _Strategy(tuple((c, phase, count, "intra-node") for c, phase, count, _ in _FSDP_CALLS)
                              + (("all_reduce", "backward", "grad_syncs", "inter-node"),),
                              "node", fsdp=True, grads_sharded=True, reshards_params=True),
}


def ring_bytes_per_rank(collective: str, numel: int, world_size: int, itemsize: int) -> int:
    """Bytes sent by the busiest rank in one ring ``collective`` of ``numel`` elements.

    ``(N-1) x numel x itemsize / N`` for reduce_scatter / all_gather and twice that for all_reduce
    when N divides numel; otherwise the ``numpy.array_split`` chunking described in the module
    docstring. 0 when ``world_size == 1``. Raises ValueError for an unknown collective.
    Calc's argument order for :func:`ringlab.collectives.ring.ring_busiest_bytes`, where the formula lives.
    """
    return ring_busiest_bytes(collective, world_size, numel, itemsize)


@dataclass(frozen=True)
class CollectiveCall:
    """One kind of collective in a step: ``count`` calls of ``collective`` in ``phase`` ("forward",
    "backward" or "step") over a group of ``group_size`` ranks (``group``: "world", "intra-node",
    "inter-node"), each on ``message_bytes``; ``bytes_sent`` per rank summed over the calls."""

    collective: str
    phase: str
    group: str
    group_size: int
    count: int
    message_bytes: int
    bytes_sent: int

    @property
    def ring_steps(self) -> int:
        """Sequential ring steps over all calls: (N-1) per RS/AG, 2(N-1) per all_reduce (the collectives' registry)."""
        return self.count * get_algorithm(self.collective, "ring").num_steps(self.group_size)


@dataclass(frozen=True)
class ModelStates:
    """Per-GPU bytes (ints) of parameters, gradients (incl. an fp32 accumulation buffer when asked) and
    optimizer states (master weights + Adam moments), of the whole model or of pipeline stage ``stage``;
    ``n_params``: the parameters the GPU's share holds unsharded (the model's, or the stage's per tp rank)."""

    params: int
    grads: int
    optimizer_states: int
    n_params: int
    stage: int = 0

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer_states


@dataclass(frozen=True)
class GradComm:
    """Result of ``grad_comm_bytes``: traffic per rank per optimizer step and per-GPU memory."""

    strategy: str
    n_params: int
    world_size: int
    dtype: str
    grad_accum_steps: int
    message_bytes: int
    breakdown: tuple[CollectiveCall, ...]
    memory: ModelStates
    notes: tuple[str, ...] = ()

    @property
    def bytes_sent_per_rank(self) -> int:
        """Bytes each (busiest) rank sends per optimizer step, all collectives together."""
        return sum(c.bytes_sent for c in self.breakdown)

    def time(self, link, inter_node_link=None) -> float:
        """Seconds of communication per step under the alpha-beta model, ring algorithms.

        ``link``: any object with ``.alpha`` (s per message step) and ``.bandwidth`` (bytes/s per
        direction), e.g. ``ringlab.collectives``' ``Link``; ``inter_node_link`` (default ``link``) is
        used for hybrid_shard's inter-node all_reduce. Each call costs
        ``ring_steps x alpha + bytes_sent / bandwidth``; no overlap with compute is assumed.
        """
        return self._time(lambda call: inter_node_link if (call.group == "inter-node" and inter_node_link is not None)
                          else link)

    def time_on_cluster(self, cluster, protocol: str | None = None) -> float:
        """Seconds of communication per step on a :class:`ringlab.topology.Cluster` of ``world_size`` GPUs.

        Each collective runs as NCCL-style rings over the GPUs of its group (:func:`ringlab.topology.timing.ring_link`):
        "world" over the whole cluster (channels leave every node on all its rails), "intra-node" inside
        one NVLink domain, "inter-node" (hybrid_shard's replicas) on one rail, every GPU's rail at once.
        Same arithmetic as :meth:`time`; no overlap with compute. Raises ValueError when the cluster's
        shape does not match ``world_size`` (or hybrid_shard's ``gpus_per_node``).
        """
        if cluster.world_size != self.world_size:
            raise ValueError(f"world_size {self.world_size} differs from the cluster's {cluster.nodes} x "
                             f"{cluster.gpus_per_node} = {cluster.world_size} GPUs")
        links = {}

        def link_for(call: CollectiveCall):
            key = (call.group, call.collective)
            if key not in links:
                if call.group == "intra-node" and call.group_size != cluster.gpus_per_node:
                    raise ValueError(f"hybrid_shard shards over {call.group_size} GPUs but a node of {cluster.name} "
                                     f"has {cluster.gpus_per_node}")
                sub = {"world": cluster, "intra-node": group_cluster(cluster, call.group_size),
                       "inter-node": rail_cluster(cluster)}[call.group]
                links[key] = ring_link(sub, call.collective, protocol)
            return links[key]

        return self._time(link_for)

    def _time(self, link_for) -> float:
        total = 0.0
        for call in self.breakdown:
            lk = link_for(call)
            try:
                alpha, bandwidth = float(lk.alpha), float(lk.bandwidth)
            except AttributeError:
                raise TypeError("link must have .alpha (seconds) and .bandwidth (bytes/s per direction)") from None
            if bandwidth <= 0 or alpha < 0:
                raise ValueError(f"link needs bandwidth > 0 and alpha >= 0, got {bandwidth}, {alpha}")
            total += call.ring_steps * alpha + call.bytes_sent / bandwidth
        return total

    def summary(self) -> str:
        """Multi-line text: message size, each collective, total per rank, memory per GPU."""
        lines = [
            f"{self.strategy}: {self.n_params:,} params in {self.dtype}, world_size={self.world_size}, "
            f"grad_accum_steps={self.grad_accum_steps}",
            f"  message M (one full copy): {format_bytes(self.message_bytes)}",
        ]
        for c in self.breakdown:
            lines.append(f"  {c.count} x {c.collective:<14} {c.phase:<8} {c.group} (N={c.group_size}): "
                         f"{format_bytes(c.bytes_sent)}")
        lines.append(f"  sent per rank per step: {format_bytes(self.bytes_sent_per_rank)} "
                     f"({self.bytes_sent_per_rank / self.message_bytes:.4g} x M)")
        m = self.memory
        lines.append(f"  memory per GPU: params {format_bytes(m.params)}, grads {format_bytes(m.grads)}, "
                     f"optimizer {format_bytes(m.optimizer_states)}, total {format_bytes(m.total)}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    __str__ = summary


def canonical_strategy(strategy: str) -> str:
    """The :data:`STRATEGIES` name of ``strategy``: case and ``-``/``_`` folded, aliases resolved
    (``zero3``, ``full_shard``, ``fsdp`` -> ``fsdp_full_shard``; ``shard_grad_op`` -> ``fsdp_shard_grad_op``).
    Raises TypeError for a non-string, ValueError (with close matches) for an unknown name."""
    if not isinstance(strategy, str):
        raise TypeError(f"strategy must be a string, got {type(strategy).__name__}")
    key = strategy.strip().lower().replace("-", "_")
    key = _ALIASES.get(key, key)
    if key not in STRATEGIES:
        close = difflib.get_close_matches(key, STRATEGIES, n=3, cutoff=0.5)
        hint = f" Close matches: {', '.join(close)}." if close else ""
        raise ValueError(f"unknown strategy {strategy!r}.{hint} Accepted: {', '.join(STRATEGIES)}")
    return key




def grad_comm_bytes(strategy: str, n_params: int, world_size: int, dtype: str = "bf16",
                    gpus_per_node: int | None = None, grad_accum_steps: int = 1,
                    reshard_after_forward: bool | None = None, no_sync: bool = True,
                    optimizer_bytes_per_param: int = 12, fsdp_api: str = "fsdp1",
                    reshard_after_backward: bool | None = None) -> GradComm:
    """Per-rank communication per optimizer step and per-GPU model-state memory of a data-parallel
    ``strategy`` (see the module docstring for each strategy's collectives and the sources).

    ``n_params``: parameter count (int, or a float holding a whole number such as 7e9).
    ``world_size``: data-parallel ranks N. ``dtype``: of parameters and gradients on the wire.
    ``gpus_per_node``: required for hybrid_shard (must divide world_size). ``grad_accum_steps``: K
    micro-batches per step. ``reshard_after_forward``: FSDP's flag for the sharded-parameter
    strategies (default True for fsdp_full_shard / hybrid_shard; False turns them into
    SHARD_GRAD_OP); not accepted for ddp / zero1 / zero2 / fsdp_shard_grad_op.
    ``no_sync``: with K > 1, skip the gradient collective in the first K-1 micro-batches (ddp, fsdp_*).
    ``fsdp_api``: ``"fsdp1"`` (``no_sync()``) or ``"fsdp2"`` (``set_requires_gradient_sync``), which
    differ in when parameters are gathered again (module docstring); ``reshard_after_backward``:
    FSDP2's flag (default True), not accepted with fsdp1.

    7e9 params, bf16, 64 GPUs: ddp 27,562,500,000 B; fsdp_full_shard 41,343,750,000 B (1.5x).
    Raises ValueError for unknown strategy or dtype, non-positive sizes, a bad gpus_per_node,
    or a reshard_after_forward the strategy does not have.
    """
    strat = canonical_strategy(strategy)
    spec = _STRATEGY_TABLE[strat]
    n_params = positive_int(n_params, "n_params")
    n = positive_int(world_size, "world_size")
    k = positive_int(grad_accum_steps, "grad_accum_steps")
    no_sync = check_bool(no_sync, "no_sync")
    if optimizer_bytes_per_param < 0:
        raise ValueError(f"optimizer_bytes_per_param must be >= 0, got {optimizer_bytes_per_param}")
    dt, itemsize = _wire_dtype(dtype)
    reshard = _reshards_after_forward(strat, spec, reshard_after_forward)
    counts = call_counts(strat, k, no_sync, reshard, fsdp_api, reshard_after_backward)
    shard_group = shard_group_size(strat, n, gpus_per_node)
    groups = {"world": (n, n_params), "intra-node": (shard_group, n_params),  # (ranks, elements per call)
              "inter-node": (n // shard_group, math.ceil(n_params / shard_group))}
    calls: list[CollectiveCall] = []
    for collective, phase, how_many, group in spec.calls:
        count, (size, numel) = counts[how_many], groups[group]
        if count and size > 1:
            per_call = ring_bytes_per_rank(collective, numel, size, itemsize)
            calls.append(CollectiveCall(collective, phase, group, size, count, numel * itemsize, count * per_call))
    memory, notes = model_states(strat, n_params, shard_group, itemsize, optimizer_bytes_per_param, k, no_sync, reshard)
    return GradComm(strat, n_params, n, dt, k, n_params * itemsize, tuple(calls), memory, notes)


def _wire_dtype(dtype: str) -> tuple[str, int]:
    """(canonical name, whole bytes per element) of the dtype gradients travel in; sub-byte dtypes are refused."""
    dt = canonical_dtype(dtype)
    itemsize = dtype_bytes(dt)
    if itemsize != int(itemsize):
        raise ValueError(f"dtype {dtype!r} is sub-byte; gradients are communicated in fp32, fp16, bf16 or fp8")
    return dt, int(itemsize)


def _reshards_after_forward(strategy: str, spec: _Strategy, reshard_after_forward: bool | None) -> bool:
    """FSDP's ``reshard_after_forward`` for ``strategy`` (default True); refused where the strategy has no such flag."""
    if reshard_after_forward is None:
        return True
    reshard_after_forward = check_bool(reshard_after_forward, "reshard_after_forward")
    if not spec.reshards_params:
        raise ValueError(f"reshard_after_forward applies to fsdp_full_shard and hybrid_shard, not {strategy}")
    return reshard_after_forward


def call_counts(strategy: str, grad_accum_steps: int, no_sync: bool, reshard_after_forward: bool = True,
                fsdp_api: str = "fsdp1", reshard_after_backward: bool | None = None) -> dict[str, int]:
    """Calls per optimizer step of each ``how_many`` of the strategy table (module docstring, "Per optimizer
    step"): ``once``, ``micro_batches`` (K), ``grad_syncs``, ``forward_gathers`` and ``backward_gathers``.

    ``strategy``: a canonical name (:func:`canonical_strategy`). Raises ValueError for an unknown ``fsdp_api``
    or a ``reshard_after_backward`` without fsdp2 and an FSDP strategy.
    """
    spec, k = _STRATEGY_TABLE[strategy], grad_accum_steps
    if fsdp_api not in ("fsdp1", "fsdp2"):
        raise ValueError(f"fsdp_api must be 'fsdp1' or 'fsdp2', got {fsdp_api!r}")
    if reshard_after_backward is not None:
        reshard_after_backward = check_bool(reshard_after_backward, "reshard_after_backward")
        if fsdp_api != "fsdp2" or not spec.fsdp:
            raise ValueError("reshard_after_backward is FSDP2's flag: it needs fsdp_api='fsdp2' and an fsdp_* or "
                             f"hybrid_shard strategy (got fsdp_api={fsdp_api!r}, strategy {strategy})")
    gathers_after_forward = spec.reshards_params and reshard_after_forward
    if fsdp_api == "fsdp1":  # _should_free_in_backward: sync_gradients or a reshard-after-forward strategy
        freed_before_last = (k - 1) if (not no_sync or gathers_after_forward) else 0
    else:
        freed_before_last = (k - 1) if reshard_after_backward in (None, True) else 0
    return {"once": 1, "micro_batches": k, "grad_syncs": 1 if no_sync else k,
            "forward_gathers": 1 + freed_before_last, "backward_gathers": k if gathers_after_forward else 0}


def shard_group_size(strategy: str, world_size: int, gpus_per_node: int | None = None) -> int:
    """Ranks that split the sharded states of ``strategy`` (canonical name): 1 (DDP), ``world_size``, or
    ``gpus_per_node`` (hybrid_shard, which requires it and needs it to divide ``world_size``; elsewhere it
    is only checked). Raises ValueError otherwise."""
    over = _STRATEGY_TABLE[strategy].shards_over
    if over == "node":
        if gpus_per_node is None:
            raise ValueError(f"{strategy} needs gpus_per_node (ranks per node that shard the model)")
        g = positive_int(gpus_per_node, "gpus_per_node")
        if world_size % g:
            raise ValueError(f"gpus_per_node={g} must divide world_size={world_size}")
        return g
    if gpus_per_node is not None:
        positive_int(gpus_per_node, "gpus_per_node")
    return 1 if over == "nobody" else world_size


def model_states(strategy: str, n_params: int, shard_group: int, itemsize: int, optimizer_bytes_per_param: int,
                 grad_accum_steps: int, no_sync: bool, reshard_after_forward: bool = True
                 ) -> tuple[ModelStates, tuple[str, ...]]:
    """Per-GPU bytes of parameters, gradients and optimizer states of ``strategy`` (canonical name) sharded
    over ``shard_group`` ranks (module docstring, "Memory"), and the notes on what is not counted."""
    spec = _STRATEGY_TABLE[strategy]
    shard = math.ceil(n_params / shard_group)
    full_grads = not spec.grads_sharded or (spec.fsdp and grad_accum_steps > 1 and no_sync)
    params_unsharded = not (spec.reshards_params and reshard_after_forward)
    notes = []
    if spec.fsdp and params_unsharded:
        notes.append("parameters stay unsharded from forward to the end of backward: params memory is the peak")
    if spec.reshards_params and reshard_after_forward:
        notes.append("plus one unsharded FSDP unit in flight (not counted)")
    if full_grads and spec.fsdp:
        notes.append("no_sync keeps unsharded gradients between micro-batches")
    memory = ModelStates(
        params=(n_params if params_unsharded else shard) * itemsize,
        grads=(n_params if full_grads else shard) * itemsize,
        optimizer_states=shard * optimizer_bytes_per_param,
        n_params=n_params,
    )
    return memory, tuple(notes)
