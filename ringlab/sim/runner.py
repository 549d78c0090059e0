"""Run any registered (collective, algorithm) pair in the numpy simulator.

``run_collective(collective, algorithm, inputs, op="sum", root=0, trace=False)`` takes one array per
rank and returns a :class:`~ringlab.sim.api.CollectiveResult` whose ``outputs`` follow torch.distributed:

==============  ==========================================  =============================================
collective      inputs                                      outputs
==============  ==========================================  =============================================
all_reduce      ``(N, *shape)``                             ``(N, *shape)``, the reduction on every rank
reduce_scatter  ``(N, *shape)``, flattened, N chunks        rank r: chunk r of the reduction;
                (``numpy.array_split``)                     ``(N, numel // N)`` or a tuple of 1-D arrays
all_gather      shards as for :func:`ringlab.all_gather`    ``(N, total_numel)``
broadcast       ``(N, *shape)``; only row ``root`` is read  ``(N, *shape)``, root's data on every rank
reduce          ``(N, *shape)``                             ``(*shape)``: the reduction held by ``root``
all_to_all      ``(N, numel)`` send buffers, block d for    ``(N, numel)``: rank d's blocks from ranks
                rank d (layout in                           0..N-1 in order
                :mod:`ringlab.collectives.alltoall`)
==============  ==========================================  =============================================

Bytes are counted by the executor from what it moved; :func:`expected_outputs` computes every
collective directly (no schedule) for checking.
"""

from __future__ import annotations


import numpy as np

from ringlab.collectives import chunk_bounds, chunk_sizes, get_algorithm, get_schedule
from ringlab.collectives.registry import REDUCING

from .api import (
    CollectiveResult,
    as_rank_array,
    divide_by_world_size,
    dtype_of,
    gather_shards,
    guard_memory,
    is_tensor,
    numel_of,
    own_chunks,
    rank_shards,
    traffic_of,
)
from .executor import Plan, compile_schedule, execute
from .ops import UFUNCS, check_op
from .plan import cached_plans
from .reference import direct_reduce


@cached_plans
def _plan(collective: str, algorithm: str, world_size: int, numel: int, root: int) -> Plan:
    return compile_schedule(get_schedule(collective, algorithm, world_size, root), numel)


def run_collective(collective: str, algorithm: str, inputs, op: str = "sum", root: int = 0,
                   trace: bool = False) -> CollectiveResult:
    """Simulate ``collective`` with ``algorithm`` on one array per rank (table in the module docstring).

    Args:
        collective: ``all_reduce | reduce_scatter | all_gather | broadcast | reduce | all_to_all``.
        algorithm: one of :func:`ringlab.collectives.algorithms_for` ``(collective)``.
        inputs: ndarray with a leading rank axis, or a list of per-rank arrays of one dtype
            (int8..uint64, float16/32/64, bfloat16).
        op: ``sum | prod | max | min | avg`` for the reducing collectives; ignored by the others.
        root: the root rank of broadcast and reduce; must be 0 for the others.
        trace: keep every transfer in ``result.events``.

    Returns:
        :class:`~ringlab.sim.api.CollectiveResult`; ``traffic.bytes_sent`` equals
        ``ALGORITHMS[(collective, algorithm)].bytes_sent(N, numel, itemsize, root)``.

    Raises:
        ValueError: unknown collective/algorithm (the message lists valid pairs), bad root, ragged inputs.
        TypeError: unsupported dtype, ``avg`` on integers.
    """
    get_algorithm(collective, algorithm)  # name errors first
    if collective == "all_gather":
        return _all_gather(algorithm, inputs, root, trace)
    x = as_rank_array(inputs)
    n, numel, dtype = x.shape[0], numel_of(x), dtype_of(x)
    if collective in REDUCING:
        check_op(op, dtype)
    guard_memory(get_schedule(collective, algorithm, n, int(root)), numel, dtype)
    plan = _plan(collective, algorithm, n, numel, int(root))
    flat = x.reshape(n, numel)  # torch refuses -1 when numel is 0
    if collective == "all_to_all":
        flat = _to_shift_layout(flat)
    out = _empty_like(flat)
    counts, events = execute(plan, flat, out, UFUNCS[op] if collective in REDUCING else None, trace)
    if op == "avg" and collective in REDUCING:
        divide_by_world_size(out, n)
    if collective == "reduce_scatter":
        outputs = own_chunks(out)
    elif collective == "reduce":
        outputs = out[root].reshape(x.shape[1:])
    elif collective == "all_to_all":
        outputs = _from_shift_layout(out)
    else:
        outputs = out.reshape(x.shape)
    return CollectiveResult(outputs, traffic_of(counts), plan.schedule, events)


