"""Public simulator entry points: ``ring_allreduce``, ``reduce_scatter``, ``all_gather``.

Inputs are numpy arrays or torch tensors; rank r's data is row r of a ``(world_size, *shape)``
array, or the r-th array of a list. Tensors (CPU or CUDA) run the same compiled plan on their
device and give tensors back; torch is imported only when a tensor is passed. Results are
:class:`CollectiveResult` objects whose ``traffic`` holds the bytes each rank sent and received
(always numpy int64), counted by the executor while it moved the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ringlab.collectives import (
    Schedule,
    chunk_bounds,
    chunk_sizes,
    ring_all_gather_schedule,
    ring_all_reduce_schedule,
    ring_reduce_scatter_schedule,
)

from .executor import Counts, Events, Plan, compile_schedule, execute
from .memory import check_fits, run_bytes
from .ops import BFLOAT16, UFUNCS, check_dtype, check_op
from .plan import cached_plans

# torch dtypes whose add/multiply/maximum/minimum and index_put run on CPU (torch 2.x has no
# add or index_put for uint16/32/64), named as torch names them.
TORCH_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64", "bfloat16")


@dataclass(frozen=True)
class Traffic:
    """Bytes moved by each rank, counted from the chunks the executor sent.

    Attributes:
        bytes_sent: int64 ``(world_size,)``, total bytes each rank sent.
        bytes_received: int64 ``(world_size,)``.
        per_step_sent: int64 ``(steps, world_size)``, bytes each rank sent at each step; None when that
            table would exceed ``ringlab.sim.executor.TABLE_CELLS`` cells (large clusters).
        per_step_received: int64 ``(steps, world_size)`` or None, likewise.
        steps: number of communication steps of the schedule.
        step_total: int64 ``(steps,)``, bytes all ranks sent at each step.
        step_max_sent: int64 ``(steps,)``, bytes the busiest sender sent at each step (the alpha-beta
            time of a step is its latency plus this over the link bandwidth).
    """

    bytes_sent: np.ndarray
    bytes_received: np.ndarray
    per_step_sent: np.ndarray | None
    per_step_received: np.ndarray | None
    steps: int
    step_total: np.ndarray | None = None
    step_max_sent: np.ndarray | None = None

    @property
    def total_bytes(self) -> int:
        """Bytes sent by all ranks together."""
        return int(self.bytes_sent.sum())


@dataclass(frozen=True)
class CollectiveResult:
    """What a simulated collective returns.

    Attributes:
        outputs: every rank's result, a numpy array or a torch tensor like the input.
            ``(world_size, *shape)`` for all_reduce and all_gather (the gathered message is flat,
            ``(world_size, numel)``); for reduce_scatter an array ``(world_size, numel // world_size)``
            when the chunks are equal, else a tuple of 1-D arrays.
        traffic: the :class:`Traffic` counters.
        schedule: the :class:`~ringlab.collectives.Schedule` that ran.
        events: per-transfer :class:`~ringlab.sim.executor.Events` when ``trace=True``, else None.
    """

    outputs: object
    traffic: Traffic
    schedule: Schedule
    events: Events | None = field(default=None, repr=False)


def is_tensor(x) -> bool:
    """True for a torch.Tensor, decided without importing torch."""
    return type(x).__module__.startswith("torch")


def as_rank_array(inputs, name: str = "inputs"):
    """Return ``inputs`` as one ``(world_size, *shape)`` numpy array or torch tensor after validating it.

    Accepts an ndarray or tensor with a leading rank axis, or a list/tuple of equal-shape,
    equal-dtype arrays (or tensors on one device). Raises ValueError (empty, ragged, no rank
    axis, mixed devices) or TypeError (unsupported or mixed dtypes, mixed numpy and torch).
    """
    if is_tensor(inputs) or (isinstance(inputs, (list, tuple)) and any(map(is_tensor, inputs))):
        return _as_rank_tensor(inputs, name)
    if isinstance(inputs, (list, tuple)):
        if not inputs:
            raise ValueError(f"{name} is empty: pass one array per rank (world_size >= 1)")
        arrays = [np.asarray(a) for a in inputs]
        shapes = {a.shape for a in arrays}
        dtypes = {a.dtype for a in arrays}
        if len(dtypes) > 1:
            raise TypeError(f"{name}: ranks hold different dtypes {sorted(map(str, dtypes))}; all must match")
        if len(shapes) > 1:
            bad = next(r for r, a in enumerate(arrays) if a.shape != arrays[0].shape)
            raise ValueError(f"{name}: rank {bad} has shape {arrays[bad].shape} but rank 0 has {arrays[0].shape}; "
                             "all ranks must hold the same shape")
        check_dtype(arrays[0].dtype)
        return np.stack(arrays)
    if not isinstance(inputs, np.ndarray):
        raise TypeError(f"{name} must be a numpy array of shape (world_size, ...) or a list of arrays, "
                        f"got {type(inputs).__name__}")
    if inputs.ndim < 1 or inputs.shape[0] < 1:
        raise ValueError(f"{name} must have a leading world_size axis >= 1, got shape {inputs.shape}")
    check_dtype(inputs.dtype)
    return inputs


def _as_rank_tensor(inputs, name: str, same_shape: bool = True):
    """Validate tensor input; a list is stacked (``same_shape``) or returned as flat tensors."""
    import torch

    if isinstance(inputs, (list, tuple)):
        if not all(map(is_tensor, inputs)):
            raise TypeError(f"{name}: mix of torch tensors and other arrays; pass all ranks as one kind")
        for what in ("dtype", "device", "shape")[:3 if same_shape else 2]:
            bad = next((r for r, t in enumerate(inputs) if getattr(t, what) != getattr(inputs[0], what)), None)
            if bad is not None:
                raise (TypeError if what == "dtype" else ValueError)(
                    f"{name}: rank {bad} has {what} {getattr(inputs[bad], what)} but rank 0 has "
                    f"{getattr(inputs[0], what)}; all ranks must hold the same {what}")
        _torch_numpy_dtype(inputs[0].dtype)
        if not same_shape:
            return [t.detach().reshape(-1) for t in inputs]
        return torch.stack([t.detach() for t in inputs])
    if inputs.ndim < 1 or inputs.shape[0] < 1:
        raise ValueError(f"{name} must have a leading world_size axis >= 1, got shape {tuple(inputs.shape)}")
    _torch_numpy_dtype(inputs.dtype)
    return inputs.detach()


def _torch_numpy_dtype(dtype) -> np.dtype:
    """The numpy dtype matching a supported torch dtype (for op checks); TypeError for others."""
    name = str(dtype).removeprefix("torch.")
    if name not in TORCH_DTYPES:
        names = ", ".join(f"torch.{name}" for name in TORCH_DTYPES)
        raise TypeError(f"dtype {dtype} is not supported for tensors; use one of: {names}")
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def dtype_of(x) -> np.dtype:
    """The numpy dtype of a rank array or tensor (bfloat16 as ml_dtypes')."""
    return _torch_numpy_dtype(x.dtype) if is_tensor(x) else x.dtype


def numel_of(x) -> int:
    """Elements per rank of a ``(world_size, *shape)`` array or tensor."""
    return math.prod(x.shape[1:])


def _copy(x):
    return x.clone() if is_tensor(x) else x.copy()


def own_chunks(flat):
    """Rank r's chunk r of a ``(world_size, numel)`` array or tensor (reduce-scatter's result).

    ``(world_size, numel // world_size)`` when the chunks are equal, else a tuple of 1-D copies
    (``numpy.array_split`` sizes).
    """
    n, numel = flat.shape
    if numel % n == 0:
        return flat.reshape(n, n, numel // n)[list(range(n)), list(range(n))]
    bounds = chunk_bounds(numel, n)
    return tuple(_copy(flat[r, bounds[r]:bounds[r + 1]]) for r in range(n))


@cached_plans
def _plan(builder, world_size: int, numel: int) -> Plan:
    return compile_schedule(builder(world_size), numel)


def traffic_of(counts: Counts) -> Traffic:
    """The public :class:`Traffic` view of the executor's :class:`~ringlab.sim.executor.Counts`."""
    return Traffic(counts.bytes_sent, counts.bytes_received, counts.per_step_sent, counts.per_step_received,
                   int(counts.step_total.shape[0]), counts.step_total, counts.step_max_sent)


def run_schedule(schedule: Schedule, inputs, op: str = "sum", trace: bool = False) -> CollectiveResult:
    """Run any schedule whose ranks start with the full message (all_reduce, reduce_scatter shapes).

    ``inputs`` as in :func:`as_rank_array`. Returns the full ``(world_size, *shape)`` working
    buffer as ``outputs``; chunks outside ``schedule.outputs`` keep intermediate values.
    """
    x = as_rank_array(inputs)
    _check_world(schedule.world_size, x)
    guard_memory(schedule, numel_of(x), dtype_of(x))
    return _run(compile_schedule(schedule, numel_of(x)), x, op, trace)


def _check_world(world_size: int, x) -> None:
    if x.shape[0] != world_size:
        raise ValueError(f"inputs hold {x.shape[0]} ranks but the schedule is for world_size={world_size}")


def guard_memory(schedule: Schedule, numel: int, dtype) -> None:
    """Refuse (:class:`~ringlab.sim.memory.InsufficientMemory`) a run that would not fit in available memory."""
    check_fits(f"{schedule.algorithm} {schedule.collective} of {schedule.world_size} ranks x {numel} elements",
               run_bytes(schedule, numel, np.dtype(dtype).itemsize))


def divide_by_world_size(out, n: int) -> None:
    """In place, ``out /= n`` with n held in the data's dtype, the same way on numpy and torch (avg = sum / N)."""
    if is_tensor(out):
        import torch

        out.div_(torch.tensor(n, dtype=out.dtype, device=out.device))
    else:
        np.divide(out, np.asarray(n, dtype=out.dtype), out=out)


def _run(plan: Plan, x, op: str, trace: bool) -> CollectiveResult:
    check_op(op, dtype_of(x))
    n = x.shape[0]
    flat = x.reshape(n, numel_of(x))  # torch refuses -1 when numel is 0
    if is_tensor(flat):
        import torch

        out = torch.empty_like(flat, memory_format=torch.contiguous_format)
    else:
        out = np.empty_like(flat)
    counts, events = execute(plan, flat, out, UFUNCS[op], trace)
    if op == "avg":
        divide_by_world_size(out, n)
    return CollectiveResult(out.reshape(x.shape), traffic_of(counts), plan.schedule, events)


def ring_allreduce(inputs, op: str = "sum", trace: bool = False) -> CollectiveResult:
    """Ring all-reduce of one array per rank, simulated in-process.

    Args:
        inputs: ``(world_size, *shape)`` ndarray, or a list of ``world_size`` arrays of equal
            shape and dtype. Dtypes: int8/16/32/64, uint8/16/32/64, float16/32/64, bfloat16 (ml_dtypes).
            Or a ``torch.Tensor`` ``(world_size, *shape)`` (or a list of tensors) on CPU or CUDA with
            dtype int8/16/32/64, uint8, float16/32/64 or bfloat16: the same plan runs on the
            tensor's device and ``outputs`` is a tensor there.
        op: ``"sum" | "prod" | "max" | "min" | "avg"``; integers wrap on overflow (see :mod:`ringlab.sim.ops`).
        trace: keep every transfer in ``result.events`` (slower; for pictures).

    Returns:
        :class:`CollectiveResult`; ``outputs`` has the input's shape and dtype and every row is the
        reduction, bit-identical across ranks. ``traffic.steps == 2 * (world_size - 1)``.
        Bytes per rank follow :func:`ringlab.collectives.ring_all_reduce_bytes`.

    Raises:
        ValueError: empty list, ranks with different shapes, unknown op.
        TypeError: unsupported or mixed dtypes, ``avg`` on integers, non-array input.
        ImportError: never for numpy input; torch is imported only when a tensor is passed.
    """
    x = as_rank_array(inputs)
    guard_memory(ring_all_reduce_schedule(x.shape[0]), numel_of(x), dtype_of(x))
    return _run(_plan(ring_all_reduce_schedule, x.shape[0], numel_of(x)), x, op, trace)


def reduce_scatter(inputs, op: str = "sum", trace: bool = False) -> CollectiveResult:
    """Ring reduce-scatter: rank r ends with chunk r of the reduced message (torch.distributed placement).

    ``inputs`` as in :func:`ring_allreduce`; each rank's array is flattened and split into
    ``world_size`` chunks following ``numpy.array_split``. ``outputs`` is ``(world_size, numel // world_size)``
    when the chunks are equal, else a tuple of 1-D arrays. Bytes per rank follow
    :func:`ringlab.collectives.ring_reduce_scatter_bytes`. Raises as :func:`ring_allreduce`.
    """
    x = as_rank_array(inputs)
    n, numel = x.shape[0], numel_of(x)
    guard_memory(ring_reduce_scatter_schedule(n), numel, dtype_of(x))
    full = _run(_plan(ring_reduce_scatter_schedule, n, numel), x, op, trace)
    return CollectiveResult(own_chunks(full.outputs.reshape(n, numel)), full.traffic, full.schedule, full.events)


def all_gather(inputs, trace: bool = False) -> CollectiveResult:
    """Ring all-gather: every rank ends with the concatenation of all ranks' shards.

    Args:
        inputs: ``(world_size, shard_numel)``-like ndarray or tensor (each row flattened), or a
            list of ``world_size`` 1-D arrays (or tensors on one device) whose lengths follow
            ``numpy.array_split`` of their total (the first ones may hold one element more), of one dtype.

    Returns:
        :class:`CollectiveResult` with ``outputs`` of shape ``(world_size, total_numel)``.
        Bytes per rank follow :func:`ringlab.collectives.ring_all_gather_bytes`.

    Raises:
        ValueError: empty input, or shard lengths that do not follow the array_split layout.
        TypeError: unsupported or mixed dtypes.
    """
    return gather_shards(lambda n, numel: _plan(ring_all_gather_schedule, n, numel), inputs, trace)


def gather_shards(plan_for, inputs, trace: bool) -> CollectiveResult:
    """Run an all-gather plan ``plan_for(world_size, numel)`` on per-rank shards (arrays or tensors).

    Each rank's shard is placed at its own chunk of its output row first (setup, not traffic).
    Raises ValueError when the shard lengths do not follow numpy.array_split of their total.
    """
    shards = rank_shards(inputs)
    n = len(shards)
    sizes = np.array([s.shape[0] for s in shards], dtype=np.int64)
    numel = int(sizes.sum())
    if not np.array_equal(sizes, chunk_sizes(numel, n)):
        raise ValueError(f"inputs: shard lengths {sizes.tolist()} do not follow numpy.array_split of {numel} "
                         f"elements over {n} ranks ({chunk_sizes(numel, n).tolist()})")
    plan = plan_for(n, numel)
    guard_memory(plan.schedule, numel, dtype_of(shards[0]))
    if is_tensor(shards[0]):
        import torch

        out = torch.empty((n, numel), dtype=shards[0].dtype, device=shards[0].device)
    else:
        out = np.empty((n, numel), dtype=shards[0].dtype)
    bounds = chunk_bounds(numel, n)
    for r, shard in enumerate(shards):  # each rank places its own shard: setup, not communication
        out[r, bounds[r]:bounds[r + 1]] = shard
    counts, events = execute(plan, None, out, None, trace)
    return CollectiveResult(out, traffic_of(counts), plan.schedule, events)


def rank_shards(inputs) -> list:
    """One flat shard per rank from an ndarray/tensor ``(world_size, ...)`` or a list of arrays/tensors.

    List entries may differ in length (all-gather inputs) but not in dtype. Returns a list of 1-D
    numpy arrays or torch tensors. Raises TypeError for another container, mixed or unsupported
    dtypes; ValueError for an empty list.
    """
    if isinstance(inputs, np.ndarray) or is_tensor(inputs):
        x = as_rank_array(inputs)
        return list(x.reshape(x.shape[0], numel_of(x)))
    if isinstance(inputs, (list, tuple)) and any(map(is_tensor, inputs)):
        return _as_rank_tensor(inputs, "inputs", same_shape=False)
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"inputs must be an ndarray (world_size, ...) or a list of arrays, got {type(inputs).__name__}")
    if not inputs:
        raise ValueError("inputs is empty: pass one shard per rank (world_size >= 1)")
    shards = [np.asarray(s).reshape(-1) for s in inputs]
    dtypes = {s.dtype for s in shards}
    if len(dtypes) > 1:
        raise TypeError(f"inputs: ranks hold different dtypes {sorted(map(str, dtypes))}; all must match")
    check_dtype(shards[0].dtype)
    return shards
