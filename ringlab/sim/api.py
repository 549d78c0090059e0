"""Public simulator entry points: ``ring_allreduce``, ``reduce_scatter``, ``all_gather``.

Inputs are numpy arrays; rank r's data is row r of a ``(world_size, *shape)`` array, or the
r-th array of a list. Results are :class:`CollectiveResult` objects whose ``traffic`` holds
the bytes each rank sent and received, counted by the executor while it moved the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ringlab.collectives import (
    Schedule,
    chunk_sizes,
    ring_all_gather,
    ring_all_reduce,
    ring_reduce_scatter,
)

from .executor import Events, Plan, compile_schedule, execute
from .ops import UFUNCS, check_dtype, check_op


@dataclass(frozen=True)
class Traffic:
    """Bytes moved by each rank, counted from the chunks the executor sent.

    Attributes:
        bytes_sent: int64 ``(world_size,)``, total bytes each rank sent.
        bytes_received: int64 ``(world_size,)``.
        per_step_sent: int64 ``(steps, world_size)``, bytes each rank sent at each step.
        per_step_received: int64 ``(steps, world_size)``.
        steps: number of communication steps of the schedule.
    """

    bytes_sent: np.ndarray
    bytes_received: np.ndarray
    per_step_sent: np.ndarray
    per_step_received: np.ndarray
    steps: int

    @property
    def total_bytes(self) -> int:
        """Bytes sent by all ranks together."""
        return int(self.bytes_sent.sum())


@dataclass(frozen=True)
class CollectiveResult:
    """What a simulated collective returns.

    Attributes:
        outputs: every rank's result. ``(world_size, *shape)`` for all_reduce and all_gather
            (the gathered message is flat, ``(world_size, numel)``); for reduce_scatter an array
            ``(world_size, numel // world_size)`` when the chunks are equal, else a tuple of 1-D arrays.
        traffic: the :class:`Traffic` counters.
        schedule: the :class:`~ringlab.collectives.Schedule` that ran.
        events: per-transfer :class:`~ringlab.sim.executor.Events` when ``trace=True``, else None.
    """

    outputs: np.ndarray | tuple
    traffic: Traffic
    schedule: Schedule
    events: Events | None = field(default=None, repr=False)


def as_rank_array(inputs, name: str = "inputs") -> np.ndarray:
    """Return ``inputs`` as one ``(world_size, *shape)`` numpy array after validating it.

    Accepts an ndarray with a leading rank axis or a list/tuple of equal-shape, equal-dtype arrays.
    Raises ValueError (empty, ragged, no rank axis) or TypeError (unsupported or mixed dtypes).
    """
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


@lru_cache(maxsize=64)
def _plan(builder, world_size: int, numel: int) -> Plan:
    return compile_schedule(builder(world_size), numel)


def _traffic(sent: np.ndarray, received: np.ndarray) -> Traffic:
    return Traffic(sent.sum(axis=0), received.sum(axis=0), sent, received, int(sent.shape[0]))


def run_schedule(schedule: Schedule, inputs, op: str = "sum", trace: bool = False) -> CollectiveResult:
    """Run any schedule whose ranks start with the full message (all_reduce, reduce_scatter shapes).

    ``inputs`` as in :func:`as_rank_array`. Returns the full ``(world_size, *shape)`` working
    buffer as ``outputs``; chunks outside ``schedule.outputs`` keep intermediate values.
    """
    x = as_rank_array(inputs)
    _check_world(schedule.world_size, x)
    return _run(compile_schedule(schedule, x[0].size), x, op, trace)


def _check_world(world_size: int, x: np.ndarray) -> None:
    if x.shape[0] != world_size:
        raise ValueError(f"inputs hold {x.shape[0]} ranks but the schedule is for world_size={world_size}")


def _run(plan: Plan, x: np.ndarray, op: str, trace: bool) -> CollectiveResult:
    check_op(op, x.dtype)
    n = x.shape[0]
    flat = x.reshape(n, -1)
    out = np.empty_like(flat)
    sent, received, events = execute(plan, flat, out, UFUNCS[op], trace)
    if op == "avg":
        np.divide(out, np.asarray(n, dtype=out.dtype), out=out)
    return CollectiveResult(out.reshape(x.shape), _traffic(sent, received), plan.schedule, events)


def ring_allreduce(inputs, op: str = "sum", trace: bool = False) -> CollectiveResult:
    """Ring all-reduce of one array per rank, simulated in-process.

    Args:
        inputs: ``(world_size, *shape)`` ndarray, or a list of ``world_size`` arrays of equal
            shape and dtype. Dtypes: int8/16/32/64, uint8/16/32/64, float16/32/64, bfloat16 (ml_dtypes).
        op: ``"sum" | "prod" | "max" | "min" | "avg"``; integers wrap on overflow (see :mod:`ringlab.sim.ops`).
        trace: keep every transfer in ``result.events`` (slower; for pictures).

    Returns:
        :class:`CollectiveResult`; ``outputs`` has the input's shape and dtype and every row is the
        reduction, bit-identical across ranks. ``traffic.steps == 2 * (world_size - 1)``.
        Bytes per rank follow :func:`ringlab.collectives.ring_all_reduce_bytes`.

    Raises:
        ValueError: empty list, ranks with different shapes, unknown op.
        TypeError: unsupported or mixed dtypes, ``avg`` on integers, non-array input.
    """
    x = as_rank_array(inputs)
    return _run(_plan(ring_all_reduce, x.shape[0], x[0].size), x, op, trace)


def reduce_scatter(inputs, op: str = "sum", trace: bool = False) -> CollectiveResult:
    """Ring reduce-scatter: rank r ends with chunk r of the reduced message (torch.distributed placement).

    ``inputs`` as in :func:`ring_allreduce`; each rank's array is flattened and split into
    ``world_size`` chunks following ``numpy.array_split``. ``outputs`` is ``(world_size, numel // world_size)``
    when the chunks are equal, else a tuple of 1-D arrays. Bytes per rank follow
    :func:`ringlab.collectives.ring_reduce_scatter_bytes`. Raises as :func:`ring_allreduce`.
    """
    x = as_rank_array(inputs)
    n, numel = x.shape[0], x[0].size
    full = _run(_plan(ring_reduce_scatter, n, numel), x, op, trace)
    flat = full.outputs.reshape(n, -1)
    bounds = np.concatenate([[0], np.cumsum(chunk_sizes(numel, n))])
    if numel % n == 0:
        outputs = flat.reshape(n, n, numel // n)[np.arange(n), np.arange(n)]
    else:
        outputs = tuple(flat[r, bounds[r]:bounds[r + 1]].copy() for r in range(n))
    return CollectiveResult(outputs, full.traffic, full.schedule, full.events)


def all_gather(inputs, trace: bool = False) -> CollectiveResult:
    """Ring all-gather: every rank ends with the concatenation of all ranks' shards.

    Args:
        inputs: ``(world_size, shard_numel)``-like ndarray (each row flattened), or a list of
            ``world_size`` 1-D arrays whose lengths follow ``numpy.array_split`` of their total
            (the first ones may hold one element more), of one dtype.

    Returns:
        :class:`CollectiveResult` with ``outputs`` of shape ``(world_size, total_numel)``.
        Bytes per rank follow :func:`ringlab.collectives.ring_all_gather_bytes`.

    Raises:
        ValueError: empty input, or shard lengths that do not follow the array_split layout.
        TypeError: unsupported or mixed dtypes.
    """
    shards = _shards(inputs)
    n = len(shards)
    sizes = np.array([s.size for s in shards], dtype=np.int64)
    numel = int(sizes.sum())
    if not np.array_equal(sizes, chunk_sizes(numel, n)):
        raise ValueError(f"inputs: shard lengths {sizes.tolist()} do not follow numpy.array_split of {numel} "
                         f"elements over {n} ranks ({chunk_sizes(numel, n).tolist()})")
    plan = _plan(ring_all_gather, n, numel)
    out = np.empty((n, numel), dtype=shards[0].dtype)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for r, shard in enumerate(shards):  # each rank places its own shard: setup, not communication
        out[r, bounds[r]:bounds[r + 1]] = shard
    sent, received, events = execute(plan, None, out, None, trace)
    return CollectiveResult(out, _traffic(sent, received), plan.schedule, events)


def _shards(inputs) -> list[np.ndarray]:
    if isinstance(inputs, np.ndarray):
        x = as_rank_array(inputs)
        return list(x.reshape(x.shape[0], -1))
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