def _empty_like(x):
    """An uninitialised contiguous array or tensor like ``x`` (same dtype and device)."""
    if is_tensor(x):
        import torch

        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return np.empty_like(x)


def _all_gather(algorithm: str, inputs, root: int, trace: bool) -> CollectiveResult:
    return gather_shards(lambda n, numel: _plan("all_gather", algorithm, n, numel, int(root)), inputs, trace)


def _to_shift_layout(flat: np.ndarray) -> np.ndarray:
    """Natural send buffers (block d for rank d) -> shift layout (chunk k: block for rank r + k).

    Rank s's blocks have sizes ``np.roll(c, s)``, so the shift layout is its row rotated left by the
    elements of blocks ``0 .. s-1``.
    """
    n, numel = flat.shape
    prefix = chunk_bounds(numel, n)
    out = _empty_like(flat)
    for s in range(n):
        off = numel - int(prefix[n - s])  # elements of rank s's blocks for ranks 0 .. s-1
        out[s, :numel - off] = flat[s, off:]
        out[s, numel - off:] = flat[s, :off]
    return out


def _from_shift_layout(buf: np.ndarray) -> np.ndarray:
    """Shift layout after the exchange (chunk k: block from rank d - k) -> blocks in source-rank order."""
    n, numel = buf.shape
    prefix = chunk_bounds(numel, n)
    out = _empty_like(buf)
    cat = np.concatenate
    if is_tensor(buf):
        import torch

        cat = torch.cat
    for d in range(n):
        ks = [(d - s) % n for s in range(n)]
        cat([buf[d, prefix[k]:prefix[k + 1]] for k in ks], out=out[d])
    return out


def all_to_all_blocks(world_size: int, numel: int) -> np.ndarray:
    """Sizes of the blocks each rank sends: ``sizes[s, d]`` elements from rank s to rank d (int64 ``(N, N)``).

    ``numel // N`` everywhere when N divides numel, else ``chunk_sizes(numel, N)[(d - s) % N]``.
    """
    c = chunk_sizes(numel, world_size)
    s, d = np.meshgrid(np.arange(world_size), np.arange(world_size), indexing="ij")
    return c[(d - s) % world_size]


def expected_outputs(collective: str, inputs, op: str = "sum", root: int = 0):
    """The collective's result computed directly, without a schedule, for checking.

    Returns ``(expected, tolerance)``: for the reducing collectives, :func:`~ringlab.sim.reference.direct_reduce`'s
    float64 reduction (flattened per rank for reduce_scatter: the full reduced message) and its error bound
    (None for integers); for the others the exact expected outputs in the input dtype and None.
    Shapes match :func:`run_collective`'s outputs, except reduce_scatter (the full reduced message, 1-D).
    """
    if collective == "all_gather":
        shards = rank_shards(inputs)
        full = np.concatenate(shards)
        return np.broadcast_to(full, (len(shards), full.size)), None
    x = as_rank_array(inputs)
    n = x.shape[0]
    if collective in REDUCING:
        expected, tol = direct_reduce(x, op)
        if collective == "reduce_scatter":
            return expected.reshape(-1), None if tol is None else tol.reshape(-1)
        if collective == "all_reduce":
            return np.broadcast_to(expected, x.shape), None if tol is None else np.broadcast_to(tol, x.shape)
        return expected, tol
    if collective == "broadcast":
        return np.broadcast_to(x[root], x.shape), None
    flat = x.reshape(n, -1)
    sizes = all_to_all_blocks(n, flat.shape[1])
    offsets = np.concatenate([np.zeros((n, 1), dtype=np.int64), np.cumsum(sizes, axis=1)], axis=1)
    out = np.empty_like(flat)
    for d in range(n):  # rank d receives block d of every rank s, in rank order
        np.concatenate([flat[s, offsets[s, d]:offsets[s, d + 1]] for s in range(n)], out=out[d])
    return out, None
