"""Run :class:`~ringlab.collectives.Schedule` objects over a real process group.

Each rank walks the same schedule the simulator runs, keeps the transfers of each step whose
``src`` or ``dst`` is itself, and posts them together with ``torch.distributed.batch_isend_irecv``
on views of its own flat buffer. Posting a whole step at once is what keeps the ring free of
deadlock: no rank waits for its send to finish before it posts its receive, so the send order
on the ring cannot matter. A received chunk is combined into (or copied over) the rank's own
copy as soon as its request completes, but never into a chunk the rank is still sending in
that step: every send reads the value the rank held at the start of the step, as the
schedule's semantics require. The step ends when all its requests have completed.

Each rank keeps one receive buffer per device and dtype between calls (as large as the
largest chunk it has had to reduce), because allocating it on every call was measurably slow.

Bytes are counted from the tensors handed to ``isend``/``irecv`` (``numel * element_size``);
tests compare them with the closed forms of :mod:`ringlab.collectives.ring`.

Works with gloo (CPU tensors) and nccl (CUDA tensors; call ``torch.cuda.set_device`` first),
in processes started by :func:`ringlab.dist.launch` or by ``torchrun`` (env:// rendezvous):
the functions only need an initialised default process group, or the ``group`` you pass.

Names: the functions that run a collective start with ``run_`` (:func:`run_ring_all_reduce`,
:func:`run_ring_reduce_scatter`, :func:`run_ring_all_gather`, :func:`run_schedule`); the schedules
they run are ``ringlab.collectives.ring_*_schedule``. The runners' earlier names
(``ring_all_reduce`` ...) stay as aliases, listed in :data:`OLD_NAMES`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ringlab.collectives import Schedule, chunk_bounds, chunk_sizes
from ringlab.collectives import ring_all_gather_schedule, ring_all_reduce_schedule, ring_reduce_scatter_schedule
from ringlab.optional import require_torch
from ringlab.sim.ops import OPS, UFUNCS

# Largest message one chunk transfer is cut into (see _execute); tuned on gloo over loopback.
PIECE_BYTES = 1 << 22


def torch_modules():
    """``(torch, torch.distributed)``, or ImportError naming the extra (:func:`ringlab.optional.require_torch`)."""
    return require_torch("ringlab.dist")


class RankResult(NamedTuple):
    """What one rank gets back from a ring collective.

    Attributes:
        output: this rank's result tensor (on the input's device).
        bytes_sent: bytes of the tensors this rank passed to ``isend``, int.
        bytes_received: bytes of the tensors this rank passed to ``irecv``, int.
    """

    output: object
    bytes_sent: int
    bytes_received: int


class _Recv(NamedTuple):
    chunk: int
    peer: int
    reduce: bool
    scratch: int | None  # offset in the scratch buffer, None when it lands in place


class _Step(NamedTuple):
    sends: tuple[tuple[int, int], ...]  # (chunk, peer)
    recvs: tuple[_Recv, ...]
    sends_first: bool  # a received chunk is also sent in this step: let the sends finish before writing it


def _rank_steps(schedule: Schedule, rank: int, sizes: np.ndarray) -> tuple[tuple[_Step, ...], int]:
    """This rank's part of every step, and the scratch elements the largest step needs.

    A receive lands directly in the rank's chunk only when it overwrites (no reduce), the chunk
    is not also being sent in the step (the send must read the old value) and no other receive
    of the step targets it; otherwise it lands in scratch and is applied after the step.
    """
    steps, scratch_need = [], 0
    for step in schedule.steps:  # numpy per step: a rank's share is found without a loop over transfers
        e = step.expanded()
        out = e.src == rank
        sends = tuple(zip(e.chunk[out].tolist(), e.dst[out].tolist()))
        into = e.dst == rank
        mine = list(zip(e.chunk[into].tolist(), e.src[into].tolist(), e.reduce[into].tolist()))
        sent_chunks = {c for c, _ in sends}
        targets = [c for c, _, _ in mine]
        recvs, offset = [], 0
        for chunk, src, reduce in mine:
            if not reduce and chunk not in sent_chunks and targets.count(chunk) == 1:
                recvs.append(_Recv(chunk, src, False, None))
            else:
                recvs.append(_Recv(chunk, src, reduce, offset))
                offset += int(sizes[chunk])
        scratch_need = max(scratch_need, offset)
        steps.append(_Step(sends, tuple(recvs), bool(sent_chunks & set(targets))))
    return tuple(steps), scratch_need


@lru_cache(maxsize=64)
def _ring_steps(builder, world_size: int, rank: int, numel: int):
    schedule = builder(world_size)
    return schedule, _rank_steps(schedule, rank, chunk_sizes(numel, schedule.num_chunks))


def _group_info(group) -> tuple[int, int, object]:
    """This rank, the group size, and a map from group rank to the global rank P2POp wants."""
    _, dist = torch_modules()
    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("no default process group: call torch.distributed.init_process_group first "
                           "(torchrun does env:// for you), or run the function through ringlab.dist.launch")
    rank, world_size = dist.get_rank(group), dist.get_world_size(group)
    if rank < 0:
        raise ValueError("group: this process is not a member of the group it was given")
    if group is None:
        return rank, world_size, lambda r: r
    return rank, world_size, lambda r: dist.get_global_rank(group, r)


def _combine(op: str):
    """The torch function named like the simulator's ufunc for ``op`` (``avg`` adds; the caller divides)."""
    torch, _ = torch_modules()
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}; got {op!r}")
    return getattr(torch, UFUNCS[op].__name__)


_SCRATCH: dict = {}  # (device, dtype) -> the largest receive buffer needed so far, reused across calls


def _scratch(torch, numel: int, like):
    """A reused buffer of at least ``numel`` elements: allocating (and page-faulting) it on every
    call added about 15 ms per 32 MiB received, some 15% of a 64 MiB gloo all-reduce here."""
    key = (like.device, like.dtype)
    held = _SCRATCH.get(key)
    if held is None or held.numel() < numel:
        held = _SCRATCH[key] = torch.empty(numel, dtype=like.dtype, device=like.device)
    return held[:numel]


def _pieces(lo: int, hi: int, piece: int):
    """Split the element range [lo, hi) into consecutive pieces of at most ``piece`` elements (one if empty)."""
    return [(lo, hi)] if hi - lo <= piece else [(a, min(a + piece, hi)) for a in range(lo, hi, piece)]


def _execute(steps, scratch_need: int, buffer, bounds: list[int], op: str, group, peer) -> tuple[int, int]:
    """Post each step's sends and receives as one batch, then apply each receive as soon as it completes.

    Chunks larger than :data:`PIECE_BYTES` travel as several messages (both ends cut them the
    same way), so on gloo, whose requests complete one by one, the reduction of one piece
    overlaps the arrival of the next. The schedule is unchanged: the pieces of a chunk go
    between the same two ranks in the same step.
    """
    torch, dist = torch_modules()
    combine = _combine(op)
    scratch = _scratch(torch, scratch_need, buffer)
    piece = max(1, PIECE_BYTES // buffer.element_size())
    sent = received = 0
    for step in steps:
        ops, landed = [], []
        for chunk, dst in step.sends:
            for lo, hi in _pieces(bounds[chunk], bounds[chunk + 1], piece):
                ops.append(dist.P2POp(dist.isend, buffer[lo:hi], peer(dst), group))
                sent += (hi - lo) * buffer.element_size()
        n_sends = len(ops)
        for recv in step.recvs:
            start = bounds[recv.chunk]
            for lo, hi in _pieces(start, bounds[recv.chunk + 1], piece):
                view = buffer[lo:hi] if recv.scratch is None else \
                    scratch[recv.scratch + lo - start:recv.scratch + hi - start]
                landed.append((len(ops), recv, buffer[lo:hi], view))
                ops.append(dist.P2POp(dist.irecv, view, peer(recv.peer), group))
                received += (hi - lo) * buffer.element_size()
        if not ops:
            continue
        works = dist.batch_isend_irecv(ops)
        if len(works) != len(ops) or step.sends_first:  # nccl returns one request for the whole batch
            for work in works:
                work.wait()
            works = None
        for index, recv, own, view in landed:
            if works is not None:
                works[index].wait()
            if recv.reduce:
                combine(own, view, out=own)
            elif recv.scratch is not None:
                own.copy_(view)
        if works is not None:  # now the sends; each request is waited once (a second wait on gloo can block)
            for work in works[:n_sends]:
                work.wait()
    return sent, received


def _check_tensor(tensor, name: str):
    torch, _ = torch_modules()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    return torch


def run_schedule(schedule: Schedule, buffer, op: str = "sum", group=None) -> tuple[int, int]:
    """Run any schedule in place on this rank's flat, contiguous ``buffer`` (all chunks of the message).

    Chunks follow :func:`ringlab.collectives.chunk_sizes` over ``buffer.numel()``; the buffer must
    hold valid data for the chunks ``schedule.inputs`` lists for this rank. Use this for schedules
    other than the ring (the same ones the simulator runs).

    Returns ``(bytes_sent, bytes_received)`` counted from the tensors passed to isend/irecv.
    Raises ValueError when the group size differs from ``schedule.world_size``, for an unknown
    op, or a non-contiguous 1-D buffer; RuntimeError when no process group is initialised.
    """
    _check_tensor(buffer, "buffer")
    if buffer.dim() != 1 or not buffer.is_contiguous():
        raise ValueError(f"buffer must be a contiguous 1-D tensor, got shape {tuple(buffer.shape)}")
    _combine(op)
    rank, world_size, peer = _group_info(group)
    if world_size != schedule.world_size:
        raise ValueError(f"schedule is for world_size={schedule.world_size} but the group has {world_size} ranks")
    numel = buffer.numel()
    steps, scratch_need = _rank_steps(schedule, rank, chunk_sizes(numel, schedule.num_chunks))
    sent, received = _execute(steps, scratch_need, buffer, chunk_bounds(numel, schedule.num_chunks), op, group, peer)
    if op == "avg":  # the sum, then one division by world_size, as the ring entry points and the simulator do
        buffer.div_(world_size)
    return sent, received


def _run_ring(builder, buffer, op: str, group) -> tuple[int, int]:
    _combine(op)
    rank, world_size, peer = _group_info(group)
    numel = buffer.numel()
    _, (steps, scratch_need) = _ring_steps(builder, world_size, rank, numel)
    sent, received = _execute(steps, scratch_need, buffer, chunk_bounds(numel, world_size), op, group, peer)
    if op == "avg":  # one division by world_size at the end, as NCCL's ncclAvg
        buffer.div_(world_size)
    return sent, received


def run_ring_all_reduce(tensor, op: str = "sum", group=None, out=None) -> RankResult:
    """Ring all-reduce of this rank's ``tensor`` with every rank of ``group`` (default: the world).

    The schedule is :func:`ringlab.collectives.ring_all_reduce_schedule`: ``2 (N - 1)`` steps, chunks
    following ``numpy.array_split``, so any ``numel`` works (also ``numel < N``).

    Args:
        tensor: any shape and device (CPU for gloo, CUDA for nccl); float or integer dtype.
        op: ``"sum" | "prod" | "max" | "min" | "avg"`` (avg = sum, then one division by N).
        group: a process group, or None for the default group.
        out: optional contiguous tensor of the same shape, dtype and device to write into; pass
            ``tensor`` itself to reduce in place as ``dist.all_reduce`` does. Default: a new tensor.

    Returns:
        :class:`RankResult`; ``output`` has ``tensor``'s shape. Bytes equal
        :func:`ringlab.collectives.ring_all_reduce_bytes` ``[rank]`` (sent and received).

    Raises:
        TypeError (not a tensor), ValueError (bad op or ``out``), RuntimeError (no process group).
    """
    torch = _check_tensor(tensor, "tensor")
    if out is None:
        out = tensor.detach().clone(memory_format=torch.contiguous_format)
    else:
        _check_out(out, tensor.shape, tensor)
        if out.data_ptr() != tensor.data_ptr():
            out.copy_(tensor)
    sent, received = _run_ring(ring_all_reduce_schedule, out.view(-1), op, group)
    return RankResult(out, sent, received)


def _check_out(out, shape, like) -> None:
    _check_tensor(out, "out")
    if tuple(out.shape) != tuple(shape) or out.dtype != like.dtype or out.device != like.device:
        raise ValueError(f"out must have shape {tuple(shape)}, dtype {like.dtype} and device {like.device}; "
                         f"got {tuple(out.shape)}, {out.dtype}, {out.device}")
    if not out.is_contiguous():
        raise ValueError("out must be contiguous")


def run_ring_reduce_scatter(tensor, op: str = "sum", group=None) -> RankResult:
    """Ring reduce-scatter: rank r gets chunk r of the reduction of all ranks' ``tensor``.

    ``tensor`` is flattened and split into N chunks following ``numpy.array_split`` (the first
    ``numel % N`` chunks hold one element more), so unlike ``dist.reduce_scatter_tensor`` the
    size need not divide by N. Schedule: :func:`ringlab.collectives.ring_reduce_scatter_schedule`
    (N - 1 steps; at step s rank r sends its partial sum of chunk ``(r - 1 - s) % N``).

    Returns:
        :class:`RankResult` whose ``output`` is a new 1-D tensor of ``chunk_sizes(numel, N)[rank]``
        elements; bytes equal :func:`ringlab.collectives.ring_reduce_scatter_bytes` ``[rank]``.

    Raises as :func:`run_ring_all_reduce`.
    """
    torch = _check_tensor(tensor, "tensor")
    work = tensor.detach().reshape(-1).clone(memory_format=torch.contiguous_format)
    sent, received = _run_ring(ring_reduce_scatter_schedule, work, op, group)
    rank, world_size, _ = _group_info(group)
    bounds = chunk_bounds(work.numel(), world_size)
    return RankResult(work[bounds[rank]:bounds[rank + 1]].clone(), sent, received)


def run_ring_all_gather(shard, group=None, numel: int | None = None, out=None) -> RankResult:
    """Ring all-gather: every rank gets the concatenation of all ranks' flattened ``shard``.

    Args:
        shard: this rank's piece, any shape (flattened). Rank r's piece is chunk r of the result.
        group: a process group, or None for the default group.
        numel: total elements of the gathered message. Default ``shard.numel() * N`` (equal shards);
            give it for uneven shards, whose lengths must follow ``numpy.array_split(numel, N)``.
        out: optional contiguous 1-D tensor of ``numel`` elements to gather into.

    Returns:
        :class:`RankResult` with a 1-D ``output`` of ``numel`` elements; bytes equal
        :func:`ringlab.collectives.ring_all_gather_bytes` ``[rank]`` with the total ``numel``.

    Raises:
        ValueError when this rank's shard length is not chunk ``rank`` of ``array_split(numel, N)``.
    """
    torch = _check_tensor(shard, "shard")
    rank, world_size, _ = _group_info(group)
    total = shard.numel() * world_size if numel is None else int(numel)
    bounds = chunk_bounds(total, world_size)
    if bounds[rank + 1] - bounds[rank] != shard.numel():
        raise ValueError(f"shard on rank {rank} has {shard.numel()} elements but numpy.array_split of numel={total} "
                         f"over {world_size} ranks gives it {bounds[rank + 1] - bounds[rank]}")
    if out is None:
        out = torch.empty(total, dtype=shard.dtype, device=shard.device)
    else:
        _check_out(out, (total,), shard)
    out[bounds[rank]:bounds[rank + 1]] = shard.detach().reshape(-1)  # own piece: placement, not traffic
    sent, received = _run_ring(ring_all_gather_schedule, out, "sum", group)
    return RankResult(out, sent, received)


# The runners' names before they said "run": the same objects, so code written against them runs.
ring_all_reduce = run_ring_all_reduce
ring_reduce_scatter = run_ring_reduce_scatter
ring_all_gather = run_ring_all_gather
OLD_NAMES = ("ring_all_reduce", "ring_reduce_scatter", "ring_all_gather")  # each is ``run_<name>``
